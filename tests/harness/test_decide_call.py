"""One decision function for live runs and replay (``harness.engine.decisions.decide_call``):
the tool-call limits and the approval state decide a call the same way in a run and in its
replay, and as the documented rule says. Through the run, approval and replay APIs."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from harness.runs import execute_run as resume_run
from policy import services as policy
from policy.models import BudgetLedger, ToolApproval
from tests.factories import write_agent, write_script, write_tool
from tests.runs import ADMIN, TICKET, call, calls, scripted_agent, spans_of, start, tool_results

TOOLS = ("tally_a", "tally_b")
NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
ESCALATE = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "charged twice"}
ASSIGN = {"ticket_id": TICKET, "action": "assign", "assignee_id": "agent-li"}


def replay(client: Any, run_id: str) -> dict[str, Any]:
    response = client.post(f"/api/v1/runs/{run_id}/replay", {})
    assert response.status_code == 200, response.content
    return response.json()


def expected_refusals(
    sequence: list[str], per_tool: int | None, total: int | None
) -> list[tuple[int, str]]:
    """The rule as documented: a call over the run's limit per tool, else over its limit per
    run, is refused and not counted; every other call counts once."""
    refused, used, made = [], dict.fromkeys(TOOLS, 0), 0
    for position, tool in enumerate(sequence):
        if per_tool is not None and used[tool] >= per_tool:
            refused.append((position, "max_calls_per_tool"))
        elif total is not None and made >= total:
            refused.append((position, "max_tool_calls_per_run"))
        else:
            used[tool] += 1
            made += 1
    return refused


def live_refusals(run_id: str) -> list[tuple[int, str]]:
    return [
        (position, result["error"]["details"]["limit"])
        for position, result in enumerate(tool_results(run_id))
        if not result["ok"] and result["error"]["code"] == "limit_exceeded"
    ]


def replayed_refusals(report: dict[str, Any], divergence: str | None) -> list[tuple[int, str]]:
    return [
        (position, c["after"]["rule"])
        for position, c in enumerate(report["calls"])
        if c["after"]["verdict"] == "refused" and c["divergence"] == divergence
    ]


# Two runs and two replays an example.
FEW_RUNS = hypothesis_settings(max_examples=12, deadline=None, database=None)
STEPS = st.lists(st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3), min_size=1, max_size=5)
LIMIT = st.none() | st.integers(min_value=1, max_value=3)


def test_generated_calls_are_refused_by_the_limits_where_the_rule_says_live_and_in_replay(
    acme, agent_dir, tool_dir
):
    """A run with limits refuses exactly the calls the rule refuses; the same calls made
    without limits, replayed under those limits, are ``now_refused`` exactly there; and the
    limited run replays without a divergence."""
    for name in TOOLS:
        write_tool(tool_dir, name=name, parameters=NUMBER)
    # One agent (agent files are read once a test); each example adds its own scenario.
    scenarios: list[dict[str, Any]] = [{"responses": [{"text": "no scenario"}]}]
    script = write_script(agent_dir.parent, {"scenarios": scenarios})
    agent = write_agent(agent_dir, model=f"scripted:{script}", tools=list(TOOLS), max_steps=10)
    examples = iter(range(1000))

    @FEW_RUNS
    @given(steps=STEPS, per_tool=LIMIT, total=LIMIT)
    def check(steps: list[list[str]], per_tool: int | None, total: int | None) -> None:
        sequence = [tool for step in steps for tool in step]
        numbered = iter(range(len(sequence)))  # distinct arguments: no repeated-call stop
        responses = [calls(*((tool, {"n": next(numbered)}) for tool in step)) for step in steps]
        example = f"example {next(examples)}"
        scenarios.append({"when_input_matches": f"^{example}$", "responses": responses})
        script.write_text(json.dumps({"scenarios": scenarios}), encoding="utf-8")
        limits = {"max_calls_per_tool": per_tool, "max_tool_calls": total}
        budget = {key: value for key, value in limits.items() if value is not None}
        expected = expected_refusals(sequence, per_tool, total)
        # Two runs an example: past the tenant's rate of new runs, which is not under test.
        policy.clear_limits()

        run = start(acme, agent["name"], input=example, budget=budget).json()
        assert run["status"] == "succeeded", run
        report = replay(acme, run["id"])
        free = start(acme, agent["name"], input=example).json()
        assert free["status"] == "succeeded", free
        BudgetLedger.objects.filter(key=f"run:{free['id']}").update(
            calls_per_tool_limit=per_tool, tool_calls_limit=total
        )
        now = replay(acme, free["id"])

        # One comparison, so that a failure shows every path that went wrong.
        assert {
            "live": live_refusals(run["id"]),
            "replay of the run": replayed_refusals(report, None),
            "replay now_refused": replayed_refusals(now, "now_refused"),
            "unlimited run": live_refusals(free["id"]),
        } == {
            "live": expected,
            "replay of the run": expected,
            "replay now_refused": expected,
            "unlimited run": [],
        }
        assert report["divergences"] == []

    check()


@pytest.mark.parametrize(
    ("decision", "second", "live_code"),
    [
        # The approved call ran: it counts, and the next call of the tool is over the limit.
        ("approve", ("refused", "limit", "max_calls_per_tool"), "limit_exceeded"),
        # The denied one did not: the next call is the first to run.
        ("deny", ("allowed", None, None), None),
    ],
)
def test_a_call_counts_against_the_limits_once_approved_never_once_denied(
    acme, agent_dir, decision, second, live_code
):
    agent = scripted_agent(
        agent_dir,
        [call("update_ticket", **ESCALATE), call("update_ticket", **ASSIGN), {"text": "done"}],
        max_calls_per_tool=1,
    )
    run = start(acme, agent).json()
    assert run["status"] == "awaiting_approval"
    [approval] = acme.get(run["links"]["approvals"]).json()
    decided = acme.post(
        f"/api/v1/runs/{run['id']}/approvals/{approval['call_id']}",
        {"decision": decision, "arguments_sha256": approval["arguments_sha256"]},
        **{"X-Harness-User": "admin"},
    )
    assert decided.status_code == 200, decided.content

    assert resume_run(run["id"]).status == "succeeded"

    first, then = tool_results(run["id"])
    report = replay(acme, run["id"])
    held, next_call = (c["after"] for c in report["calls"])
    # One comparison, so that a failure shows both paths, live and replay.
    assert {
        "live": (first["ok"], then["ok"], then.get("error", {}).get("code")),
        "replay": (next_call["verdict"], next_call.get("check"), next_call.get("rule")),
    } == {
        "live": (decision == "approve", second[0] == "allowed", live_code),
        "replay": second,
    }
    assert (held["verdict"], held["rule"]) == ("needs_approval", "default-escalation-approval")
    assert report["divergences"] == []


def test_a_held_call_the_run_executed_brings_in_its_labels_in_replay(acme, agent_dir, tool_dir):
    """A call today's rules hold, which the recorded run executed, counts as approved in
    replay: the run holds its labels, and a chain rule over them refuses a later sink."""
    labelled = {"carries": ["customer_content"], "sink": None}
    write_tool(tool_dir, name="read_note", parameters=NUMBER, labels=labelled, approval="policy")
    agent = scripted_agent(
        agent_dir,
        [
            call("read_note", n=1),
            call("notify_user", user_id="agent-li", message="hi"),
            {"text": "done"},
        ],
        tools=["read_note", "notify_user"],
    )
    run = start(acme, agent).json()
    assert run["status"] == "succeeded"
    hold_reads = {"name": "reads-need-approval", "kind": "call", "tool": "read_note"}
    no_desk = {"name": "no-desk", "kind": "flow", "label": "customer_content", "sink": "internal"}
    for rule, effect in ((hold_reads, "require_approval"), (no_desk, "refuse")):
        created = acme.post("/api/v1/policies/rules", rule | {"effect": effect}, **ADMIN)
        assert created.status_code == 201, created.content

    report = replay(acme, run["id"])

    read, notify = (c["after"] for c in report["calls"])
    assert (read["verdict"], read["rule"]) == ("needs_approval", "reads-need-approval")
    assert (notify["verdict"], notify.get("check"), notify.get("rule")) == (
        "refused",
        "chain",
        "no-desk",
    )


@pytest.mark.parametrize(
    ("how", "why", "status"),
    [
        ("deny, with a comment", "admin denied it (not now)", "denied"),
        ("deny", "admin denied it", "denied"),
        ("let it expire", "nobody approved it before the approval expired", "expired"),
        (
            "approve, then change its hash",
            "its arguments differ from the approved ones",
            "approved",
        ),
    ],
)
def test_a_call_its_approval_does_not_let_run_is_refused_with_this_error_and_this_record(
    acme, agent_dir, how, why, status
):
    run = start(
        acme, scripted_agent(agent_dir, [call("update_ticket", **ESCALATE), {"text": "ok"}])
    )
    run = run.json()
    [held] = acme.get(run["links"]["approvals"]).json()
    if how == "let it expire":
        ToolApproval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        assert policy.expire_approvals() == 1
    else:
        comment = {"comment": "not now"} if "comment" in how else {}
        decided = acme.post(
            f"/api/v1/runs/{run['id']}/approvals/{held['call_id']}",
            {"decision": how.split(",")[0], "arguments_sha256": held["arguments_sha256"]} | comment,
            **{"X-Harness-User": "admin"},
        )
        assert decided.status_code == 200, decided.content
    if "hash" in how:  # the row changed after the decision: it no longer names these arguments
        ToolApproval.objects.update(arguments_sha256="0" * 64)

    resume_run(run["id"])

    rule = "default-escalation-approval"
    assert tool_results(run["id"]) == [
        {
            "ok": False,
            "error": {
                "code": "approval_denied",
                "message": f"update_ticket was not run: {why}. Do not retry it; tell the user.",
                "details": {"tool": "update_ticket", "approval": status, "rule": rule},
            },
        }
    ]
    approval = ToolApproval.objects.get()
    decider = {"decided_by": approval.decided_by} if approval.decided_by else {}
    [refused] = [s for s in spans_of(acme, run, "policy_check") if s["status"] == "refused"][:1]
    assert (
        refused["attributes"]
        == {
            "call_id": held["call_id"],
            "tool": "update_ticket",
            "check": "approval",
            "refused": True,
            "allowed": False,
            "rule": rule,
            "policy_version": approval.policy_version,
            "decision": status,
        }
        | decider
    )


def test_an_approvers_edit_that_cannot_be_read_back_is_refused_not_run(acme, agent_dir):
    """The sealed copy of the approver's arguments no longer opens (tampered, or sealed with
    a key gone): the call is refused, with this error and this record, and nothing runs."""
    run = start(
        acme, scripted_agent(agent_dir, [call("update_ticket", **ESCALATE), {"text": "ok"}])
    )
    run = run.json()
    [held] = acme.get(run["links"]["approvals"]).json()
    decided = acme.post(
        f"/api/v1/runs/{run['id']}/approvals/{held['call_id']}",
        {
            "decision": "approve",
            "arguments_sha256": held["arguments_sha256"],
            "arguments_patch": {"escalate_reason": "refund owed"},
        },
        **{"X-Harness-User": "admin"},
    )
    assert decided.status_code == 200, decided.content
    ToolApproval.objects.update(sealed_edited_arguments="not a sealed value")

    resume_run(run["id"])

    error = {
        "code": "approval_denied",
        "message": "update_ticket was not run: the approver's changed arguments could not be "
        "read back as approved. Do not retry it; tell the user.",
        "details": {
            "tool": "update_ticket",
            "approval": "approved",
            "rule": "default-escalation-approval",
        },
    }
    assert tool_results(run["id"]) == [{"ok": False, "error": error}]
    [refused] = [s for s in spans_of(acme, run, "policy_check") if s["status"] == "refused"][:1]
    assert refused["attributes"] == {
        "call_id": held["call_id"],
        "tool": "update_ticket",
        "check": "approval",
        "refused": True,
        "allowed": False,
        "error": error,
    }
