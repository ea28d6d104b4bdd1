"""Messages as plain dicts: the form a run's conversation is checkpointed in."""

from dataclasses import fields

from gateway.messages import Message, ModelResponse, ToolCall, Usage

CALL = ToolCall(
    id="c1",
    name="get_ticket",
    arguments={"ticket_id": "T-1"},
    index=1,
    raw_arguments="{}",
    parse_error="late",
)
EVERY_FIELD = Message(
    role="assistant",
    content="text",
    tool_calls=(CALL,),
    tool_call_id="c0",
    name="bot",
    reasoning="because",
    reasoning_signature="sig",
    images=("data:image/png;base64,AA==",),
    is_error=True,
)


def test_every_field_of_a_message_survives_the_round_trip():
    data = EVERY_FIELD.to_dict()

    assert set(data) == {f.name for f in fields(Message)}
    assert set(data["tool_calls"][0]) == {f.name for f in fields(ToolCall)}
    assert Message.from_dict(data) == EVERY_FIELD


def test_unset_fields_are_left_out():
    assert Message(role="user", content="hi").to_dict() == {"role": "user", "content": "hi"}


def test_a_response_lists_its_calls_and_usage_as_dicts():
    response = ModelResponse(text="", tool_calls=[CALL], usage=Usage(prompt_tokens=3))

    data = response.to_dict()

    assert ToolCall.from_dict(data["tool_calls"][0]) == CALL
    assert data["usage"]["prompt_tokens"] == 3
