"""Finding 5: a user could approve their own held call, a cancelled run's held call could
still be approved, and a run held past its deadline ended ``deadline_exceeded`` after being
approved. Four eyes by default (configurable per tool file and per tenant), decisions only on
runs that still wait, and waiting for approval does not count against the deadline."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from harness.models import Run
from harness.runs import execute_run as resume_run
from policy import services as policy
from tests.factories import write_tool
from tests.runs import TICKET, call, scripted_agent, start, tool_results
from tools.demo.models import Ticket

ESCALATION = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "charged twice"}


def paused(client, agent_dir, responses, user="alice", **agent):
    return held(client, scripted_agent(agent_dir, responses, **agent), user)


def held(client, agent, user="alice"):
    response = start(client, agent, user)
    assert response.status_code == 202, response.content
    run = response.json()
    [approval] = client.get(run["links"]["approvals"]).json()
    return run, approval


def decide(client, run, approval, user, decision="approve"):
    return client.post(
        f"/api/v1/runs/{run['id']}/approvals/{approval['call_id']}",
        {"decision": decision, "arguments_sha256": approval["arguments_sha256"]},
        **{"X-Harness-User": user},
    )


def test_the_runs_own_user_may_not_approve_its_call_but_another_approver_may(acme, agent_dir):
    run, approval = paused(acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "ok"}])

    own = decide(acme, run, approval, "alice")

    assert own.status_code == 403
    assert own.json()["error"]["code"] == "approver_is_end_user"
    assert decide(acme, run, approval, "admin").status_code == 200


def test_a_tool_file_or_the_tenant_may_allow_self_approval(acme, agent_dir, settings, tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    settings.HARNESS_TOOL_DIRS = [*settings.HARNESS_TOOL_DIRS, tools]
    own = write_tool(tools, approval="always", self_approval=True)
    self_approved = scripted_agent(
        agent_dir, [call(own["name"]), {"text": "ok"}], tools=[own["name"]]
    )
    escalating = scripted_agent(agent_dir, [call("update_ticket", **ESCALATION), {"text": "ok"}])

    run, approval = held(acme, self_approved)
    assert decide(acme, run, approval, "alice").status_code == 200

    policy.add_permission("acme", "alice", policy.SELF_APPROVAL_SCOPE, "allow", actor="test")
    run, approval = held(acme, escalating)
    assert decide(acme, run, approval, "alice").status_code == 200


def test_a_cancelled_runs_held_call_can_no_longer_be_decided(acme, agent_dir):
    run, approval = paused(acme, agent_dir, [call("update_ticket", **ESCALATION), {"text": "ok"}])
    assert acme.post(f"/api/v1/runs/{run['id']}/cancel", {}).status_code == 200

    late = decide(acme, run, approval, "admin")

    assert late.status_code == 409
    assert late.json()["error"]["code"] == "run_not_awaiting_approval"
    assert late.json()["error"]["details"]["run_status"] == "cancelled"
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).status != "escalated"


def test_waiting_for_approval_does_not_count_against_the_deadline(acme, agent_dir):
    run, approval = paused(
        acme,
        agent_dir,
        [call("update_ticket", **ESCALATION), {"text": "Escalated."}],
        deadline_s=30,
    )
    # It paused an hour ago with 20 s of its deadline left; the approver answers only now.
    now = timezone.now()
    Run.objects.filter(id=run["id"]).update(
        updated_at=now - timedelta(hours=1),
        deadline_at=now - timedelta(hours=1) + timedelta(seconds=20),
    )

    assert decide(acme, run, approval, "admin").status_code == 200
    resumed = Run.objects.get(id=run["id"])
    assert resumed.deadline_at >= now + timedelta(seconds=19)
    finished = resume_run(run["id"])

    assert finished.status == "succeeded", finished.status_detail
    [result] = tool_results(run["id"])
    assert result["ok"] is True
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).status == "escalated"
