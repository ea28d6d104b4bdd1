"""The loop through the API: refusals and failures are data fed back to the model."""

from policy.services import add_permission, assign_role
from tests import runs
from tests.factories import write_agent, write_script
from tests.runs import spans_of, tool_results
from tools.demo.models import Ticket

TICKET = "T-20250318-007"


def run_script(client, agent_dir, responses, user="bob", **agent):
    return runs.run_script(client, agent_dir, responses, user, **agent)


ASSIGN = {
    "tool_calls": [
        {
            "name": "update_ticket",
            "arguments": {"ticket_id": TICKET, "action": "assign", "assignee_id": "agent-li"},
        }
    ]
}


def test_a_user_without_the_scope_is_refused_and_the_model_is_told(acme, agent_dir):
    assign_role("acme", "dave", "viewer", actor="test")
    add_permission("acme", "role:viewer", "ticket:read", "allow", actor="test")

    run = run_script(acme, agent_dir, [ASSIGN, {"text": "I could not assign it."}], user="dave")

    assert run["status"] == "succeeded"
    [result] = tool_results(run["id"])
    assert result["ok"] is False
    assert result["error"]["code"] == "permission_denied"
    assert "ticket:write" in result["error"]["message"]
    [check] = [s for s in spans_of(acme, run, "policy_check") if s["attributes"]["check"] == "acl"]
    assert check["status"] == "refused"
    assert check["attributes"]["tool"] == "update_ticket"
    assert check["attributes"]["policy_version"] > 0
    [decision] = check["audit"]  # the decision is in the chained audit too
    assert decision["kind"] == "policy_decision"
    assert decision["payload"]["refused"] is True
    assert decision["payload"]["policy_version"] == check["attributes"]["policy_version"]
    assert spans_of(acme, run, "tool_call") == []
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).assignee_id == ""


def test_tools_the_user_may_not_call_are_not_shown_to_the_model(acme, agent_dir):
    assign_role("acme", "dave", "viewer", actor="test")
    add_permission("acme", "role:viewer", "ticket:read", "allow", actor="test")

    run = run_script(acme, agent_dir, [{"text": "hello"}], user="dave")

    [model_call] = spans_of(acme, run, "model_call")
    shown = {tool["name"] for tool in model_call["audit"][0]["payload"]["tools"]}
    assert shown == {"get_ticket", "search_tickets"}


def test_a_deny_rule_overrides_an_allow(acme, agent_dir):
    add_permission("acme", "bob", "ticket:write", "deny", actor="test")

    run = run_script(acme, agent_dir, [ASSIGN, {"text": "done"}])

    [result] = tool_results(run["id"])
    assert result["error"]["code"] == "permission_denied"
    assert "denied by rule" in result["error"]["message"]


def test_arguments_that_fail_the_schema_get_every_violation_back(acme, agent_dir):
    bad = {
        "tool_calls": [
            {"name": "update_ticket", "arguments": {"ticket_id": "7", "action": "assign", "x": 1}}
        ]
    }

    run = run_script(acme, agent_dir, [bad, {"text": "sorry"}])

    [result] = tool_results(run["id"])
    assert result["error"]["code"] == "invalid_arguments"
    violations = result["error"]["details"]["violations"]
    problems = " | ".join(v["problem"] for v in violations)
    assert "'assignee_id' is a required property" in problems
    assert "does not match" in problems  # the ticket id pattern
    assert "Additional properties are not allowed ('x' was unexpected)" in problems
    assert {v["at"] for v in violations} >= {"/", "/ticket_id"}
    checks = [s["attributes"]["check"] for s in spans_of(acme, run, "policy_check")]
    assert checks[:2] == ["acl", "schema"]
    assert spans_of(acme, run, "tool_call") == []


def test_unparseable_arguments_are_refused_naming_the_tool(acme, agent_dir):
    bad = {"tool_calls": [{"name": "get_ticket", "arguments": "{ticket_id: <<T-1"}]}

    run = run_script(acme, agent_dir, [bad, {"text": "sorry"}])

    [result] = tool_results(run["id"])
    assert result["error"]["code"] in {"invalid_arguments_json", "invalid_arguments"}
    assert "get_ticket" in result["error"]["message"]


def test_arguments_in_a_markdown_fence_with_a_trailing_comma_are_repaired(acme, agent_dir):
    fenced = '```json\n{"ticket_id": "T-20250318-007",}\n```'
    call = {"tool_calls": [{"name": "get_ticket", "arguments": fenced}]}

    run = run_script(acme, agent_dir, [call, {"text": "found"}])

    [result] = tool_results(run["id"])
    assert result["ok"] is True
    assert result["result"]["ticket_id"] == TICKET


def test_an_unknown_tool_gets_the_list_of_tools_the_user_may_call(acme, agent_dir):
    call = {"tool_calls": [{"name": "drop_database", "arguments": {}}]}

    run = run_script(acme, agent_dir, [call, {"text": "no such tool"}])

    [result] = tool_results(run["id"])
    assert result["error"]["code"] == "unknown_tool"
    assert "get_ticket" in result["error"]["details"]["available"]
    assert "get_customer" not in result["error"]["details"]["available"]  # bob is a member


