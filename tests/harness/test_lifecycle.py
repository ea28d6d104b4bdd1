"""Run lifecycle through the API: deadlines, hand-off, cancellation, sessions, listing."""

import time
from datetime import timedelta

from django.utils import timezone

from harness.models import Run
from harness.runs import execute_run
from tests.runs import agent_with, wait_until
from tools.demo.models import Notification

TICKET = "T-20250318-007"


def note(seconds, n=1):
    return {
        "tool_calls": [{"name": "slow_note", "arguments": {"seconds": seconds, "message": f"n{n}"}}]
    }


def test_a_sync_run_past_the_deadline_answers_202_and_a_worker_finishes_it(
    acme, agent_dir, settings
):
    settings.HARNESS_SYNC_DEADLINE_S = 0.3
    name = agent_with(agent_dir, [note(1.0), {"text": "noted"}])

    response = acme.post("/api/v1/runs", {"agent": name, "user": "bob", "input": "go"})

    assert response.status_code == 202
    run = response.json()
    assert run["status"] in {"queued", "running"}
    assert run["links"]["self"] == f"/api/v1/runs/{run['id']}"
    # The inline driver finishes its step, checkpoints and hands the run back to the queue.
    wait_until(lambda: Run.objects.get(id=run["id"]).status == "queued")
    finished = execute_run(run["id"])  # what a worker does with the queued run
    assert finished.status == "succeeded"
    assert finished.answer == "noted"
    assert Notification.objects.count() == 1  # the step done inline was not done again


def test_a_queued_run_is_cancelled_at_once(acme):
    run = acme.post(
        "/api/v1/runs",
        {"agent": "ticket-assistant", "user": "bob", "input": "hi", "mode": "async"},
    ).json()

    response = acme.post(f"/api/v1/runs/{run['id']}/cancel", {})

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert acme.get(f"/api/v1/runs/{run['id']}").json()["stop_reason"] == "cancelled"


def test_a_running_run_is_cancelled_between_steps_and_says_what_it_did(acme, agent_dir, settings):
    settings.HARNESS_SYNC_DEADLINE_S = 0.2
    name = agent_with(agent_dir, [note(0.5, 1), note(0.5, 2), note(0.5, 3), {"text": "done"}])
    run = acme.post("/api/v1/runs", {"agent": name, "user": "bob", "input": "go"}).json()

    response = acme.post(f"/api/v1/runs/{run['id']}/cancel", {})

    assert response.status_code in {200, 202}
    final = wait_until(lambda: Run.objects.filter(id=run["id"], status="cancelled").first())
    assert final.stop_reason == "cancelled"
    assert "cancelled" in final.answer
    assert "Completed before stopping: slow_note" in final.answer
    assert Notification.objects.count() < 3


def test_a_run_stops_at_its_deadline(acme, agent_dir):
    name = agent_with(agent_dir, [note(0.4, n) for n in range(10)])

    run = acme.post(
        "/api/v1/runs", {"agent": name, "user": "bob", "input": "go", "deadline_s": 1}
    ).json()

    assert run["status"] == "deadline_exceeded"
    assert run["stop_reason"] == "deadline"
    assert "deadline" in run["answer"]
    assert 1 <= run["steps"] < 10


def test_a_session_continues_with_its_history(acme, agent_dir):
    name = agent_with(
        agent_dir,
        [
            {"tool_calls": [{"name": "get_ticket", "arguments": {"ticket_id": TICKET}}]},
            {"text": "It is unassigned."},
            {"text": "It is in the billing queue."},
        ],
    )
    first = acme.post("/api/v1/runs", {"agent": name, "user": "bob", "input": "status?"}).json()

    second = acme.post(
        "/api/v1/runs",
        {"agent": name, "user": "bob", "input": "which queue?", "session_id": first["session_id"]},
    ).json()

    assert second["status"] == "succeeded"
    assert second["answer"] == "It is in the billing queue."
    assert second["session_id"] == first["session_id"]
    spans = acme.get(second["links"]["trace"]).json()["spans"]
    sent = next(s for s in spans if s["kind"] == "model_call")["audit"][0]["payload"]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[-1]["content"] == "which queue?"


