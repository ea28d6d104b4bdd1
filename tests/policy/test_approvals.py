"""Human approvals: a held call pauses the run, an approver decides for the exact arguments,
the run resumes (``execute_run`` is what the ``harness.execute_run`` task calls), expiry denies."""

import hashlib
import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from harness.models import Run, RunMessage
from harness.runs import execute_run as resume_run
from policy.models import ToolApproval
from policy.services import expire_approvals
from tests.runs import (
    TICKET,
    call,
    calls,
    proposed_calls,
    scripted_agent,
    spans_of,
    start,
    tool_results,
)
from tools.demo.models import Notification, Ticket
from traces.services import seal, unseal

OTHER_TICKET = "T-20250320-011"
ESCALATION = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "charged twice"}


def paused_run(client, agent_dir, responses, **agent):
    response = start(client, scripted_agent(agent_dir, responses, **agent))
    assert response.status_code == 202, response.content
    return response.json()


def approvals_of(client, run):
    return {a["call_id"]: a for a in client.get(run["links"]["approvals"]).json()}


def decide(client, run, call_id, decision, user="admin", sha256=None, **extra):
    sha256 = sha256 or approvals_of(client, run)[call_id]["arguments_sha256"]
    return client.post(
        f"/api/v1/runs/{run['id']}/approvals/{call_id}",
        {"decision": decision, "arguments_sha256": sha256} | extra,
        **({"X-Harness-User": user} if user else {}),
    )


def test_an_escalation_pauses_the_run_and_the_sync_api_answers_202(acme, agent_dir):
    response = start(
        acme, scripted_agent(agent_dir, [call("update_ticket", **ESCALATION), {"text": "ok"}])
    )

    assert response.status_code == 202
    run = response.json()
    assert run["status"] == "awaiting_approval"
    assert "update_ticket (call call_1_1, rule default-escalation-approval)" in run["status_detail"]
    [approval] = approvals_of(acme, run).values()
    assert approval["arguments"] == ESCALATION
    canonical = json.dumps(ESCALATION, sort_keys=True, separators=(",", ":"))
    assert approval["arguments_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert approval["status"] == "pending"
    assert approval["policy_version"] > 0
    assert approval["expires_at"] > timezone.now().isoformat()
    [held] = spans_of(acme, run, "policy_check")[1:]
    assert held["attributes"]["check"] == "approval"
    assert held["attributes"]["held"] is True
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).status == "open"


def test_an_approved_call_runs_on_resume_and_is_not_proposed_to_the_model_again(acme, agent_dir):
    run = paused_run(
        acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "Escalated it."}]
    )

    response = decide(acme, run, "call_1_1", "approve", comment="fine")

    assert response.status_code == 200
    assert response.json()["status"] == "queued"
    finished = resume_run(run["id"])
    assert finished.status == "succeeded"
    assert finished.answer == "Escalated it."
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).status == "escalated"
    assert proposed_calls(run["id"]) == ["update_ticket"]
    [approval] = spans_of(acme, run, "approval")
    assert approval["status"] == "ok"
    assert approval["attributes"]["decision"] == "approved"
    assert approval["attributes"]["decided_by"] == "admin"
    assert [s["name"] for s in spans_of(acme, run, "tool_call")] == ["update_ticket"]


def test_a_denied_call_reaches_the_model_as_a_tool_error(acme, agent_dir):
    run = paused_run(
        acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "It was denied."}]
    )

    decide(acme, run, "call_1_1", "deny", comment="not yet")
    finished = resume_run(run["id"])

    assert finished.status == "succeeded"
    [result] = tool_results(run["id"])
    assert result["error"]["code"] == "approval_denied"
    assert "admin denied it (not yet)" in result["error"]["message"]
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).status == "open"
    [approval] = spans_of(acme, run, "approval")
    assert (approval["status"], approval["attributes"]["decision"]) == ("refused", "denied")


def test_a_decision_binds_to_the_exact_arguments(acme, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION)])
    other = hashlib.sha256(b'{"action":"escalate","ticket_id":"T-20250320-011"}').hexdigest()

    response = decide(acme, run, "call_1_1", "approve", sha256=other)

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "approval_arguments_mismatch"
    assert ToolApproval.objects.get().status == "pending"


