"""Second review, H2: an approver's edit got past the tenant's rules. With a call rule refusing
``update_ticket`` ``action=resolve``, the demo's held escalation approved with
``{"action": "resolve", "escalate_reason": null}`` answered 200 and resolved the ticket: the
edit was checked against the schema only, and the engine skipped the call rules for any call
with an approval. Also: the edit was validated before the approver's authority, so a member
without ``approval:decide`` (or no ``X-Harness-User``) got 400 with the violations.

Now an edit is a decision: the ACL, the chain rules and the call rules decide the edited
arguments when the approver submits them (``409 approval_edit_refused`` naming the rule, and a
refused ``policy_check`` in the trace) and again when the run resumes (refused with a
``policy_check`` naming the rule; a require_approval rule only the edited arguments match holds
the call again, as a new round). Authorisation comes before validation."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.demo import ESCALATION_TICKET_ID
from harness.engine.approvals import merge_patch
from harness.models import Run, StaffTenantGrant, Tenant
from harness.runs import execute_run as resume_run
from policy import services as policy
from policy.models import ToolApproval
from tests.factories import write_tool
from tests.runs import TICKET, call, scripted_agent, spans_of, start, tool_results
from tools.demo.models import Ticket
from tools.services import find_violations, get_tool_registry

ADMIN = {"X-Harness-User": "alice"}
DEMO_ESCALATION = (
    f"Escalate ticket {ESCALATION_TICKET_ID}: the customer has waited 30 days for a promised "
    "refund."
)
TO_RESOLVE = {"action": "resolve", "escalate_reason": None}
NO_RESOLVE = {
    "name": "no-resolve",
    "kind": "call",
    "tool": "update_ticket",
    "match": {"action": "resolve"},
    "effect": "refuse",
}
ESCALATION = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "charged twice"}


def add_rule(client, rule):
    response = client.post("/api/v1/policies/rules", rule, **ADMIN)
    assert response.status_code == 201, response.content


def demo_escalation(client):
    """Demo scenario 4: bob asks to escalate a ticket; the call is held for approval."""
    response = client.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": DEMO_ESCALATION}
    )
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["status"] == "awaiting_approval"
    return run


def held_call(client, run):
    """The run's pending approval (its latest round)."""
    [pending] = [
        a for a in client.get(run["links"]["approvals"]).json() if a["status"] == "pending"
    ]
    return pending


def decide(client, run, approval, user="admin", decision="approve", **extra):
    headers = {"X-Harness-User": user} if user is not None else {}
    return client.post(
        f"/api/v1/runs/{run['id']}/approvals/{approval['call_id']}",
        {"decision": decision, "arguments_sha256": approval["arguments_sha256"]} | extra,
        **headers,
    )


def ticket_status(ticket_id=ESCALATION_TICKET_ID):
    return Ticket.objects.get(tenant="acme", ticket_id=ticket_id).status


def refused_checks(client, run, check="call_rule"):
    """The run's refused policy checks of one kind (the honesty guard may add its own)."""
    return [
        s
        for s in spans_of(client, run, "policy_check")
        if s["status"] == "refused" and s["attributes"]["check"] == check
    ]


def test_the_demos_escalation_cannot_be_edited_into_a_resolve_a_call_rule_refuses(acme, agent_dir):
    add_rule(acme, NO_RESOLVE)
    # A direct resolve is refused...
    direct = start(
        acme,
        scripted_agent(
            agent_dir, [call("update_ticket", ticket_id=TICKET, action="resolve"), {"text": "x"}]
        ),
    ).json()
    [result] = tool_results(direct["id"])
    assert (result["error"]["code"], result["error"]["details"]["rule"]) == (
        "policy_refused",
        "no-resolve",
    )
    before = ticket_status()
    run = demo_escalation(acme)
    approval = held_call(acme, run)

    # ... and so is an approver's edit of the held escalation into one.
    response = decide(acme, run, approval, arguments_patch=TO_RESOLVE)

    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "approval_edit_refused"
    assert (error["details"]["check"], error["details"]["rule"]) == ("call_rule", "no-resolve")
    assert "no-resolve" in error["message"]
    assert ticket_status() == before != "resolved"
    assert ToolApproval.objects.get(run_id=run["id"]).status == "pending"
    assert Run.objects.get(id=run["id"]).status == "awaiting_approval"
    [refused] = refused_checks(acme, run)
    assert (
        refused["attributes"].items()
        >= {
            "check": "call_rule",
            "rule": "no-resolve",
            "call_id": approval["call_id"],
            "edit_refused": True,
            "edited_by": "admin",
        }.items()
    )
    # Nothing was decided: the call can still be approved as held, and runs as held.
    assert decide(acme, run, approval).status_code == 200
    assert resume_run(run["id"]).status == "succeeded"
    assert ticket_status() == "escalated"


