"""A run paused for approval resumes on a real worker once the approver decides."""

import pytest

from harness.models import Run
from tests.e2e.test_async_run import wait_for_terminal
from tests.runs import TICKET, call, scripted_agent, start
from tools.demo.models import Ticket

pytestmark = pytest.mark.worker

ESCALATION = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "charged twice"}


@pytest.fixture
def escalating_agent(agent_dir, monkeypatch):
    """An agent the worker process knows too: written before it starts (its start-up checks
    read the agent folders once), in a folder named in its environment."""
    monkeypatch.setenv("HARNESS_AGENT_DIRS", str(agent_dir))
    return scripted_agent(agent_dir, [call("update_ticket", **ESCALATION), {"text": "Done."}])


def test_an_approved_run_is_resumed_by_a_worker(acme, escalating_agent, celery_worker):
    run = start(acme, escalating_agent).json()
    assert run["status"] == "awaiting_approval"
    [approval] = acme.get(run["links"]["approvals"]).json()

    decided = acme.post(
        f"/api/v1/runs/{run['id']}/approvals/{approval['call_id']}",
        {"decision": "approve", "arguments_sha256": approval["arguments_sha256"]},
        **{"X-Harness-User": "admin"},  # four eyes: not the run's own user
    )

    assert decided.status_code == 200
    finished = wait_for_terminal(acme, run["id"])
    assert finished["status"] == "succeeded", (finished["status_detail"], celery_worker.log())
    assert finished["answer"] == "Done."
    assert Ticket.objects.get(tenant="acme", ticket_id=TICKET).status == "escalated"
    # The sync request drove the run to the hold (claim 1); one worker task resumed it
    # (claim 2). Counted on the run itself: the worker's log may also show tasks a previous
    # test or another client left on the shared broker.
    assert Run.objects.get(id=run["id"]).lease_token == 2