def test_a_call_approved_for_other_arguments_is_refused_on_resume(acme, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "ok"}])
    decide(acme, run, "call_1_1", "approve")
    # The checkpoint's arguments (the sealed working copy) no longer match what was approved.
    row = RunMessage.objects.filter(run_id=run["id"]).order_by("index").last()
    message = unseal(row.sealed)
    message["tool_calls"][0]["arguments"]["escalate_reason"] = "something else"
    RunMessage.objects.filter(pk=row.pk).update(sealed=seal(message))

    resume_run(run["id"])

    [result] = tool_results(run["id"])
    assert result["error"]["code"] == "approval_denied"
    assert "differ from the approved ones" in result["error"]["message"]
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).status == "open"


def test_only_users_with_approval_decide_may_decide(acme, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION)])

    by_member = decide(acme, run, "call_1_1", "approve", user="bob")
    anonymous = decide(acme, run, "call_1_1", "approve", user="")

    assert by_member.status_code == 403
    assert by_member.json()["error"]["code"] == "permission_denied"
    assert anonymous.status_code == 400
    assert anonymous.json()["error"]["code"] == "acting_user_required"
    assert ToolApproval.objects.get().status == "pending"


def test_another_tenant_cannot_see_or_decide_a_runs_approvals(acme, globex, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION)])

    listing = globex.get(run["links"]["approvals"])
    decision = decide(globex, run, "call_1_1", "approve", user="charlie", sha256="0" * 64)

    assert listing.status_code == decision.status_code == 404
    assert decision.json()["error"]["code"] == "run_not_found"


def test_a_call_is_decided_once(acme, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION)])
    decide(acme, run, "call_1_1", "deny")

    again = decide(acme, run, "call_1_1", "approve")

    assert again.status_code == 409
    assert again.json()["error"]["code"] == "approval_already_decided"


def test_no_decision_before_the_expiry_means_deny(acme, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "ok"}])
    ToolApproval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    assert expire_approvals() == 1
    assert Run.objects.get(id=run["id"]).status == "queued"
    late = decide(acme, run, "call_1_1", "approve")
    resume_run(run["id"])

    assert late.status_code == 409
    [result] = tool_results(run["id"])
    assert result["error"]["code"] == "approval_denied"
    assert "expired" in result["error"]["message"]
    [span] = spans_of(acme, run, "approval")
    assert (span["attributes"]["decision"], span["attributes"]["decided_by"]) == (
        "expired",
        "expiry",
    )


def test_parallel_calls_needing_approval_are_decided_separately(acme, agent_dir):
    second = ESCALATION | {"ticket_id": OTHER_TICKET}
    run = paused_run(
        acme,
        agent_dir,
        [calls(("update_ticket", ESCALATION), ("update_ticket", second)), {"text": "ok"}],
    )
    assert set(approvals_of(acme, run)) == {"call_1_1", "call_1_2"}

    decide(acme, run, "call_1_1", "approve")
    assert Run.objects.get(id=run["id"]).status == "awaiting_approval"
    decide(acme, run, "call_1_2", "deny")
    resume_run(run["id"])

    first, other = tool_results(run["id"])
    assert first["ok"] is True
    assert first["result"]["ticket_id"] == TICKET
    assert other["error"]["code"] == "approval_denied"
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).status == "escalated"
    assert Ticket.objects.get(tenant="acme", ticket_id=OTHER_TICKET).status == "assigned"


def test_results_keep_the_models_order_when_a_later_call_ran_before_the_decision(acme, agent_dir):
    notify = {"user_id": "agent-li", "message": "escalating"}
    run = paused_run(
        acme,
        agent_dir,
        [calls(("update_ticket", ESCALATION), ("notify_user", notify)), {"text": "ok"}],
    )
    assert Notification.objects.count() == 1  # ran at once: it needs no approval

    decide(acme, run, "call_1_1", "approve")
    resume_run(run["id"])

    messages = Run.objects.get(id=run["id"]).messages
    assert [m.get("tool_call_id") for m in messages if m["role"] == "tool"] == [
        "call_1_1",
        "call_1_2",
    ]
    assert Notification.objects.count() == 1


@pytest.fixture
def confirmed_tool(tmp_path, settings):
    """A tool whose file says every call needs approval."""
    folder = tmp_path / "tools"
    folder.mkdir()
    spec = json.loads((settings.BASE_DIR / "tools/definitions/notify_user.json").read_text())
    spec |= {"name": "notify_user_confirmed", "approval": "always"}
    (folder / "notify_user_confirmed.json").write_text(json.dumps(spec))
    settings.HARNESS_TOOL_DIRS = [*settings.HARNESS_TOOL_DIRS, folder]
    return spec["name"]


