"""The OpenAI-compatible adapter against a local server speaking Chat Completions."""

import json
import threading

import pytest

from gateway.errors import StreamInterrupted
from gateway.messages import Message, ToolCall
from gateway.services import complete
from gateway.streaming import TRUNCATED_CALL_REASON
from tests.fake_providers import (
    Reply,
    call_args,
    call_start,
    openai_calls_stream,
    openai_chunk,
    openai_completion,
    openai_stream,
    openai_text_stream,
    openai_usage,
)
from tests.gateway.conftest import CONVERSATION, GET_TICKET

ROUTE = "openai:gpt-test"
TICKET_ARGS = '{"ticket_id": "T-20250318-007", "fields": ["status", "assignee_id"]}'


@pytest.fixture
def stream(request, routes):
    routes({ROUTE: {"stream": request.param}})
    return request.param


both_modes = pytest.mark.parametrize("stream", [False, True], indirect=True, ids=["plain", "sse"])


@both_modes
def test_a_plain_answer_comes_back_with_its_usage(openai_server, stream):
    usage = openai_usage(prompt=40, completion=9, cached=16, reasoning=3)
    if stream:
        openai_server.queue(
            openai_text_stream("The ticket waits in the billing queue.", usage=usage)
        )
    else:
        openai_server.queue(
            openai_completion("The ticket waits in the billing queue.", usage=usage)
        )

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.text == "The ticket waits in the billing queue."
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert (response.route, response.model) == (ROUTE, "gpt-test")
    usage = response.usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (40, 9)
    assert (usage.cached_tokens, usage.reasoning_tokens, usage.estimated) == (16, 3, False)
    assert [a["status"] for a in response.attempts] == ["ok"]


def test_the_request_carries_the_conversation_in_chat_completions_form(openai_server):
    openai_server.queue(openai_completion("done"))
    call = ToolCall(
        id="call_9",
        name="get_ticket",
        arguments={"ticket_id": "T-1"},
        index=0,
        raw_arguments='{"ticket_id": "T-1"}',
    )
    messages = [
        *CONVERSATION,
        Message(role="assistant", content="", tool_calls=(call,)),
        Message(role="tool", content='{"ok": true}', tool_call_id="call_9", name="get_ticket"),
        Message(role="user", content="And this one?", images=("https://example.test/a.png",)),
    ]

    complete(ROUTE, messages, [GET_TICKET], tool_choice="required")

    received = openai_server.requests[0]
    assert received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == "Bearer sk-test-openai"
    body = received.body
    assert body["model"] == "gpt-test"
    assert body["tool_choice"] == "required"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_ticket",
                "description": GET_TICKET.description,
                "parameters": GET_TICKET.parameters,
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are a support assistant."},
        {"role": "user", "content": "Why has ticket T-1 not been handled?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "get_ticket", "arguments": '{"ticket_id": "T-1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": '{"ok": true}'},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And this one?"},
                {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}},
            ],
        },
    ]


@both_modes
def test_parallel_tool_calls_stay_separate_and_in_order(openai_server, stream):
    calls = [
        ("call_a", "get_ticket", '{"ticket_id": "T-1"}'),
        ("call_b", "get_ticket", '{"ticket_id": "T-2"}'),
        ("call_c", "notify_user", '{"user_id": "agent-li", "message": "look at T-1"}'),
    ]
    openai_server.queue(openai_calls_stream(calls) if stream else openai_completion(calls=calls))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments, c.index) for c in response.tool_calls] == [
        ("call_a", "get_ticket", {"ticket_id": "T-1"}, 0),
        ("call_b", "get_ticket", {"ticket_id": "T-2"}, 1),
        ("call_c", "notify_user", {"user_id": "agent-li", "message": "look at T-1"}, 2),
    ]