def test_a_rule_added_after_the_approval_refuses_the_edited_call_on_resume(acme, agent_dir):
    run = demo_escalation(acme)
    assert decide(acme, run, held_call(acme, run), arguments_patch=TO_RESOLVE).status_code == 200
    add_rule(acme, NO_RESOLVE)

    finished = resume_run(run["id"])

    assert finished.status == "succeeded"
    assert ticket_status() != "resolved"
    assert not spans_of(acme, run, "tool_call")
    [refused] = refused_checks(acme, run)
    assert refused["attributes"]["check"] == "call_rule"
    assert refused["attributes"]["rule"] == "no-resolve"
    assert refused["attributes"]["edited_by"] == "admin"
    result = next(r for r in tool_results(run["id"]) if not r["ok"])
    assert result["error"]["code"] == "policy_refused"
    assert result["arguments_changed"]["by"] == "admin"


def test_a_refuse_rule_added_after_an_approval_as_held_refuses_the_call_on_resume(acme, agent_dir):
    run = demo_escalation(acme)
    assert decide(acme, run, held_call(acme, run)).status_code == 200
    add_rule(acme, NO_RESOLVE | {"name": "no-escalate", "match": {"action": "escalate"}})

    resume_run(run["id"])

    assert ticket_status() != "escalated"
    [refused] = refused_checks(acme, run)
    assert (refused["attributes"]["check"], refused["attributes"]["rule"]) == (
        "call_rule",
        "no-escalate",
    )


def test_an_edit_matching_another_approval_rule_is_held_again_for_a_new_decision(acme, agent_dir):
    add_rule(acme, NO_RESOLVE | {"name": "resolve-asks", "effect": "require_approval"})
    run = demo_escalation(acme)
    first = held_call(acme, run)

    # The edit is allowed when it is made: the other rule asks a human, it does not refuse.
    assert decide(acme, run, first, arguments_patch=TO_RESOLVE).status_code == 200
    paused = resume_run(run["id"])

    assert paused.status == "awaiting_approval"
    assert "rule resolve-asks" in paused.status_detail
    assert ticket_status() != "resolved"
    again = held_call(acme, run)
    assert (again["call_id"], again["round"], again["rule"]) == (
        first["call_id"],
        2,
        "resolve-asks",
    )
    assert again["arguments"]["action"] == "resolve"
    assert "escalate_reason" not in again["arguments"]
    held = [s for s in spans_of(acme, run, "policy_check") if s["attributes"].get("held")]
    assert [s["attributes"]["rule"] for s in held] == [first["rule"], "resolve-asks"]
    assert held[1]["attributes"]["edited_by"] == "admin"
    page = console_approver().get(f"/admin/harness/run/{run['id']}/change/").content.decode()
    assert "Held again (round 2)" in page
    assert "resolve-asks" in page
    # The first decision still binds: a hash of the first round does not decide the second.
    stale = decide(acme, run, first, user="alice")
    assert stale.json()["error"]["code"] == "approval_arguments_mismatch"

    # An edit in this round patches the arguments it holds (the first edit removed the reason).
    reedit = decide(acme, run, again, user="alice", arguments_patch={"action": "escalate"})
    assert reedit.status_code == 400, reedit.content
    assert "escalate_reason" in json.dumps(reedit.json()["error"]["details"]["violations"])
    # Four eyes: who edited the arguments does not approve them too; another approver does.
    own = decide(acme, run, again)
    assert (own.status_code, own.json()["error"]["code"]) == (403, "approver_is_end_user")
    assert own.json()["error"]["details"]["edited_by"] == "admin"
    assert decide(acme, run, again, user="alice").status_code == 200
    finished = resume_run(run["id"])

    assert finished.status == "succeeded"
    assert ticket_status() == "resolved"
    [io] = [
        r["payload"]
        for s in spans_of(acme, run, "tool_call")
        for r in s["audit"]
        if r["kind"] == "tool_io"
    ]
    assert io["arguments"]["action"] == "resolve"
    result = next(r for r in tool_results(run["id"]) if "arguments_changed" in r)
    assert result["arguments_changed"]["by"] == "admin"
    assert [s["attributes"].get("round", 1) for s in spans_of(acme, run, "approval")] == [1, 2]
    rounds = ToolApproval.objects.filter(run_id=run["id"]).order_by("round")
    assert [(a.round, a.status, a.decided_by) for a in rounds] == [
        (1, "approved", "admin"),
        (2, "approved", "alice"),
    ]


