"""Replay of recorded runs under today's code and policy, and the what-if preview of a
proposed policy change: through the API, with scripted (or locally served) models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from casbin_adapter.models import CasbinRule

from harness.engine.conversation import load_run_messages
from harness.models import Run, RunEvent, RunMessage
from harness.replay.run import _from_audit
from policy.models import (
    BudgetLedger,
    PolicyChange,
    PolicyRule,
    RunLabel,
    TenantPolicyVersion,
    ToolApproval,
)
from tests.factories import write_agent, write_tool
from tests.fake_providers import FakeProvider, openai_completion
from tests.runs import ADMIN, TICKET, call, run_script, scripted_agent, start
from tests.support.audit import tamper
from tools.demo.models import Notification, OutboxEmail, Ticket
from tools.models import ToolExecution
from traces.models import AuditRecord, Span
from traces.services import seal, unseal

ASSIGN = {"ticket_id": TICKET, "action": "assign", "assignee_id": "agent-li"}
NOTIFY = {"user_id": "agent-li", "ticket_id": TICKET, "message": "Please take it."}
ANSWER = "I assigned the ticket to agent-li and told them."
DEMO = [
    call("get_ticket", ticket_id=TICKET),
    call("update_ticket", **ASSIGN),
    call("notify_user", **NOTIFY),
    {"text": ANSWER},
]


def replay(client: Any, run: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"/api/v1/runs/{run['id']}/replay", {})
    assert response.status_code == 200, response.content
    return response.json()


def what_if(client: Any, changes: list[dict[str, Any]], limit: int = 20, **headers: str) -> Any:
    return client.post(
        "/api/v1/policies/what-if", {"changes": changes, "limit": limit}, **(headers or ADMIN)
    )


def deny(subject: str, scope: str) -> dict[str, Any]:
    return {"op": "add", "permission": {"subject": subject, "scope": scope, "effect": "deny"}}


def verdicts(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["tool"], c["before"]["verdict"], c["after"]["verdict"]) for c in report["calls"]]


def test_replaying_an_unchanged_run_matches_the_original(acme, agent_dir):
    run = run_script(acme, agent_dir, DEMO, user="bob")
    assert run["status"] == "succeeded"

    report = replay(acme, run)

    assert report["source"] == "sealed"
    assert report["diverged"] is False
    assert report["divergences"] == []
    assert report["first_divergence"] is None
    assert verdicts(report) == [
        ("get_ticket", "allowed", "allowed"),
        ("update_ticket", "allowed", "allowed"),
        ("notify_user", "allowed", "allowed"),
    ]
    assert report["answer"] == {"recorded": ANSWER, "replayed": ANSWER, "changed": False}


def test_a_run_with_refusals_and_a_held_call_also_replays_without_divergence(acme, agent_dir):
    escalate = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "angry customer"}
    run = run_script(
        acme,
        agent_dir,
        [
            call("get_customer", customer_id="C-1001"),  # bob has no customer:read
            call("update_ticket", ticket_id="T-1", action="assign"),  # invalid arguments
            call("update_ticket", **escalate),  # held for approval by the default rule
        ],
        user="bob",
    )
    assert run["status"] == "awaiting_approval"

    report = replay(acme, run)

    assert report["diverged"] is False
    for replayed in report["calls"]:
        before, after = replayed["before"], replayed["after"]
        assert (before["verdict"], before.get("check"), before.get("rule")) == (
            after["verdict"],
            after.get("check"),
            after.get("rule"),
        )
    checks = [(c["after"]["verdict"], c["after"].get("check")) for c in report["calls"]]
    assert checks == [("refused", "acl"), ("refused", "schema"), ("needs_approval", "approval")]
    assert report["calls"][2]["after"]["rule"] == "default-escalation-approval"


def test_after_a_deny_for_a_scope_the_replay_flags_the_refused_call(acme, agent_dir):
    run = run_script(acme, agent_dir, DEMO, user="bob")
    denied = acme.post(
        "/api/v1/policies/permissions",
        {"subject": "bob", "scope": "ticket:write", "effect": "deny"},
        **ADMIN,
    )
    assert denied.status_code == 201

    report = replay(acme, run)

    assert report["diverged"] is True
    [divergence] = report["divergences"]
    assert divergence["tool"] == "update_ticket"
    assert divergence["call_id"] == "call_2_1"
    assert divergence["divergence"] == "now_refused"
    assert divergence["before"] == {"verdict": "allowed"}
    assert divergence["after"]["check"] == "acl"
    assert "ticket:write denied" in divergence["after"]["reason"]
    assert divergence["after"]["permission"] == "bob, acme, ticket, write, deny"
    assert report["first_divergence"] == {"step": 2, "call_id": "call_2_1", "tool": "update_ticket"}
    # The recorded answer claims the assignment; today's honesty guard would flag it.
    assert report["answer"]["changed"] is True
    assert "update_ticket failed (permission_denied)" in report["answer"]["replayed"]


def test_a_call_the_acl_refused_then_and_now_names_the_deciding_permission_line_both_times(
    acme, agent_dir
):
    denied = {"subject": "bob", "scope": "ticket:write", "effect": "deny"}
    assert acme.post("/api/v1/policies/permissions", denied, **ADMIN).status_code == 201
    # bob has no customer:read: no line grants it, none denies it.
    script = [call("get_customer", customer_id="C-1001"), *DEMO]
    run = run_script(acme, agent_dir, script, user="bob")

    report = replay(acme, run)

    assert report["diverged"] is False
    customer, _, refused, _ = report["calls"]
    for verdict in (refused["before"], refused["after"]):
        assert (verdict["verdict"], verdict["check"]) == ("refused", "acl")
        assert verdict["permission"] == "bob, acme, ticket, write, deny"
    assert (customer["after"]["verdict"], customer["after"]["check"]) == ("refused", "acl")
    assert "permission" not in customer["before"]
    assert "permission" not in customer["after"]


def test_a_new_call_rule_requiring_approval_shows_the_call_needs_approval(acme, agent_dir):
    run = run_script(acme, agent_dir, DEMO, user="bob")
    rule = {
        "name": "assignments-need-approval",
        "kind": "call",
        "effect": "require_approval",
        "tool": "update_ticket",
        "match": {"action": "assign"},
    }
    assert acme.post("/api/v1/policies/rules", rule, **ADMIN).status_code == 201

    report = replay(acme, run)

    [divergence] = report["divergences"]
    assert divergence["tool"] == "update_ticket"
    assert divergence["divergence"] == "now_needs_approval"
    assert divergence["after"]["verdict"] == "needs_approval"
    assert divergence["after"]["rule"] == "assignments-need-approval"


def test_a_stricter_tool_schema_flags_the_call_that_no_longer_validates(
    acme, agent_dir, tmp_path, settings
):
    loose, strict = tmp_path / "tools-v1", tmp_path / "tools-v2"
    loose.mkdir()
    strict.mkdir()
    note = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
    tool = write_tool(loose, name="take_note", parameters=note, handler="tests.tools.handlers.echo")
    stricter = json.loads(json.dumps(note))
    stricter["properties"]["note"]["maxLength"] = 5
    write_tool(strict, **(tool | {"parameters": stricter}))
    base = list(settings.HARNESS_TOOL_DIRS)
    settings.HARNESS_TOOL_DIRS = [*base, loose]
    run = run_script(
        acme,
        agent_dir,
        [call("take_note", note="a long note"), {"text": "noted"}],
        tools=["take_note"],
    )
    assert run["status"] == "succeeded"

    settings.HARNESS_TOOL_DIRS = [*base, strict]
    report = replay(acme, run)

    [divergence] = report["divergences"]
    assert divergence["tool"] == "take_note"
    assert divergence["divergence"] == "now_refused"
    assert divergence["after"]["check"] == "schema"
    [violation] = divergence["after"]["violations"]
    assert violation["at"] == "/note"
    assert "maxLength" in violation["expected"]


def test_a_tool_removed_from_the_agent_is_flagged(acme, agent_dir, tmp_path, settings):
    run = run_script(acme, agent_dir, DEMO, user="bob")
    agent = json.loads(next(agent_dir.glob("*.json")).read_text())
    edited = tmp_path / "agents-today"
    edited.mkdir()
    (edited / "agent.json").write_text(
        json.dumps(agent | {"tools": ["get_ticket", "update_ticket"]})
    )
    settings.HARNESS_AGENT_DIRS = [d for d in settings.HARNESS_AGENT_DIRS if d != agent_dir]
    settings.HARNESS_AGENT_DIRS = [*settings.HARNESS_AGENT_DIRS, edited]

    report = replay(acme, run)

    [divergence] = report["divergences"]
    assert divergence["tool"] == "notify_user"
    assert divergence["after"]["check"] == "tool_enabled"


def test_arguments_today_s_gateway_reads_differently_are_flagged(acme, agent_dir):
    run = run_script(acme, agent_dir, DEMO, user="bob")
    # As if the gateway of the day had read the model's raw text into other arguments.
    row = RunMessage.objects.get(run_id=run["id"], index=3)
    message = unseal(row.sealed)
    recorded = message["tool_calls"][0]
    assert recorded["name"] == "update_ticket"
    recorded["arguments"] = ASSIGN | {"assignee_id": "agent-wu"}
    RunMessage.objects.filter(pk=row.pk).update(sealed=seal(message))

    report = replay(acme, run)

    [divergence] = report["divergences"]
    assert divergence["divergence"] == "arguments_changed"
    assert divergence["recorded_arguments"]["assignee_id"] == "agent-wu"
    assert divergence["arguments"] == ASSIGN


def test_a_run_whose_agent_is_gone_cannot_be_replayed(acme, agent_dir, settings):
    run = run_script(acme, agent_dir, DEMO, user="bob")
    settings.HARNESS_AGENT_DIRS = [d for d in settings.HARNESS_AGENT_DIRS if d != agent_dir]

    response = acme.post(f"/api/v1/runs/{run['id']}/replay", {})
    body = what_if(acme, [deny("bob", "ticket:write")]).json()

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "replay_unavailable"
    assert body["runs_examined"] == 0
    assert body["skipped"][0]["run_id"] == run["id"]


def test_a_run_without_a_clear_copy_is_replayed_from_the_masked_audit(acme, agent_dir):
    run = run_script(acme, agent_dir, DEMO, user="bob")
    Run.objects.filter(id=run["id"]).update(sealed="")
    RunMessage.objects.filter(run_id=run["id"]).update(sealed="")

    report = replay(acme, run)

    assert report["source"] == "audit"
    assert report["diverged"] is False
    assert [c["tool"] for c in report["calls"]] == ["get_ticket", "update_ticket", "notify_user"]
    assert report["notes"]


def stored_state(run_id: str, request_id: str) -> dict[str, Any]:
    run = Run.objects.get(id=run_id)
    return {
        "tickets": list(Ticket.objects.values_list("ticket_id", "status", "assignee_id")),
        "notifications": Notification.objects.count(),
        "outbox": OutboxEmail.objects.count(),
        "executions": ToolExecution.objects.count(),
        "spans": list(Span.objects.filter(request_id=request_id).values_list("id", flat=True)),
        "audit": AuditRecord.objects.count(),
        "ledger": list(BudgetLedger.objects.order_by("key").values()),
        "labels": RunLabel.objects.count(),
        "approvals": ToolApproval.objects.count(),
        "events": RunEvent.objects.count(),
        "run": (run.status, run.sealed, run.messages, run.answer, run.updated_at, run.steps),
    }


@pytest.fixture
def served_model(settings: Any):
    """An OpenAI-compatible model served locally: it records every request it gets."""
    server = FakeProvider("openai")
    settings.OPENAI_BASE_URL = server.url
    settings.OPENAI_API_KEY = "sk-test-openai"
    settings.HARNESS_ROUTES = {"openai:model-test": {"stream": False, "backoff_s": 0.01}}
    yield server
    server.close()


def test_replay_executes_no_tool_calls_no_model_and_writes_nothing(
    acme, agent_dir: Path, served_model
):
    served_model.queue(
        openai_completion(calls=[("call_a", "get_customer", '{"customer_id": "C-1001"}')]),
        openai_completion(calls=[("call_b", "update_ticket", json.dumps(ASSIGN))]),
        openai_completion(calls=[("call_c", "notify_user", json.dumps(NOTIFY))]),
        openai_completion(ANSWER),
    )
    agent = write_agent(agent_dir, model="openai:model-test")["name"]
    run = acme.post("/api/v1/runs", {"agent": agent, "user": "alice", "input": "go"}).json()
    assert run["status"] == "succeeded"
    assert len(served_model.requests) == 4
    # Today alice may not write tickets: the replay diverges, and still does nothing.
    acme.post(
        "/api/v1/policies/permissions",
        {"subject": "alice", "scope": "ticket:write", "effect": "deny"},
        **ADMIN,
    )
    before = stored_state(run["id"], run["request_id"])

    report = replay(acme, run)
    replay(acme, run)

    assert report["divergences"][0]["tool"] == "update_ticket"
    assert stored_state(run["id"], run["request_id"]) == before
    assert len(served_model.requests) == 4


def test_replay_of_another_tenants_run_is_not_found(acme, globex, agent_dir):
    run = run_script(acme, agent_dir, DEMO, user="bob")

    response = globex.post(f"/api/v1/runs/{run['id']}/replay", {})

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "run_not_found"


# --- what-if ---------------------------------------------------------------------------------


def policy_state() -> tuple[Any, ...]:
    version = list(TenantPolicyVersion.objects.values_list("tenant", "version", "stamp"))
    return (
        version,
        CasbinRule.objects.count(),
        PolicyChange.objects.count(),
        PolicyRule.objects.count(),
    )


def test_what_if_lists_exactly_the_calls_a_new_deny_would_stop_and_saves_nothing(acme, agent_dir):
    demo = scripted_agent(agent_dir, DEMO)
    reads = scripted_agent(agent_dir, [DEMO[0], {"text": "read it"}])
    twice = scripted_agent(
        agent_dir,
        [
            call("update_ticket", **ASSIGN),
            call("update_ticket", **(ASSIGN | {"assignee_id": "agent-wu"})),
            {"text": "done"},
        ],
    )
    bob_writes = start(acme, demo, "bob").json()
    alice_writes = start(acme, demo, "alice").json()
    bob_reads = start(acme, reads, "bob").json()
    bob_writes_twice = start(acme, twice, "bob").json()
    before = policy_state()

    response = what_if(acme, [deny("bob", "ticket:write")])

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["runs_examined"] == 4
    assert body["proposed"] == [
        {
            "op": "add",
            "type": "permission",
            "subject": "bob",
            "scope": "ticket:write",
            "effect": "deny",
        }
    ]
    changed = [(c["run_id"], c["call_id"], c["tool"]) for c in body["changes"]]
    assert changed == [
        (bob_writes_twice["id"], "call_1_1", "update_ticket"),
        (bob_writes_twice["id"], "call_2_1", "update_ticket"),
        (bob_writes["id"], "call_2_1", "update_ticket"),
    ]
    for change in body["changes"]:
        assert change["before"] == {"verdict": "allowed"}
        assert change["after"]["verdict"] == "refused"
        assert change["after"]["check"] == "acl"
    assert alice_writes["id"] not in {c["run_id"] for c in body["changes"]}
    assert bob_reads["id"] not in {c["run_id"] for c in body["changes"]}
    assert policy_state() == before
    # The policy really is unchanged: bob still may write.
    assert replay(acme, bob_writes)["diverged"] is False


def test_what_if_examines_only_the_last_n_runs(acme, agent_dir):
    demo = scripted_agent(agent_dir, DEMO)
    older = start(acme, demo, "bob").json()
    newer = start(acme, demo, "bob").json()

    body = what_if(acme, [deny("bob", "ticket:write")], limit=1).json()

    assert body["runs_examined"] == 1
    assert {c["run_id"] for c in body["changes"]} == {newer["id"]}
    assert older["id"] != newer["id"]


def test_what_if_previews_removing_a_role(acme, agent_dir):
    run = run_script(acme, agent_dir, DEMO, user="bob")

    body = what_if(acme, [{"op": "remove", "role": {"user": "bob", "role": "member"}}]).json()

    assert [(c["run_id"], c["tool"], c["after"]["check"]) for c in body["changes"]] == [
        (run["id"], "get_ticket", "acl"),
        (run["id"], "update_ticket", "acl"),
        (run["id"], "notify_user", "acl"),
    ]


def test_what_if_previews_a_chain_rule_over_the_labels_the_run_held(acme, agent_dir):
    run = run_script(acme, agent_dir, DEMO, user="bob")
    rule = {
        "name": "ticket-content-stays-in-the-desk",
        "kind": "flow",
        "effect": "refuse",
        "label": "customer_content",
        "sink": "internal",
    }

    body = what_if(acme, [{"op": "add", "rule": rule}]).json()

    [change] = body["changes"]
    assert (change["run_id"], change["call_id"], change["tool"]) == (
        run["id"],
        "call_3_1",
        "notify_user",
    )
    assert change["after"]["check"] == "chain"
    assert change["after"]["rule"] == "ticket-content-stays-in-the-desk"
    assert "since call call_1_1 (get_ticket)" in change["after"]["reason"]


def test_what_if_of_a_rule_change_lists_the_calls_it_would_hold(acme, agent_dir):
    run = run_script(acme, agent_dir, DEMO, user="bob")
    rule = {
        "name": "ticket-changes-need-approval",
        "kind": "call",
        "effect": "require_approval",
        "tool": "update_ticket",
    }

    body = what_if(acme, [{"op": "add", "rule": rule}]).json()

    [change] = body["changes"]
    assert (change["run_id"], change["tool"]) == (run["id"], "update_ticket")
    assert change["after"] == {
        "verdict": "needs_approval",
        "check": "approval",
        "rule": "ticket-changes-need-approval",
        "reason": "update_ticket with any arguments",
    }
    assert PolicyRule.objects.count() == 0


def test_what_if_needs_policy_admin(acme, agent_dir):
    response = what_if(acme, [deny("bob", "ticket:write")], **{"X-Harness-User": "bob"})

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_what_if_needs_an_acting_user(acme):
    response = acme.post("/api/v1/policies/what-if", {"changes": [deny("bob", "ticket:write")]})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "acting_user_required"


@pytest.mark.parametrize(
    "change",
    [
        {"op": "add", "permission": {"subject": "bob", "scope": "not a scope"}},
        {"op": "replace", "permission": {"subject": "bob", "scope": "ticket:write"}},
        {"op": "remove", "rule": {"name": "default-pii-no-external"}},
        {"op": "add", "rule": {"name": "x", "kind": "flow", "effect": "refuse"}},
    ],
    ids=["bad-scope", "bad-op", "default-rule", "incomplete-rule"],
)
def test_what_if_refuses_a_malformed_change(acme, change):
    response = what_if(acme, [change])

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_rule"


def test_what_if_of_an_unknown_rule_is_not_found(acme):
    response = what_if(acme, [{"op": "remove", "rule": {"name": "no-such-rule"}}])

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "rule_not_found"


LIMITED = [
    call("get_ticket", ticket_id=TICKET),
    call("get_ticket", ticket_id=TICKET),  # over the per-tool limit of 1
    call("search_tickets", status="open"),
    call("notify_user", user_id="agent-li", message="hi"),  # over the per-run limit of 2
    {"text": "done"},
]
LIMITED_CALLS = [
    ("get_ticket", "allowed", ""),
    ("get_ticket", "refused", "max_calls_per_tool"),
    ("search_tickets", "allowed", ""),
    ("notify_user", "refused", "max_tool_calls_per_run"),
]


def limit_verdicts(report: dict[str, Any], side: str) -> list[tuple[str, str, str]]:
    return [
        (c["tool"], c[side]["verdict"], c[side].get("rule", "") if c[side].get("check") else "")
        for c in report["calls"]
    ]


def test_a_run_that_hit_its_tool_call_limits_replays_refused_at_the_same_calls(acme, agent_dir):
    """Replay counts the run's calls itself: the second get_ticket is over the per-tool limit,
    notify_user over the per-run one (the refused call is not counted, so search_tickets is
    still allowed)."""
    agent = scripted_agent(agent_dir, LIMITED, max_tool_calls_per_run=2, max_calls_per_tool=1)
    run = start(acme, agent).json()
    assert run["status"] == "succeeded"

    report = replay(acme, run)

    assert limit_verdicts(report, "before") == LIMITED_CALLS
    assert limit_verdicts(report, "after") == LIMITED_CALLS
    refused = [c["after"] for c in report["calls"] if c["after"]["verdict"] == "refused"]
    assert [after["check"] for after in refused] == ["limit", "limit"]
    assert "at most 1 times" in refused[0]["reason"]
    assert "2 tool calls" in refused[1]["reason"]
    assert report["diverged"] is False


@pytest.mark.parametrize(
    ("limits", "refused_at"),
    [
        ({"calls_per_tool_limit": 1}, [(1, "max_calls_per_tool")]),
        ({"tool_calls_limit": 2}, [(2, "max_tool_calls_per_run"), (3, "max_tool_calls_per_run")]),
        (
            {"calls_per_tool_limit": 1, "tool_calls_limit": 1},
            [
                (1, "max_calls_per_tool"),
                (2, "max_tool_calls_per_run"),
                (3, "max_tool_calls_per_run"),
            ],
        ),
    ],
)
def test_limits_lowered_after_the_run_show_where_its_calls_are_now_refused(
    acme, agent_dir, limits, refused_at
):
    run = run_script(acme, agent_dir, LIMITED)
    assert [c[1] for c in verdicts(replay(acme, run))] == ["allowed"] * 4
    BudgetLedger.objects.filter(key=f"run:{run['id']}").update(**limits)

    report = replay(acme, run)

    now_refused = [
        (i, c["after"]["rule"])
        for i, c in enumerate(report["calls"])
        if c["after"]["verdict"] == "refused"
    ]
    assert now_refused == refused_at
    assert all(c["after"]["check"] == "limit" for c in report["calls"] if c["divergence"])
    assert [c["divergence"] for c in report["divergences"]] == ["now_refused"] * len(refused_at)
    first = refused_at[0][0]
    assert report["first_divergence"]["call_id"] == report["calls"][first]["call_id"]


def _run_with_every_kind_of_call(acme, agent_dir) -> dict[str, Any]:
    """A refusal by schema, a failing tool, an allowed call and a refusal of an unknown tool."""
    return run_script(
        acme,
        agent_dir,
        [
            call("update_ticket", ticket_id=TICKET, action="assign"),  # schema
            call("always_fails"),
            call("get_ticket", ticket_id=TICKET),
            call("no_such_tool"),
            {"text": "I read the ticket."},
        ],
        tools=["get_ticket", "update_ticket", "always_fails"],
        max_steps=10,
    )


def test_a_run_rebuilt_from_the_masked_audit_replays_as_its_clear_copy_does(acme, agent_dir):
    """Refusals (whose span carries the error), a failed tool, allowed calls: the run rebuilt
    from the audit records gets the same verdicts, before and after, as its clear copy."""
    run = _run_with_every_kind_of_call(acme, agent_dir)
    assert run["status"] == "succeeded"

    def decided(report: dict[str, Any]) -> list[tuple[Any, ...]]:
        def verdict(side: dict[str, Any]) -> tuple[Any, ...]:
            return (side["verdict"], side.get("check"), side.get("rule"))

        return [
            (c["call_id"], c["tool"], c["divergence"], verdict(c["before"]), verdict(c["after"]))
            for c in report["calls"]
        ]

    clear = replay(acme, run)
    Run.objects.filter(id=run["id"]).update(sealed="")
    RunMessage.objects.filter(run_id=run["id"]).update(sealed="")
    rebuilt = replay(acme, run)

    assert rebuilt["source"] == "audit"
    assert decided(rebuilt) == decided(clear)
    assert [c[3] for c in decided(clear)] == [
        ("refused", "schema", None),
        ("allowed", None, None),
        ("allowed", None, None),
        ("refused", "tool_enabled", None),
    ]
    assert rebuilt["answer"] == clear["answer"]


def test_a_call_refused_then_and_allowed_now_has_no_result_and_the_answer_is_rechecked(
    acme, agent_dir
):
    """The call did not run then: replay has no result for it, only that it would run; the
    recorded answer saying it did not happen now contradicts that, and is corrected."""
    rule = {"name": "no-assign", "kind": "call", "tool": "update_ticket", "effect": "refuse"}
    assert acme.post("/api/v1/policies/rules", rule, **ADMIN).status_code == 201
    run = run_script(
        acme,
        agent_dir,
        [call("update_ticket", **ASSIGN), {"text": "I did not assign the ticket."}],
    )
    assert replay(acme, run)["answer"]["changed"] is False
    assert acme.send("delete", "/api/v1/policies/rules/no-assign", **ADMIN).status_code == 200

    report = replay(acme, run)

    [divergence] = report["divergences"]
    assert (divergence["divergence"], divergence["after"]) == (
        "now_allowed",
        {"verdict": "allowed"},
    )
    assert report["answer"]["changed"] is True
    assert "update_ticket" in report["answer"]["replayed"]


def test_the_conversation_rebuilt_from_the_audit_is_the_one_the_model_was_shown(acme, agent_dir):
    """A run without a clear copy is rebuilt from its audit records: the input, each response
    of the model, and for each call the result or error the model was shown (a tool's result,
    a tool's own failure, a refusal from its policy span) — message for message the clear
    copy's, bodies compared as JSON (the clear copy was written with ``ensure_ascii=False``)."""
    run = _run_with_every_kind_of_call(acme, agent_dir)
    recorded = Run.objects.get(id=run["id"])

    def shown(messages: list[Any]) -> list[tuple[Any, ...]]:
        return [
            (
                m.role,
                json.loads(m.content) if m.role == "tool" else m.content,
                [(c.id, c.name, c.arguments) for c in m.tool_calls],
                m.tool_call_id,
                m.name,
                m.is_error,
            )
            for m in messages
        ]

    clear = load_run_messages(recorded)
    rebuilt = _from_audit(recorded)

    assert shown(rebuilt.messages) == shown(clear)
    assert [m.role for m in clear] == ["user"] + ["assistant", "tool"] * 4 + ["assistant"]
    bodies = [json.loads(m.content) for m in clear if m.role == "tool"]
    assert [body["ok"] for body in bodies] == [False, False, True, False]
    assert bodies[2]["result"]["ticket_id"] == TICKET
    assert (rebuilt.source, rebuilt.start, rebuilt.answer) == ("audit", 0, run["answer"])
    assert rebuilt.notes == [
        "No clear copy of this run's conversation: it was rebuilt from the masked audit "
        "records, so masked arguments may fail validation that the clear ones passed."
    ]


def test_a_failed_call_whose_step_was_not_kept_is_rebuilt_as_a_failure(acme, agent_dir):
    """A call that ran in a step the database refused is audited by the driver with its status
    only (``_unkept_call``: no arguments, no result, no ``error`` member): rebuilt from the
    audit, a failed one is still a failure, never ``{"ok": true, "result": null}``."""
    run = run_script(
        acme, agent_dir, [call("always_fails"), {"text": "Done."}], tools=["always_fails"]
    )
    recorded = Run.objects.get(id=run["id"])
    record = AuditRecord.objects.get(request_id=recorded.request_id, kind="tool_io")
    detail = "The step that ran this call could not be written."
    unkept = {
        "tool": "always_fails",
        "call_id": record.payload["call_id"],
        "status": "error",
        "kept": False,
        "detail": detail,
    }
    # As the driver writes it (the audit is append-only: written here past its triggers).
    tamper(
        "UPDATE traces_auditrecord SET payload = %s WHERE id = %s", json.dumps(unkept), record.pk
    )

    (result,) = [m for m in _from_audit(recorded).messages if m.role == "tool"]

    assert result.is_error
    assert json.loads(result.content) == {"ok": False, "error": detail}
