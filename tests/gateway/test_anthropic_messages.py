"""The Anthropic adapter against a local server speaking the Messages API."""

import json
import threading

import pytest

from gateway.errors import StreamInterrupted
from gateway.messages import Message, ToolCall
from gateway.services import complete
from gateway.streaming import TRUNCATED_CALL_REASON
from tests.fake_providers import (
    anthropic_calls_stream,
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    anthropic_text_stream,
    anthropic_usage,
    block_delta,
    block_start,
    block_stop,
    message_delta,
    message_start,
)
from tests.gateway.conftest import CONVERSATION, GET_TICKET

ROUTE = "anthropic:claude-test"
TICKET_ARGS = '{"ticket_id": "T-20250318-007", "fields": ["status", "assignee_id"]}'


@pytest.fixture
def stream(request, routes):
    routes({ROUTE: {"stream": request.param, "backoff_s": 0.01}})
    return request.param


both_modes = pytest.mark.parametrize("stream", [False, True], indirect=True, ids=["plain", "sse"])


def calls_reply(stream, calls, stop_reason="tool_use"):
    if stream:
        return anthropic_calls_stream(calls, stop_reason=stop_reason)
    return anthropic_message(
        calls=[(i, n, json.loads(a) if a else {}) for i, n, a in calls], stop_reason=stop_reason
    )


@both_modes
def test_a_plain_answer_comes_back_with_its_usage(anthropic_server, stream):
    if stream:
        anthropic_server.queue(anthropic_text_stream("The ticket waits in the billing queue."))
    else:
        anthropic_server.queue(anthropic_message("The ticket waits in the billing queue."))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.text == "The ticket waits in the billing queue."
    assert (response.finish_reason, response.provider_finish_reason) == ("stop", "end_turn")
    assert (response.route, response.model) == (ROUTE, "claude-test")
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (12, 5)


def test_cache_reads_and_writes_count_as_prompt_tokens(anthropic_server):
    usage = anthropic_usage(input=100, output=20, cache_read=900, cache_creation=50)
    anthropic_server.queue(anthropic_message("ok", usage=usage))

    response = complete(ROUTE, CONVERSATION, [])

    assert (response.usage.prompt_tokens, response.usage.cached_tokens) == (1050, 900)
    assert response.usage.completion_tokens == 20


def test_the_request_carries_system_tool_use_and_tool_result_blocks(anthropic_server):
    anthropic_server.queue(anthropic_message("done"))
    calls = (
        ToolCall(id="toolu_1", name="get_ticket", arguments={"ticket_id": "T-1"}, index=0),
        ToolCall(id="toolu_2", name="get_ticket", arguments={"ticket_id": "T-2"}, index=1),
    )
    messages = [
        *CONVERSATION,
        Message(
            role="assistant",
            content="Looking.",
            tool_calls=calls,
            reasoning="Two tickets.",
            reasoning_signature="sig-1",
        ),
        Message(role="tool", content='{"ok": true}', tool_call_id="toolu_1", name="get_ticket"),
        Message(role="tool", content='{"ok": false}', tool_call_id="toolu_2", is_error=True),
        Message(role="user", content="Thanks", images=("data:image/png;base64,iVBORw0K",)),
    ]

    complete(ROUTE, messages, [GET_TICKET], tool_choice="get_ticket")

    received = anthropic_server.requests[0]
    assert received.path == "/v1/messages"
    body = received.body
    assert (body["model"], body["max_tokens"]) == ("claude-test", 4096)
    assert body["system"] == "You are a support assistant."
    assert body["tool_choice"] == {"type": "tool", "name": "get_ticket"}
    assert body["tools"] == [
        {
            "name": "get_ticket",
            "description": GET_TICKET.description,
            "input_schema": GET_TICKET.parameters,
        }
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": CONVERSATION[1].content}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Two tickets.", "signature": "sig-1"},
                {"type": "text", "text": "Looking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_ticket",
                    "input": {"ticket_id": "T-1"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "get_ticket",
                    "input": {"ticket_id": "T-2"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"ok": true}'},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": '{"ok": false}',
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
                },
            ],
        },
    ]


@both_modes
def test_parallel_tool_calls_stay_separate_and_in_order(anthropic_server, stream):
    calls = [
        ("toolu_a", "get_ticket", '{"ticket_id": "T-1"}'),
        ("toolu_b", "get_ticket", '{"ticket_id": "T-2"}'),
        ("toolu_c", "notify_user", '{"user_id": "agent-li", "message": "look at T-1"}'),
    ]
    anthropic_server.queue(calls_reply(stream, calls))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments, c.index) for c in response.tool_calls] == [
        ("toolu_a", "get_ticket", {"ticket_id": "T-1"}, 0),
        ("toolu_b", "get_ticket", {"ticket_id": "T-2"}, 1),
        ("toolu_c", "notify_user", {"user_id": "agent-li", "message": "look at T-1"}, 2),
    ]