def test_an_edit_for_an_end_user_the_acl_now_refuses_is_refused(acme, agent_dir):
    run = demo_escalation(acme)
    policy.add_permission("acme", "bob", "ticket:write", "deny", actor="test")

    response = decide(acme, run, held_call(acme, run), arguments_patch={"escalate_reason": "x"})

    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "approval_edit_refused"
    assert response.json()["error"]["details"]["check"] == "acl"
    [refused] = refused_checks(acme, run, "acl")
    assert refused["attributes"]["edited_by"] == "admin"
    assert ToolApproval.objects.get(run_id=run["id"]).status == "pending"


@pytest.fixture
def internal_sink(tmp_path, settings):
    """A tool that needs approval for every call and is an ``internal`` sink."""
    tools = tmp_path / "tools"
    tools.mkdir()
    settings.HARNESS_TOOL_DIRS = [*settings.HARNESS_TOOL_DIRS, tools]
    return write_tool(
        tools,
        parameters={
            "type": "object",
            "properties": {"note": {"type": "string"}},
            "additionalProperties": False,
        },
        approval="always",
        labels={"carries": [], "sink": "internal"},
    )


def test_an_edit_a_chain_rule_now_refuses_is_refused(acme, agent_dir, internal_sink):
    name = internal_sink["name"]
    agent = scripted_agent(
        agent_dir,
        [
            call("get_customer", customer_id="C-1001"),
            call(name, note="hello"),
            {"text": "ok"},
        ],
        tools=["get_customer", name],
    )
    response = start(acme, agent, user="alice")
    assert response.json()["status"] == "awaiting_approval", response.content
    run = response.json()
    add_rule(
        acme,
        {
            "name": "pii-stays",
            "kind": "flow",
            "label": "pii",
            "sink": "internal",
            "effect": "refuse",
        },
    )

    refused = decide(acme, run, held_call(acme, run), arguments_patch={"note": "changed"})

    assert refused.status_code == 409, refused.content
    details = refused.json()["error"]["details"]
    assert (details["check"], details["rule"]) == ("chain", "pii-stays")
    assert ToolApproval.objects.get(run_id=run["id"]).status == "pending"


def test_authority_is_checked_before_the_edit_is_validated(acme, agent_dir):
    run = demo_escalation(acme)
    approval = held_call(acme, run)
    invalid = {"action": "delete"}

    member = decide(acme, run, approval, user="bob", arguments_patch=invalid)
    nobody = decide(acme, run, approval, user=None, arguments_patch=invalid)
    nobody_denying = decide(acme, run, approval, user=None, decision="deny", arguments_patch={})
    stale = decide(acme, run, approval | {"arguments_sha256": "0" * 64}, arguments_patch=invalid)

    assert (member.status_code, member.json()["error"]["code"]) == (403, "permission_denied")
    assert "violations" not in member.json()["error"]["details"]
    assert (nobody.status_code, nobody.json()["error"]["code"]) == (400, "acting_user_required")
    assert nobody_denying.json()["error"]["code"] == "acting_user_required"
    assert (stale.status_code, stale.json()["error"]["code"]) == (
        409,
        "approval_arguments_mismatch",
    )
    # Only an authorised approver learns what is wrong with the edit.
    valid = decide(acme, run, approval, arguments_patch=invalid)
    assert (valid.status_code, valid.json()["error"]["code"]) == (400, "approval_edit_refused")
    assert valid.json()["error"]["details"]["violations"]
    assert ToolApproval.objects.get(run_id=run["id"]).status == "pending"