@pytest.mark.parametrize("fragment", [1, 2, 3, 5, 8, 13])
def test_arguments_split_mid_key_and_mid_value_are_joined_exactly(openai_server, routes, fragment):
    routes({ROUTE: {"stream": True}})
    openai_server.queue(openai_calls_stream([("call_a", "get_ticket", TICKET_ARGS)], fragment))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.tool_calls[0].arguments == json.loads(TICKET_ARGS)
    assert response.tool_calls[0].raw_arguments == TICKET_ARGS


def test_interleaved_fragments_of_parallel_calls_are_not_merged(openai_server, routes):
    routes({ROUTE: {"stream": True}})
    first, second = '{"ticket_id": "T-1"}', '{"ticket_id": "T-2", "note": "你好"}'
    chunks = [openai_chunk(call_start(0, "call_a", "get_ticket"))]
    chunks.append(openai_chunk(call_start(1, "call_b", "get_ticket")))
    for start in range(0, max(len(first), len(second)), 4):
        for index, text in ((1, second), (0, first)):
            if text[start : start + 4]:
                chunks.append(openai_chunk(call_args(index, text[start : start + 4])))
    chunks += [openai_chunk({}, "tool_calls"), openai_chunk(usage=openai_usage())]
    openai_server.queue(openai_stream(*chunks))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert [(c.id, c.arguments) for c in response.tool_calls] == [
        ("call_a", {"ticket_id": "T-1"}),
        ("call_b", {"ticket_id": "T-2", "note": "你好"}),
    ]


def test_a_stream_written_a_few_bytes_at_a_time_splits_nothing(openai_server, routes):
    routes({ROUTE: {"stream": True}})
    reply = openai_text_stream("工单 T-20250318-007 已分配给 agent-li。", pieces=4)
    reply.write_size = 3  # cuts SSE lines and UTF-8 characters alike
    openai_server.queue(reply)

    response = complete(ROUTE, CONVERSATION, [])

    assert response.text == "工单 T-20250318-007 已分配给 agent-li。"


@both_modes
def test_a_call_with_empty_arguments_gets_an_empty_object(openai_server, stream):
    calls = [("call_a", "list_queues", ""), ("call_b", "get_ticket", '{"ticket_id": "T-1"}')]
    openai_server.queue(openai_calls_stream(calls) if stream else openai_completion(calls=calls))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert [(c.name, c.arguments, c.parse_error) for c in response.tool_calls] == [
        ("list_queues", {}, None),
        ("get_ticket", {"ticket_id": "T-1"}, None),
    ]


def test_usage_sent_only_in_the_last_chunk_is_counted(openai_server, routes):
    routes({ROUTE: {"stream": True}})
    openai_server.queue(
        openai_stream(
            openai_chunk({"role": "assistant", "content": "Done."}),
            openai_chunk({}, "stop"),
            openai_chunk(usage=openai_usage(prompt=321, completion=7)),
        )
    )

    response = complete(ROUTE, CONVERSATION, [])

    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (321, 7)
    assert openai_server.requests[0].body["stream_options"] == {"include_usage": True}


def test_a_server_that_reports_no_usage_gets_an_estimate(openai_server, routes):
    routes({ROUTE: {"stream": True}})
    openai_server.queue(openai_stream(openai_chunk({"content": "Done."}), openai_chunk({}, "stop")))

    response = complete(ROUTE, CONVERSATION, [])

    assert response.usage.estimated is True
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0


@both_modes
def test_a_call_cut_off_by_max_tokens_is_marked_and_never_parsed(openai_server, stream):
    # The cut call's text would "repair" into a plausible object: it must not be used.
    calls = [
        ("call_a", "get_ticket", '{"ticket_id": "T-1"}'),
        ("call_b", "update_ticket", '{"ticket_id": "T-1", "action": "resolve"'),
    ]
    if stream:
        openai_server.queue(openai_calls_stream(calls, finish_reason="length"))
    else:
        openai_server.queue(openai_completion(calls=calls, finish_reason="length"))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.finish_reason == "length"
    complete_call, cut_call = response.tool_calls
    assert complete_call.arguments == {"ticket_id": "T-1"}
    assert (cut_call.name, cut_call.arguments) == ("update_ticket", None)
    assert cut_call.parse_error == TRUNCATED_CALL_REASON