@pytest.mark.parametrize("fragment", [1, 2, 3, 5, 8, 13])
def test_input_json_split_mid_key_and_mid_value_is_joined_exactly(
    anthropic_server, routes, fragment
):
    routes({ROUTE: {"stream": True}})
    reply = anthropic_calls_stream([("toolu_a", "get_ticket", TICKET_ARGS)], fragment=fragment)
    reply.write_size = 5
    anthropic_server.queue(reply)

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.tool_calls[0].arguments == json.loads(TICKET_ARGS)


def test_text_before_a_call_and_thinking_are_streamed_to_the_listener(anthropic_server, routes):
    routes({ROUTE: {"stream": True}})
    anthropic_server.queue(
        anthropic_stream(
            message_start(),
            block_start(0, {"type": "thinking", "thinking": ""}),
            block_delta(0, {"type": "thinking_delta", "thinking": "Look it up "}),
            block_delta(0, {"type": "thinking_delta", "thinking": "first."}),
            block_delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAh"}),
            block_stop(0),
            block_start(1, {"type": "text", "text": ""}),
            block_delta(1, {"type": "text_delta", "text": "Checking T-1."}),
            block_stop(1),
            block_start(
                2, {"type": "tool_use", "id": "toolu_a", "name": "get_ticket", "input": {}}
            ),
            block_delta(2, {"type": "input_json_delta", "partial_json": '{"ticket_id": '}),
            block_delta(2, {"type": "input_json_delta", "partial_json": '"T-1"}'}),
            block_stop(2),
            message_delta("tool_use", output_tokens=42),
            {"type": "message_stop"},
        )
    )
    events = []

    response = complete(ROUTE, CONVERSATION, [GET_TICKET], on_event=events.append)

    assert [(e.kind, e.text or e.call.id) for e in events] == [
        ("reasoning", "Look it up "),
        ("reasoning", "first."),
        ("text", "Checking T-1."),
        ("tool_call", "toolu_a"),
    ]
    assert (response.reasoning, response.reasoning_signature) == ("Look it up first.", "EqQBCgIYAh")
    assert response.to_message().reasoning_signature == "EqQBCgIYAh"
    assert response.usage.completion_tokens == 42


def test_thinking_of_a_plain_response_is_kept_with_its_signature(anthropic_server):
    anthropic_server.queue(anthropic_message("Assigned.", thinking=("Check first.", "sig-9")))

    response = complete(ROUTE, CONVERSATION, [])

    assert (response.reasoning, response.reasoning_signature) == ("Check first.", "sig-9")


@both_modes
def test_a_call_with_empty_input_gets_an_empty_object(anthropic_server, stream):
    calls = [("toolu_a", "list_queues", ""), ("toolu_b", "get_ticket", '{"ticket_id": "T-1"}')]
    anthropic_server.queue(calls_reply(stream, calls))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("list_queues", {}),
        ("get_ticket", {"ticket_id": "T-1"}),
    ]


def test_each_call_is_handed_on_at_its_content_block_stop(anthropic_server, routes):
    routes({ROUTE: {"stream": True}})
    reply = anthropic_calls_stream(
        [
            ("toolu_a", "get_ticket", '{"ticket_id": "T-1"}'),
            ("toolu_b", "get_ticket", '{"ticket_id": "T-2"}'),
        ],
        fragment=30,
    )
    reply.pause_after = 4  # message_start, block_start, the input, block_stop
    reply.resume = resume = threading.Event()
    anthropic_server.queue(reply)

    def listen(event):
        if event.kind == "tool_call" and event.call.id == "toolu_a":
            resume.set()

    complete(ROUTE, CONVERSATION, [GET_TICKET], on_event=listen)

    assert reply.resumed is True