def test_a_tool_that_raises_becomes_a_short_error_and_the_traceback_stays_in_the_audit(
    acme, agent_dir
):
    call = {"tool_calls": [{"name": "get_ticket", "arguments": {"ticket_id": "T-20990101-001"}}]}

    run = run_script(acme, agent_dir, [call, {"text": "not found"}])

    [result] = tool_results(run["id"])
    assert result["error"]["code"] == "tool_failed"
    assert "TicketNotFound" in result["error"]["message"]
    assert "Traceback" not in result["error"]["message"]
    [tool_span] = spans_of(acme, run, "tool_call")
    assert tool_span["status"] == "error"
    assert "Traceback" in tool_span["audit"][0]["payload"]["traceback"]


def searches(count):
    """Distinct calls, so the repeated-call guard stays out of the way."""
    return [
        {"tool_calls": [{"name": "search_tickets", "arguments": {"limit": n + 1}}]}
        for n in range(count)
    ]


def test_the_run_stops_at_max_steps(acme, agent_dir):
    run = run_script(acme, agent_dir, searches(10), max_steps=3)

    assert run["status"] == "step_limit"
    assert run["steps"] == 3
    assert "3 steps" in run["answer"]


def test_a_request_may_lower_max_steps_but_not_raise_it(acme, agent_dir):
    script = write_script(agent_dir.parent, searches(10))
    spec = write_agent(agent_dir, model=f"scripted:{script}", max_steps=3)

    lowered = acme.post(
        "/api/v1/runs", {"agent": spec["name"], "user": "bob", "input": "go", "max_steps": 2}
    ).json()
    raised = acme.post(
        "/api/v1/runs", {"agent": spec["name"], "user": "bob", "input": "go", "max_steps": 50}
    ).json()

    assert (lowered["steps"], raised["steps"]) == (2, 3)


def test_a_missing_script_fails_the_run_with_a_clear_message(acme, agent_dir):
    spec = write_agent(agent_dir, model="scripted:/nonexistent/script.json")

    run = acme.post("/api/v1/runs", {"agent": spec["name"], "user": "bob", "input": "x"}).json()

    assert run["status"] == "failed"
    assert "No script" in run["answer"]


def test_an_unknown_provider_fails_the_run_with_a_clear_message(acme, agent_dir):
    spec = write_agent(agent_dir, model="nosuchprovider:model-x")

    run = acme.post("/api/v1/runs", {"agent": spec["name"], "user": "bob", "input": "x"}).json()

    assert run["status"] == "failed"
    assert "nosuchprovider" in run["answer"]


def test_the_same_call_three_times_in_a_row_stops_the_run(acme, agent_dir):
    lookup = {"tool_calls": [{"name": "get_ticket", "arguments": {"ticket_id": TICKET}}]}

    run = run_script(acme, agent_dir, [lookup] * 5)

    assert run["status"] == "failed"
    assert run["stop_reason"] == "repeated_call"
    assert "get_ticket with the same arguments 3 times" in run["answer"]
    assert len(spans_of(acme, run, "tool_call")) == 2  # the third was not executed


def test_an_unexpected_error_in_the_loop_fails_the_run_instead_of_leaving_it_running(
    acme, agent_dir, monkeypatch
):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr("harness.engine.tool_calls.DrivePolicy.visible_tools", broken)

    run = run_script(acme, agent_dir, [{"text": "never"}])

    assert run["status"] == "failed"
    assert run["stop_reason"] == "internal_error"
    assert "internal error" in run["answer"]
    assert "a bug of ours" not in run["answer"]


def test_a_model_sending_a_non_finite_number_gets_a_tool_error_and_the_run_goes_on(acme, agent_dir):
    nan = {"tool_calls": [{"name": "search_tickets", "arguments": '{"limit": NaN}'}]}
    huge = {"tool_calls": [{"name": "search_tickets", "arguments": '{"limit": 1e999}'}]}

    run = run_script(acme, agent_dir, [nan, huge, {"text": "I could not search."}])

    assert run["status"] == "succeeded"
    first, second = tool_results(run["id"])
    assert first["error"]["code"] == second["error"]["code"] == "invalid_arguments_json"
    assert "/limit is not finite" in first["error"]["message"]


def test_numbers_the_database_writes_differently_keep_the_audit_chain_intact(acme, agent_dir):
    from django.core.management import call_command

    odd = (
        '{"query": "x", "limit": 1e1, "weights": [1e16, -0.0, 1.50, 0.1e-6, 12345678901234567890]}'
    )
    call = {"tool_calls": [{"name": "search_tickets", "arguments": odd}]}

    run = run_script(acme, agent_dir, [call, {"text": "done"}])
    call_command("verify_audit", "--tenant", "acme")  # raises CommandError if broken

    assert run["status"] == "succeeded"


def test_a_policy_edit_during_a_run_decides_its_next_calls(acme, agent_dir):
    read = {"tool_calls": [{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}]}
    edit = {"tool_calls": [{"name": "deny_customer_reads", "arguments": {}}]}
    tools = ["get_customer", "deny_customer_reads"]

    run = run_script(acme, agent_dir, [read, edit, read, {"text": "done"}], "alice", tools=tools)

    first, denied, second = tool_results(run["id"])
    assert first["ok"] is True
    assert denied["ok"] is True
    assert second["error"]["code"] == "permission_denied"