def test_each_call_is_handed_on_as_soon_as_its_arguments_are_complete(openai_server, routes):
    """The server holds the rest of the stream until the listener has the first call."""
    routes({ROUTE: {"stream": True}})
    reply = openai_calls_stream(
        [
            ("call_a", "get_ticket", '{"ticket_id": "T-1"}'),
            ("call_b", "get_ticket", '{"ticket_id": "T-2"}'),
        ],
        fragment=30,
    )
    reply.pause_after = 3  # role chunk, call_a's start, call_a's whole arguments
    reply.resume = resume = threading.Event()
    openai_server.queue(reply)
    events = []

    def listen(event):
        events.append(event)
        if event.kind == "tool_call" and event.call.id == "call_a":
            resume.set()

    complete(ROUTE, CONVERSATION, [GET_TICKET], on_event=listen)

    assert reply.resumed is True
    assert [e.call.id for e in events if e.kind == "tool_call"] == ["call_a", "call_b"]


def test_text_and_reasoning_deltas_reach_the_listener_as_they_arrive(openai_server, routes):
    routes({ROUTE: {"stream": True}})
    openai_server.queue(
        openai_stream(
            openai_chunk({"role": "assistant", "reasoning_content": "The queue "}),
            openai_chunk({"reasoning_content": "has no owner."}),
            openai_chunk({"content": "Nobody "}),
            openai_chunk({"content": "picked it up."}),
            openai_chunk({}, "stop"),
        )
    )
    events = []

    response = complete(ROUTE, CONVERSATION, [], on_event=events.append)

    assert [(e.kind, e.text) for e in events] == [
        ("reasoning", "The queue "),
        ("reasoning", "has no owner."),
        ("text", "Nobody "),
        ("text", "picked it up."),
    ]
    assert (response.reasoning, response.text) == (
        "The queue has no owner.",
        "Nobody picked it up.",
    )


def test_reasoning_content_of_a_plain_response_is_kept(openai_server):
    openai_server.queue(openai_completion("Assigned.", reasoning_content="Check the queue first."))

    response = complete(ROUTE, CONVERSATION, [])

    assert response.reasoning == "Check the queue first."
    assert response.to_message().reasoning == "Check the queue first."


def test_a_stream_that_breaks_before_anything_was_handed_on_is_retried(openai_server, routes):
    routes({ROUTE: {"stream": True, "backoff_s": 0.01}})
    broken = openai_calls_stream([("call_a", "get_ticket", TICKET_ARGS)], fragment=5)
    broken.break_after = 4
    openai_server.queue(broken, openai_calls_stream([("call_a", "get_ticket", TICKET_ARGS)]))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.tool_calls[0].arguments == json.loads(TICKET_ARGS)
    assert [a["status"] for a in response.attempts] == ["connection_error", "ok"]


def test_a_stream_that_ends_without_a_finish_reason_is_retried(openai_server, routes):
    routes({ROUTE: {"stream": True, "backoff_s": 0.01}})
    openai_server.queue(
        openai_stream(openai_chunk({"content": "Half an ans"}), done=False),
        openai_text_stream("A whole answer."),
    )

    response = complete(ROUTE, CONVERSATION, [])

    assert response.text == "A whole answer."
    assert [a["status"] for a in response.attempts] == ["stream_broken", "ok"]


def test_a_stream_that_breaks_after_a_call_was_handed_on_is_an_error(openai_server, routes):
    routes({ROUTE: {"stream": True, "backoff_s": 0.01}})
    broken = openai_calls_stream(
        [
            ("call_a", "get_ticket", '{"ticket_id": "T-1"}'),
            ("call_b", "get_ticket", '{"ticket_id": "T-2"}'),
        ],
        fragment=30,
    )
    broken.break_after = 4  # after call_b's start: call_a is complete and handed on
    openai_server.queue(broken, openai_text_stream("never asked for"))
    handed_on = []

    with pytest.raises(StreamInterrupted) as caught:
        complete(ROUTE, CONVERSATION, [GET_TICKET], on_event=handed_on.append)

    assert caught.value.code == "stream_interrupted"
    assert "not retried" in caught.value.message
    assert [e.call.id for e in handed_on] == ["call_a"]
    assert len(openai_server.requests) == 1
    assert [a["status"] for a in caught.value.attempts] == ["connection_error"]


