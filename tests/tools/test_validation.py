"""Argument validation as the model meets it: every violation listed, nothing coerced."""

import pytest

from tests.factories import write_tool
from tools.demo.models import OutboxEmail, Ticket

TICKET = "T-20250318-007"

ORDER_PARAMETERS = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^SKU-[0-9]+$"},
                    "quantity": {"type": "integer", "minimum": 1},
                },
                "required": ["sku", "quantity"],
                "additionalProperties": False,
            },
        },
        "shipping": {
            "type": "object",
            "properties": {
                "speed": {"enum": ["standard", "express"]},
                "address": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string"},
                        "country": {"type": "string", "enum": ["CN", "DE", "US"]},
                    },
                    "required": ["city", "country"],
                },
            },
            "required": ["address"],
        },
        "deliver_after": {"type": "string", "format": "date-time"},
    },
    "required": ["items", "shipping"],
    "additionalProperties": False,
}


@pytest.fixture
def order_tool(tool_dir):
    return write_tool(tool_dir, name="create_order", parameters=ORDER_PARAMETERS)["name"]


def refusal(result):
    assert result["ok"] is False
    return result["error"]


def test_assigning_a_ticket_without_an_assignee_is_refused_naming_the_missing_field(run_script):
    done = run_script(
        [{"name": "update_ticket", "arguments": {"ticket_id": TICKET, "action": "assign"}}]
    )

    error = refusal(done.tool_results[0])
    assert error["code"] == "invalid_arguments"
    assert error["details"]["violations"] == [
        {
            "at": "/",
            "problem": "'assignee_id' is a required property",
            "expected": 'required: ["assignee_id"]',
            "got": '{"ticket_id": "T-20250318-007", "action": "assign"}',
        }
    ]
    assert "'assignee_id' is a required property" in error["message"]
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).status == "open"
    assert done.spans("tool_call") == []


def test_escalating_without_a_reason_is_refused_but_resolving_needs_no_extra_field(run_script):
    done = run_script(
        [
            {"name": "update_ticket", "arguments": {"ticket_id": TICKET, "action": "escalate"}},
            {"name": "update_ticket", "arguments": {"ticket_id": TICKET, "action": "resolve"}},
        ]
    )

    escalate, resolve = done.tool_results
    assert [v["problem"] for v in refusal(escalate)["details"]["violations"]] == [
        "'escalate_reason' is a required property"
    ]
    assert resolve["ok"] is True
    assert resolve["result"]["status"] == "resolved"


def test_a_value_outside_the_enum_is_refused_with_the_allowed_values(run_script):
    done = run_script(
        [{"name": "update_ticket", "arguments": {"ticket_id": TICKET, "action": "close"}}]
    )

    [violation] = refusal(done.tool_results[0])["details"]["violations"]
    assert violation["at"] == "/action"
    assert violation["expected"] == 'enum: ["assign", "resolve", "escalate"]'
    assert violation["got"] == '"close"'


def test_a_string_is_not_coerced_to_an_integer(run_script):
    done = run_script([{"name": "search_tickets", "arguments": {"limit": "5"}}])

    [violation] = refusal(done.tool_results[0])["details"]["violations"]
    assert violation == {
        "at": "/limit",
        "problem": "'5' is not of type 'integer'",
        "expected": 'type: "integer"',
        "got": '"5"',
    }


def test_an_extra_property_is_refused_by_name(run_script):
    done = run_script([{"name": "get_ticket", "arguments": {"ticket_id": TICKET, "verbose": True}}])

    [violation] = refusal(done.tool_results[0])["details"]["violations"]
    assert violation["problem"] == (
        "Additional properties are not allowed ('verbose' was unexpected)"
    )