ACTIONS = st.sampled_from(["assign", "resolve", "escalate", "delete"])
TEXT = st.text(alphabet="abcxyz -", min_size=0, max_size=8)
PATCHES = st.fixed_dictionaries(
    {},
    optional={
        "action": ACTIONS,
        "escalate_reason": st.none() | TEXT,
        "assignee_id": st.none() | st.sampled_from(["U-1", "U-evil", ""]),
    },
)
NO_EVIL = {
    "name": "no-evil-assignee",
    "kind": "call",
    "tool": "update_ticket",
    "match": {"action": "assign", "assignee_id": "U-evil"},
    "effect": "refuse",
}


def test_generated_edits_are_refused_exactly_when_a_refuse_rule_matches(acme, agent_dir):
    add_rule(acme, NO_RESOLVE)
    add_rule(acme, NO_EVIL)
    tool = get_tool_registry().get("update_ticket")
    state = {}
    agent = scripted_agent(agent_dir, [call("update_ticket", **ESCALATION), {"text": "ok"}])

    def new_run():
        # Up to 40 runs in one test: past the tenant's rate of new runs, which is not under test.
        policy.clear_limits()
        state["run"] = start(acme, agent, user="bob").json()
        state["approval"] = held_call(acme, state["run"])

    new_run()

    @settings(max_examples=40, deadline=None, database=None)
    @given(patch=PATCHES)
    def check(patch):
        edited = merge_patch(ESCALATION, patch)
        response = decide(acme, state["run"], state["approval"], arguments_patch=patch)
        body = response.json()
        if find_violations(tool, edited):
            assert (response.status_code, body["error"]["code"]) == (400, "approval_edit_refused")
        elif edited["action"] == "resolve" or (
            edited["action"] == "assign" and edited.get("assignee_id") == "U-evil"
        ):
            assert response.status_code == 409, body
            expected = "no-resolve" if edited["action"] == "resolve" else "no-evil-assignee"
            assert body["error"]["details"]["rule"] == expected
        else:
            assert response.status_code == 200, body
            new_run()  # that approval is decided: hold another call for the next example

    check()
    assert not Ticket.objects.filter(tenant="acme", ticket_id=TICKET, status="resolved").exists()


def console_approver() -> Client:
    """A staff user of acme who may decide approvals in the console (and in the policy)."""
    user = get_user_model().objects.create_user("olga", password="pw", is_staff=True)
    user.user_permissions.set(
        [
            *Permission.objects.filter(codename__startswith="view_"),
            *Permission.objects.filter(codename="change_toolapproval"),
        ]
    )
    StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug="acme"))
    policy.assign_role("acme", "olga", "approver", actor="tests")
    operator = Client()
    operator.force_login(user)
    return operator


def test_the_consoles_decide_view_shows_the_refusal_and_decides_nothing(acme, agent_dir):
    add_rule(acme, NO_RESOLVE)
    run = Run.objects.get(id=demo_escalation(acme)["id"])
    approval = ToolApproval.objects.get(run_id=str(run.id))
    operator = console_approver()

    response = operator.post(
        f"/admin/harness/run/{run.pk}/decide/",
        {
            "call_id": approval.call_id,
            "arguments_sha256": approval.arguments_sha256,
            "decision": "approve",
            "changes": json.dumps(TO_RESOLVE),
        },
        follow=True,
    )

    page = response.content.decode()
    assert "Not decided (approval_edit_refused)" in page
    assert "refused by policy rule no-resolve" in page
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert ticket_status() != "resolved"
    assert Run.objects.get(id=run.id).status == "awaiting_approval"
