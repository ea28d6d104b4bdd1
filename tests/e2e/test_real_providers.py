"""The run API end to end through each real adapter, against a local server playing the model.

The server plays the demo: get_ticket → update_ticket (assign) → notify_user → the answer.
"""

import json

import pytest

from tests.factories import write_agent
from tests.fake_providers import (
    anthropic_calls_stream,
    anthropic_error,
    anthropic_message,
    anthropic_text_stream,
    openai_calls_stream,
    openai_completion,
    openai_error,
    openai_text_stream,
)
from tools.demo.models import Notification, Ticket

QUESTION = "Why has ticket T-20250318-007 not been handled?"
TICKET = "T-20250318-007"
DEMO_CALLS = [
    ("get_ticket", {"ticket_id": TICKET}),
    ("update_ticket", {"ticket_id": TICKET, "action": "assign", "assignee_id": "agent-li"}),
    ("notify_user", {"user_id": "agent-li", "ticket_id": TICKET, "message": "Please take it."}),
]
ANSWER = "The ticket sat unassigned in the billing queue; I assigned it to agent-li and told them."


def model_reply(provider, stream, call=None, text=None, finish=None, step=1):
    """One model turn in the provider's wire format: a single tool call or a text answer."""
    if call is not None:
        name, arguments = call
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        if provider == "openai":
            calls = [(f"call_{step}", name, raw)]
            if stream:
                return openai_calls_stream(calls, fragment=6, finish_reason=finish or "tool_calls")
            return openai_completion(calls=calls, finish_reason=finish)
        calls = [(f"toolu_{step}", name, raw)]
        if stream:
            return anthropic_calls_stream(calls, fragment=6, stop_reason=finish or "tool_use")
        parsed = [(f"toolu_{step}", name, json.loads(raw))]
        return anthropic_message(calls=parsed, stop_reason=finish)
    if provider == "openai":
        return openai_text_stream(text) if stream else openai_completion(text)
    return anthropic_text_stream(text) if stream else anthropic_message(text)


def demo_replies(provider, stream):
    turns = [model_reply(provider, stream, call=c, step=n) for n, c in enumerate(DEMO_CALLS, 1)]
    return [*turns, model_reply(provider, stream, text=ANSWER)]


@pytest.fixture
def model(request, settings, routes):
    """``(provider, stream, server)`` with HARNESS_MODEL pointing at the local server."""
    provider, stream = request.param
    server = request.getfixturevalue(f"{provider}_server")
    route = f"{provider}:model-test"
    settings.HARNESS_MODEL = route
    routes({route: {"stream": stream, "backoff_s": 0.01}})
    return provider, stream, server


every_adapter = pytest.mark.parametrize(
    "model",
    [("openai", False), ("openai", True), ("anthropic", False), ("anthropic", True)],
    indirect=True,
    ids=["openai", "openai-stream", "anthropic", "anthropic-stream"],
)


def start_run(client, agent="ticket-assistant"):
    return client.post("/api/v1/runs", {"agent": agent, "user": "bob", "input": QUESTION})


def tool_results(body, provider):
    """The tool results the model was sent, as parsed JSON, from a recorded request body."""
    if provider == "openai":
        return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
    return [
        json.loads(block["content"])
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
        if block["type"] == "tool_result"
    ]


@every_adapter
def test_the_demo_run_goes_through_the_adapter(acme, model):
    provider, stream, server = model
    server.queue(*demo_replies(provider, stream))

    response = start_run(acme)

    assert response.status_code == 200
    run = response.json()
    assert run["status"] == "succeeded"
    assert run["answer"] == ANSWER
    assert (run["model_route"], run["steps"]) == (f"{provider}:model-test", 4)
    usage = run["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (
        48,
        20,
        68,
    )
    assert usage["budget"]["tokens_used"] == 68  # the provider's real usage, settled
    ticket = Ticket.objects.get(tenant="acme", ticket_id=TICKET)
    assert (ticket.status, ticket.assignee_id) == ("assigned", "agent-li")
    assert Notification.objects.get(tenant="acme").recipient_id == "agent-li"
    assert len(server.requests) == 4
    first_result = tool_results(server.requests[1].body, provider)[0]
    assert first_result["ok"] is True
    assert first_result["result"]["ticket_id"] == TICKET
    last_results = tool_results(server.requests[3].body, provider)
    assert [r["ok"] for r in last_results] == [True, True, True]


