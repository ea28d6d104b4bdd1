"""Async runs go through the broker to a real worker process."""

import time

import pytest

from tools.demo.models import Ticket

pytestmark = pytest.mark.worker


def wait_for_terminal(client, run_id, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = client.get(f"/api/v1/runs/{run_id}").json()
        if run["status"] not in {"queued", "running"}:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} still {run['status']} after {timeout_s} s")


def test_an_async_run_is_accepted_at_once_and_finished_by_a_worker(acme, celery_worker):
    response = acme.post(
        "/api/v1/runs",
        {
            "agent": "ticket-assistant",
            "user": "bob",
            "input": "Why has ticket T-20250318-007 not been handled?",
            "mode": "async",
        },
    )

    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    run = wait_for_terminal(acme, response.json()["id"])
    assert run["status"] == "succeeded", celery_worker.log()
    assert "agent-li" in run["answer"]
    assert Ticket.objects.get(tenant="acme", ticket_id="T-20250318-007").assignee_id == "agent-li"
    assert "harness.execute_run" in celery_worker.log()