def test_every_violation_in_nested_objects_is_listed_with_its_place(run_script, order_tool):
    arguments = {
        "items": [{"sku": "SKU-1", "quantity": 2}, {"sku": "SKU-2", "quantity": 0, "gift": 1}],
        "shipping": {"speed": "overnight", "address": {"city": "Berlin", "country": "Narnia"}},
    }

    done = run_script([{"name": order_tool, "arguments": arguments}], tools=[order_tool])

    error = refusal(done.tool_results[0])
    assert [(v["at"], v["expected"]) for v in error["details"]["violations"]] == [
        ("/items/1", "additionalProperties: false"),
        ("/items/1/quantity", "minimum: 1"),
        ("/shipping/address/country", 'enum: ["CN", "DE", "US"]'),
        ("/shipping/speed", 'enum: ["standard", "express"]'),
    ]
    assert "(4 problem(s))" in error["message"]


def test_valid_nested_arguments_reach_the_handler_unchanged(run_script, order_tool):
    arguments = {
        "items": [{"sku": "SKU-1", "quantity": 2}],
        "shipping": {"address": {"city": "Berlin", "country": "DE"}},
        "deliver_after": "2025-04-01T09:00:00Z",
    }

    done = run_script([{"name": order_tool, "arguments": arguments}], tools=[order_tool])

    assert done.tool_results[0] == {
        "name": order_tool,
        "call_id": "call_1_1",
        "ok": True,
        "result": {"echo": arguments, "idempotency_key": f"{done.run['id']}:call_1_1"},
    }


def test_a_date_time_format_is_checked(run_script, order_tool):
    arguments = {
        "items": [{"sku": "SKU-1", "quantity": 1}],
        "shipping": {"address": {"city": "Berlin", "country": "DE"}},
        "deliver_after": "tomorrow morning",
    }

    done = run_script([{"name": order_tool, "arguments": arguments}], tools=[order_tool])

    [violation] = refusal(done.tool_results[0])["details"]["violations"]
    assert (violation["at"], violation["expected"]) == ("/deliver_after", 'format: "date-time"')


def test_an_email_format_is_checked(run_script):
    done = run_script(
        [
            {
                "name": "send_external_email",
                "arguments": {"to": "not an address", "subject": "Hi", "body": "Hello"},
            }
        ],
        user="alice",
    )

    [violation] = refusal(done.tool_results[0])["details"]["violations"]
    assert violation["problem"] == "'not an address' is not a 'email'"
    assert OutboxEmail.objects.count() == 0


def test_an_unknown_tool_gets_the_list_of_tools_this_user_may_call(run_script):
    done = run_script([{"name": "delete_everything", "arguments": {}}])

    error = refusal(done.tool_results[0])
    assert error["code"] == "unknown_tool"
    assert error["details"]["available"] == [
        "get_ticket",
        "search_tickets",
        "update_ticket",
        "notify_user",
    ]
    assert "get_ticket, search_tickets, update_ticket, notify_user" in error["message"]


def test_a_registered_tool_the_agent_does_not_have_is_unknown_to_it(run_script):
    done = run_script(
        [{"name": "update_ticket", "arguments": {"ticket_id": TICKET, "action": "resolve"}}],
        tools=["get_ticket"],
    )

    error = refusal(done.tool_results[0])
    assert error["code"] == "unknown_tool"
    assert error["details"]["available"] == ["get_ticket"]


def test_a_tool_the_user_lacks_the_scope_for_is_refused(run_script):
    done = run_script([{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}])

    error = refusal(done.tool_results[0])
    assert error["code"] == "permission_denied"
    assert error["details"] == {"tool": "get_customer", "scope": "customer:read"}


def test_the_trace_keeps_the_proposed_text_and_the_accepted_arguments(run_script):
    proposed = '```json\n{"ticket_id": "T-20250318-007",}\n```'

    done = run_script([{"name": "get_ticket", "arguments": proposed}])

    io = done.tool_io("get_ticket")
    assert io["proposed_arguments"] == proposed
    assert io["arguments"] == {"ticket_id": TICKET}
    assert done.tool_results[0]["ok"] is True


def test_a_schema_refusal_is_traced_as_a_refused_check_with_what_came(run_script):
    done = run_script([{"name": "search_tickets", "arguments": {"limit": "5"}}])

    [check] = [s for s in done.spans("policy_check") if s["attributes"]["check"] == "schema"]
    assert check["status"] == "refused"
    assert check["attributes"]["error"]["details"]["violations"][0]["got"] == '"5"'