@both_modes
def test_an_unknown_finish_reason_is_kept_and_the_output_used(openai_server, stream):
    calls = [("call_a", "get_ticket", '{"ticket_id": "T-1"}')]
    if stream:
        openai_server.queue(openai_calls_stream(calls, finish_reason="eos"))
    else:
        openai_server.queue(openai_completion(calls=calls, finish_reason="eos"))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert (response.finish_reason, response.provider_finish_reason) == ("unknown", "eos")
    assert response.tool_calls[0].arguments == {"ticket_id": "T-1"}


@both_modes
@pytest.mark.parametrize(
    ("raw", "arguments"),
    [
        ('```json\n{"ticket_id": "T-1",}\n```', {"ticket_id": "T-1"}),
        ("{'ticket_id': 'T-1'} ", {"ticket_id": "T-1"}),
        ('{"ticket_id": "T-1", // the stalled one\n}', {"ticket_id": "T-1"}),
    ],
)
def test_malformed_arguments_are_repaired(openai_server, stream, raw, arguments):
    calls = [("call_a", "get_ticket", raw)]
    openai_server.queue(openai_calls_stream(calls) if stream else openai_completion(calls=calls))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert (response.tool_calls[0].arguments, response.tool_calls[0].parse_error) == (
        arguments,
        None,
    )


@both_modes
def test_arguments_that_cannot_be_repaired_carry_the_reason(openai_server, stream):
    calls = [("call_a", "get_ticket", "the ticket T-1 please")]
    openai_server.queue(openai_calls_stream(calls) if stream else openai_completion(calls=calls))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    call = response.tool_calls[0]
    assert (call.name, call.arguments, call.raw_arguments) == (
        "get_ticket",
        None,
        "the ticket T-1 please",
    )
    assert "could not be repaired" in call.parse_error


def test_a_tool_name_the_request_did_not_offer_is_passed_on_as_is(openai_server):
    openai_server.queue(openai_completion(calls=[("call_a", "drop_database", "{}")]))

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert [(c.name, c.arguments) for c in response.tool_calls] == [("drop_database", {})]


def test_calls_without_ids_get_stable_ids(openai_server):
    reply = openai_completion(calls=[("", "get_ticket", '{"ticket_id": "T-1"}')])
    reply.body["choices"][0]["message"]["tool_calls"][0].pop("id")
    openai_server.queue(reply)

    response = complete(ROUTE, CONVERSATION, [GET_TICKET])

    assert response.tool_calls[0].id == "call_2_1"


def test_route_params_and_max_tokens_are_sent_with_the_request(openai_server, routes):
    routes({ROUTE: {"max_tokens": 300, "params": {"temperature": 0.1, "top_k": 20}}})
    openai_server.queue(Reply(body=openai_completion("ok").body))

    complete(ROUTE, CONVERSATION, [])

    body = openai_server.requests[0].body
    assert (body["max_tokens"], body["temperature"], body["top_k"]) == (300, 0.1, 20)


def test_a_stream_that_stalls_mid_way_times_out_and_is_retried(openai_server, routes):
    routes({ROUTE: {"stream": True, "timeout_s": 0.3, "backoff_s": 0.01}})
    stalled = openai_text_stream("An answer that stops half way.", pieces=4)
    stalled.pause_after = 2
    stalled.resume = threading.Event()  # never set: the server falls silent
    openai_server.queue(stalled, openai_text_stream("A whole answer."))

    response = complete(ROUTE, CONVERSATION, [])

    assert response.text == "A whole answer."
    assert [a["status"] for a in response.attempts] == ["timeout", "ok"]