@every_adapter
def test_every_model_call_span_lists_its_attempts(acme, model):
    provider, stream, server = model
    replies = demo_replies(provider, stream)
    error = openai_error(503) if provider == "openai" else anthropic_error(529, "overloaded_error")
    server.queue(error, *replies)

    run = start_run(acme).json()
    spans = acme.get(run["links"]["trace"]).json()["spans"]

    model_calls = [s["attributes"] for s in spans if s["kind"] == "model_call"]
    first = model_calls[0]["attempts"]
    assert [(a["attempt"], a["status"], a.get("http_status")) for a in first] == [
        (1, "server_error", 503 if provider == "openai" else 529),
        (2, "ok", None),
    ]
    assert all(a["route"] == f"{provider}:model-test" for a in first)
    assert all(len(call["attempts"]) == 1 for call in model_calls[1:])


@every_adapter
def test_a_tool_the_model_invents_is_refused_and_the_model_told_which_exist(acme, model):
    provider, stream, server = model
    server.queue(
        model_reply(provider, stream, call=("drop_database", {"confirm": True})),
        model_reply(provider, stream, text="I cannot do that."),
    )

    run = start_run(acme).json()

    assert (run["status"], run["answer"]) == ("succeeded", "I cannot do that.")
    (result,) = tool_results(server.requests[1].body, provider)
    assert result["ok"] is False
    assert result["error"]["code"] == "unknown_tool"
    assert "get_ticket" in result["error"]["message"]


@every_adapter
def test_a_call_cut_off_by_the_token_limit_is_not_executed_and_the_model_told_why(acme, model):
    provider, stream, server = model
    if provider == "anthropic" and not stream:
        cut = model_reply(provider, stream, call=DEMO_CALLS[1], finish="max_tokens")
    else:
        partial = json.dumps(DEMO_CALLS[1][1])[:-12]  # the value of assignee_id is cut
        finish = "length" if provider == "openai" else "max_tokens"
        cut = model_reply(provider, stream, call=("update_ticket", partial), finish=finish)
    server.queue(cut, model_reply(provider, stream, text="The update did not go through."))

    run = start_run(acme).json()

    assert run["status"] == "succeeded"
    ticket = Ticket.objects.get(tenant="acme", ticket_id=TICKET)
    assert ticket.assignee_id in ("", None)
    (result,) = tool_results(server.requests[1].body, provider)
    assert result["error"]["code"] == "invalid_arguments_json"
    assert "token limit" in result["error"]["message"]
    assert "update_ticket" in result["error"]["message"]


@pytest.mark.parametrize(
    "model", [("openai", False), ("openai", True)], indirect=True, ids=["plain", "stream"]
)
def test_arguments_that_cannot_be_repaired_become_an_error_naming_the_tool(acme, model):
    provider, stream, server = model
    server.queue(
        model_reply(provider, stream, call=("get_ticket", "ticket T-20250318-007 please")),
        model_reply(provider, stream, text="Sorry."),
    )

    run = start_run(acme).json()

    assert run["status"] == "succeeded"
    (result,) = tool_results(server.requests[1].body, provider)
    assert result["error"]["code"] == "invalid_arguments_json"
    assert "get_ticket" in result["error"]["message"]


def test_an_agent_falls_back_to_its_next_model_when_the_first_fails(
    acme, agent_dir, routes, openai_server, anthropic_server
):
    agent = write_agent(
        agent_dir, model="openai:down", fallback_models=["anthropic:claude-test"], max_steps=6
    )
    routes({"openai:down": {"retries": 0}})
    openai_server.queue(*(openai_error(500) for _ in range(4)))
    anthropic_server.queue(*demo_replies("anthropic", stream=False))

    run = start_run(acme, agent=agent["name"]).json()

    assert (run["status"], run["model_route"]) == ("succeeded", "anthropic:claude-test")
    assert run["answer"] == ANSWER
    spans = acme.get(run["links"]["trace"]).json()["spans"]
    first = next(s for s in spans if s["kind"] == "model_call")["attributes"]
    assert [(a["route"], a["status"]) for a in first["attempts"]] == [
        ("openai:down", "server_error"),
        ("anthropic:claude-test", "ok"),
    ]


def test_a_run_whose_model_cannot_be_reached_fails_with_the_reason(acme, settings, routes):
    settings.HARNESS_MODEL = "openai:nowhere"
    settings.OPENAI_API_KEY = "sk-test"
    routes(
        {"openai:nowhere": {"base_url": "http://127.0.0.1:9/v1", "retries": 1, "backoff_s": 0.01}}
    )

    run = start_run(acme).json()

    assert run["status"] == "failed"
    assert "openai:nowhere failed after 2 attempts" in run["status_detail"]
    spans = acme.get(run["links"]["trace"]).json()["spans"]
    model_call = next(s for s in spans if s["kind"] == "model_call")
    assert model_call["status"] == "error"
    assert model_call["attributes"]["error_code"] == "provider_unavailable"
    assert [a["status"] for a in model_call["attributes"]["attempts"]] == ["connection_error"] * 2
