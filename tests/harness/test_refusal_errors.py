"""The error a model is shown for each refused call, exactly: its code, its message (what the
model reads to decide what to do next) and its details (what a client or replay reads)."""

from __future__ import annotations

from tests.runs import run_script, tool_results

MAIL = {"to": "x@evil.example", "subject": "hello", "body": "see you"}
TOOLS = ["get_ticket", "get_customer", "send_external_email"]


def test_each_refusal_names_its_tool_and_its_reason(acme, agent_dir):
    run = run_script(
        acme,
        agent_dir,
        [
            {"tool_calls": [{"name": "no_such_tool", "arguments": {}}]},
            {"tool_calls": [{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}]},
            {"tool_calls": [{"name": "send_external_email", "arguments": MAIL}]},
            {"tool_calls": [{"name": "get_customer", "arguments": {"customer_id": "C-1002"}}]},
            {"text": "Done."},
        ],
        tools=TOOLS,
        max_calls_per_tool=1,
    )

    unknown, customer, email, again = tool_results(run["id"])
    assert unknown == {
        "ok": False,
        "error": {
            "code": "unknown_tool",
            "message": "There is no tool 'no_such_tool' you can call. Tools you can call: "
            "get_ticket, get_customer, send_external_email.",
            "details": {"tool": "no_such_tool", "available": TOOLS},
        },
    }
    assert customer["ok"] is True
    assert email["error"]["code"] == "policy_refused"
    assert email["error"]["message"].startswith(
        "send_external_email was refused by policy rule default-pii-no-external: "
    )
    assert email["error"]["details"]["tool"] == "send_external_email"
    assert email["error"]["details"]["rule"] == "default-pii-no-external"
    assert again == {
        "ok": False,
        "error": {
            "code": "limit_exceeded",
            "message": "get_customer was not run: this run may call get_customer at most 1 "
            "times. Answer with what you have.",
            "details": {"tool": "get_customer", "limit": "max_calls_per_tool"},
        },
    }


def test_a_user_who_may_call_nothing_is_told_so(acme, agent_dir):
    run = run_script(
        acme,
        agent_dir,
        [{"tool_calls": [{"name": "no_such_tool", "arguments": {}}]}, {"text": "Done."}],
        user="nobody",
        tools=["get_ticket"],
    )

    [unknown] = tool_results(run["id"])
    assert unknown["error"]["message"] == (
        "There is no tool 'no_such_tool' you can call. Tools you can call: none."
    )
    assert unknown["error"]["details"] == {"tool": "no_such_tool", "available": []}


def test_arguments_that_are_not_json_are_refused_with_what_was_received(acme, agent_dir):
    raw = "ticket_id=T-1"  # not JSON, and nothing to repair
    run = run_script(
        acme,
        agent_dir,
        [{"tool_calls": [{"name": "get_ticket", "arguments": raw}]}, {"text": "Done."}],
        tools=TOOLS,
    )

    [refused] = tool_results(run["id"])
    error = refused["error"]
    assert error["code"] == "invalid_arguments_json"
    assert error["message"] == (
        "The arguments for get_ticket could not be read: the arguments are not valid JSON "
        "and could not be repaired. Send them as one JSON object."
    )
    assert error["details"] == {"tool": "get_ticket", "received": raw}