def test_a_tool_declared_approval_always_is_held_for_every_call(acme, agent_dir, confirmed_tool):
    run = paused_run(
        acme,
        agent_dir,
        [call(confirmed_tool, user_id="agent-li", message="hi")],
        tools=[confirmed_tool],
    )

    [approval] = approvals_of(acme, run).values()
    assert approval["rule"] == "tool-approval-always"
    assert Notification.objects.count() == 0


def test_an_operator_with_approval_decide_approves_in_the_admin(acme, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "ok"}])
    operator = Client()
    operator.force_login(get_user_model().objects.get(username="admin"))
    approval = ToolApproval.objects.get()

    response = operator.post(
        "/admin/policy/toolapproval/",
        {"action": "approve", "_selected_action": [approval.pk]},
    )

    assert response.status_code == 302
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by) == ("approved", "admin")
    assert Run.objects.get(id=run["id"]).status == "queued"


def test_an_approver_may_change_the_arguments_and_the_call_runs_with_them(acme, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "Done."}])
    held = approvals_of(acme, run)["call_1_1"]

    response = decide(
        acme, run, "call_1_1", "approve", arguments_patch={"escalate_reason": "refund owed"}
    )
    finished = resume_run(run["id"])

    assert response.status_code == 200, response.content
    assert finished.status == "succeeded"
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).escalate_reason == "refund owed"
    [result] = tool_results(run["id"])
    assert result["ok"] is True
    assert result["arguments_changed"]["by"] == "admin"
    assert result["arguments_changed"]["arguments"]["escalate_reason"] == "refund owed"
    approval = approvals_of(acme, run)["call_1_1"]
    assert approval["arguments"] == ESCALATION  # both versions are kept
    assert approval["edited_arguments"] == ESCALATION | {"escalate_reason": "refund owed"}
    assert approval["edited_arguments_sha256"] not in ("", held["arguments_sha256"])
    edited_check = next(
        s for s in spans_of(acme, run, "policy_check") if s["attributes"].get("edited")
    )
    assert edited_check["attributes"]["decided_by"] == "admin"
    assert edited_check["attributes"]["arguments_sha256"] == held["arguments_sha256"]
    [io] = [
        record["payload"]
        for span in spans_of(acme, run, "tool_call")
        for record in span["audit"]
        if record["kind"] == "tool_io"
    ]
    assert io["arguments"]["escalate_reason"] == "refund owed"
    assert "charged twice" in io["proposed_arguments"]


def test_changed_arguments_run_only_as_the_approver_approved_them(acme, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "Done."}])
    decide(acme, run, "call_1_1", "approve", arguments_patch={"escalate_reason": "refund owed"})
    # Someone with database access swaps the sealed edit after the decision.
    approval = ToolApproval.objects.get()
    approval.sealed_edited_arguments = seal(ESCALATION | {"escalate_reason": "swapped"})
    approval.save(update_fields=["sealed_edited_arguments"])

    finished = resume_run(run["id"])

    assert finished.status == "succeeded"
    [result] = tool_results(run["id"])
    assert result["error"]["code"] == "approval_denied"
    assert "could not be read back as approved" in result["error"]["message"]
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).escalate_reason == ""


def test_changed_arguments_the_tool_refuses_are_not_approved(acme, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "Done."}])

    response = decide(acme, run, "call_1_1", "approve", arguments_patch={"action": "delete"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "approval_edit_refused"
    assert response.json()["error"]["details"]["violations"]
    assert ToolApproval.objects.get().status == "pending"


def test_a_denial_cannot_carry_changed_arguments(acme, agent_dir):
    run = paused_run(acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "Done."}])

    response = decide(acme, run, "call_1_1", "deny", arguments_patch={"escalate_reason": "x"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "approval_edit_refused"
    assert ToolApproval.objects.get().status == "pending"


def test_a_field_set_to_null_is_removed_by_the_edit(acme, agent_dir):
    assign = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "x"}
    run = paused_run(acme, agent_dir, [call("update_ticket", **assign), {"text": "Done."}])

    response = decide(acme, run, "call_1_1", "approve", arguments_patch={"escalate_reason": None})

    # Without the reason an escalation breaks the tool's schema: refused, nothing decided.
    assert response.status_code == 400
    assert "escalate_reason" in json.dumps(response.json()["error"]["details"]["violations"])