def test_a_call_cut_off_by_max_tokens_in_a_stream_is_not_used(anthropic_server, routes):
    routes({ROUTE: {"stream": True}})
    anthropic_server.queue(
        anthropic_stream(
            message_start(),
            block_start(
                0, {"type": "tool_use", "id": "toolu_a", "name": "get_ticket", "input": {}}
            ),
            block_delta(0, {"type": "input_json_delta", "partial_json": '{"ticket_id": "T-1"}'}),
            block_stop(0),
            block_start(
                1, {"type": "tool_use", "id": "toolu_b", "name": "update_ticket", "input": {}}
            ),
            block_delta(1, {"type": "input_json_delta", "partial_json": '{"ticket_id": "T-1", '}),
            block_delta(1, {"type": "input_json_delta", "partial_json": '"action": "reso'}),
            block_stop(1),
            message_delta("max_tokens"),
            {"type": "message_stop"},
        )
    )

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.finish_reason == "length"
    first, cut = response.tool_calls
    assert first.arguments == {"ticket_id": "T-1"}
    assert (cut.name, cut.arguments, cut.parse_error) == (
        "update_ticket",
        None,
        TRUNCATED_CALL_REASON,
    )


def test_the_last_call_of_a_message_cut_off_by_max_tokens_is_not_used(anthropic_server):
    anthropic_server.queue(
        anthropic_message(
            calls=[
                ("toolu_a", "get_ticket", {"ticket_id": "T-1"}),
                ("toolu_b", "update_ticket", {"ticket_id": "T-1"}),
            ],
            stop_reason="max_tokens",
        )
    )

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("get_ticket", {"ticket_id": "T-1"}),
        ("update_ticket", None),
    ]


def test_a_stream_that_breaks_before_anything_was_handed_on_is_retried(anthropic_server, routes):
    routes({ROUTE: {"stream": True, "backoff_s": 0.01}})
    broken = anthropic_calls_stream([("toolu_a", "get_ticket", TICKET_ARGS)], fragment=5)
    broken.break_after = 5
    anthropic_server.queue(broken, anthropic_calls_stream([("toolu_a", "get_ticket", TICKET_ARGS)]))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.tool_calls[0].arguments == json.loads(TICKET_ARGS)
    assert [a["status"] for a in response.attempts] == ["connection_error", "ok"]


def test_a_stream_that_breaks_after_text_was_handed_on_is_an_error(anthropic_server, routes):
    routes({ROUTE: {"stream": True, "backoff_s": 0.01}})
    broken = anthropic_text_stream("The ticket was assigned to agent-li.", pieces=4)
    broken.break_after = 4
    anthropic_server.queue(broken, anthropic_text_stream("never asked for"))
    seen = []

    with pytest.raises(StreamInterrupted):
        complete(ROUTE, CONVERSATION, [], on_event=seen.append)

    assert "".join(e.text for e in seen) == "The ticke"  # 36 // 4 characters a delta
    assert len(anthropic_server.requests) == 1


def test_an_overloaded_error_event_inside_a_stream_is_retried(anthropic_server, routes):
    routes({ROUTE: {"stream": True, "backoff_s": 0.01}})
    anthropic_server.queue(
        anthropic_stream(
            message_start(),
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
        anthropic_text_stream("Recovered."),
    )

    response = complete(ROUTE, CONVERSATION, [])

    assert response.text == "Recovered."
    assert [a["status"] for a in response.attempts] == ["server_error", "ok"]
    assert "Overloaded" in response.attempts[0]["error"]


def test_an_overloaded_529_answer_is_retried(anthropic_server, routes):
    routes({ROUTE: {"backoff_s": 0.01}})
    anthropic_server.queue(anthropic_error(529, "overloaded_error"), anthropic_message("ok"))

    response = complete(ROUTE, CONVERSATION, [])

    assert [(a["status"], a.get("http_status")) for a in response.attempts] == [
        ("server_error", 529),
        ("ok", None),
    ]


@both_modes
def test_an_unknown_stop_reason_is_kept_and_the_output_used(anthropic_server, stream):
    if stream:
        anthropic_server.queue(
            anthropic_stream(
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "Paused here."}),
                block_stop(0),
                message_delta("pause_turn"),
                {"type": "message_stop"},
            )
        )
    else:
        anthropic_server.queue(anthropic_message("Paused here.", stop_reason="pause_turn"))

    response = complete(ROUTE, CONVERSATION, [])

    assert (response.finish_reason, response.provider_finish_reason) == ("unknown", "pause_turn")
    assert response.text == "Paused here."


def test_a_tool_name_the_request_did_not_offer_is_passed_on_as_is(anthropic_server):
    anthropic_server.queue(anthropic_message(calls=[("toolu_a", "drop_database", {})]))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert [c.name for c in response.tool_calls] == ["drop_database"]


def test_malformed_streamed_input_is_repaired(anthropic_server, routes):
    routes({ROUTE: {"stream": True}})
    anthropic_server.queue(
        anthropic_calls_stream([("toolu_a", "get_ticket", "{'ticket_id': 'T-1',}")])
    )

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.tool_calls[0].arguments == {"ticket_id": "T-1"}
