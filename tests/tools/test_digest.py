"""Large results: the model gets a digest of key fields, the trace keeps the whole result."""

import json

import pytest

from tests.factories import write_tool


def test_a_small_result_reaches_the_model_whole(run_script):
    done = run_script([{"name": "search_tickets", "arguments": {}}])

    result = done.tool_results[0]["result"]
    assert result["count"] == 5
    assert "title" in result["tickets"][0]
    assert done.spans("tool_call")[0]["attributes"]["result_digest"] is False


def test_a_large_result_reaches_the_model_as_a_digest_of_its_key_fields(run_script, settings):
    settings.HARNESS_TOOL_RESULT_MAX_CHARS = 1100

    done = run_script([{"name": "search_tickets", "arguments": {}}])

    digest = done.tool_results[0]["result"]
    assert digest["digest"] is True
    assert digest["count"] == 5
    assert [set(ticket) for ticket in digest["tickets"]] == [
        {"ticket_id", "status", "assignee_id", "sla_due"}
    ] * 5
    assert [t["ticket_id"] for t in digest["tickets"]] == [
        "T-20250318-007",
        "T-20250320-011",
        "T-20250321-002",
        "T-20250322-004",
        "T-20250324-019",
    ]
    assert digest["details"]["tool"] == "get_ticket"
    assert digest["details"]["argument"] == "ticket_id"
    assert "Call get_ticket with ticket_id" in digest["details"]["how"]
    assert len(json.dumps(digest, ensure_ascii=False)) <= 1100


def test_the_trace_keeps_the_whole_result_behind_a_digest(run_script, settings):
    settings.HARNESS_TOOL_RESULT_MAX_CHARS = 1100

    done = run_script([{"name": "search_tickets", "arguments": {}}])

    full = done.tool_io("search_tickets")["result"]
    assert full["tickets"][0]["title"] == "Charged twice for March invoice"
    assert "body" in full["tickets"][0]
    assert done.spans("tool_call")[0]["attributes"]["result_digest"] is True


@pytest.fixture
def orders_tool(tool_dir):
    return write_tool(
        tool_dir,
        name="list_orders",
        handler="tests.tools.handlers.many_items",
        parameters={"type": "object", "properties": {"count": {"type": "integer"}}},
        key_fields=["order_id", "state"],
    )["name"]


def test_a_digest_too_long_for_every_item_shows_the_first_ones_and_the_count(
    run_script, orders_tool, settings
):
    settings.HARNESS_TOOL_RESULT_MAX_CHARS = 2000

    done = run_script([{"name": orders_tool, "arguments": {"count": 500}}], tools=[orders_tool])

    digest = done.tool_results[0]["result"]
    assert digest["count"] == 500
    shown = digest["orders"]
    assert 10 < len(shown) < 500
    assert shown[0] == {"order_id": "O-0000", "state": "open"}
    assert f"the first {len(shown)} item(s) with only order_id, state" in digest["note"]
    assert digest["details"] == {
        "how": "Call list_orders again with narrower arguments to see items in full."
    }
    assert len(json.dumps(digest)) <= 2000
    assert len(done.tool_io(orders_tool)["result"]["orders"]) == 500


def test_a_large_single_record_keeps_its_key_fields_and_names_the_rest(
    run_script, tool_dir, settings
):
    settings.HARNESS_TOOL_RESULT_MAX_CHARS = 1000
    name = write_tool(
        tool_dir, handler="tests.tools.handlers.big_record", key_fields=["order_id", "state"]
    )["name"]

    done = run_script([{"name": name, "arguments": {}}], tools=[name])

    digest = done.tool_results[0]["result"]
    assert digest["fields"] == {"order_id": "O-0001", "state": "open"}
    assert digest["omitted_fields"] == ["log"]