def test_a_session_of_another_user_or_tenant_is_refused(acme, globex, agent_dir):
    name = agent_with(agent_dir, [{"text": "hi"}, {"text": "again"}])
    first = acme.post("/api/v1/runs", {"agent": name, "user": "bob", "input": "x"}).json()

    other_user = acme.post(
        "/api/v1/runs",
        {"agent": name, "user": "alice", "input": "y", "session_id": first["session_id"]},
    )
    other_tenant = globex.post(
        "/api/v1/runs",
        {"agent": name, "user": "bob", "input": "y", "session_id": first["session_id"]},
    )

    assert other_user.status_code == 409
    assert other_user.json()["error"]["code"] == "session_mismatch"
    assert other_tenant.status_code == 404
    assert other_tenant.json()["error"]["code"] == "session_not_found"


def test_runs_are_listed_newest_first_with_filters_and_pages(acme, globex, agent_dir):
    name = agent_with(agent_dir, [{"text": "ok"}])
    ids = [
        acme.post("/api/v1/runs", {"agent": name, "user": user, "input": "x"}).json()["id"]
        for user in ("bob", "alice", "bob")
    ]
    globex.post("/api/v1/runs", {"agent": name, "user": "charlie", "input": "x"})

    everything = acme.get("/api/v1/runs").json()
    bobs = acme.get("/api/v1/runs?user=bob&status=succeeded").json()
    first_page = acme.get("/api/v1/runs?limit=2").json()
    second_page = acme.get(f"/api/v1/runs?limit=2&cursor={first_page['next_cursor']}").json()
    bad = acme.get("/api/v1/runs?status=exploded")

    assert [r["id"] for r in everything["results"]] == ids[::-1]
    assert [r["id"] for r in bobs["results"]] == [ids[2], ids[0]]
    assert [r["id"] for r in first_page["results"] + second_page["results"]] == ids[::-1]
    assert second_page["next_cursor"] is None
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_request"


def test_an_unsafe_callback_url_is_refused(acme, settings):
    settings.HARNESS_WEBHOOK_ALLOWED_NETWORKS = []

    response = acme.post(
        "/api/v1/runs",
        {
            "agent": "ticket-assistant",
            "user": "bob",
            "input": "x",
            "mode": "async",
            "callback_url": "http://127.0.0.1:9/hook",
        },
    )

    # Well formed, its host not public: understood and refused (422; malformed ones are 400).
    assert response.status_code == 422
    assert "non-public address" in response.json()["error"]["message"]
    assert Run.objects.count() == 0


def test_admission_reads_the_tenants_limits_once_and_numbers_the_first_event_without_reading(
    demo,
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from harness.models import RunEvent, Tenant
    from harness.runs import RunRequest, create_run

    tenant = Tenant.objects.get(slug="acme")
    with CaptureQueriesContext(connection) as queries:
        run, created = create_run(
            tenant, RunRequest(agent="ticket-assistant", user_id="bob", input="hi")
        )

    sql = [q["sql"] for q in queries]
    assert created
    assert sum("policy_tenantlimits" in s for s in sql) == 1
    assert not any("harness_runevent" in s and s.lstrip().startswith("SELECT") for s in sql)
    [queued] = RunEvent.objects.filter(run=run)
    assert (queued.sequence, queued.type) == (1, "run.queued")


def test_a_run_queued_longer_than_its_deadline_still_runs_its_deadline_counts_from_its_claim(
    acme,
):
    body = {"agent": "ticket-assistant", "user": "bob", "input": "Why is T-20250318-007 open?"}
    queued = acme.post("/api/v1/runs", body | {"mode": "async", "deadline_s": 1}).json()
    time.sleep(1.5)  # no worker picks it up for longer than its deadline

    claimed_at = timezone.now()
    run = execute_run(queued["id"])

    assert (run.status, run.stop_reason) == ("succeeded", "final_answer")
    assert run.started_at >= max(claimed_at, run.created_at + timedelta(seconds=1.5))
    # Its one second counts from the claim (to the millisecond: both stamps come from Python).
    assert abs((run.deadline_at - run.started_at).total_seconds() - 1) < 0.1
