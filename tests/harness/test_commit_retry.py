"""A connection blip is not a run's failure: the driver retries its fenced step commit while
its lease holds, recognises a commit whose answer was lost, and past that gives the run up
(the lease released as soon as the database takes it) for another driver — a Celery task
retried, or the next claim — to resume. Every fault here is real PostgreSQL: its backends
terminated, or the connection cut by a proxy in front of it."""

from __future__ import annotations

import io
import time
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.core.management import call_command
from django.db import connection

from harness.engine import retry
from harness.models import Run, RunMessage
from harness.runs import execute_run
from tests.runs import scripted_agent, wait_until
from tests.support import handlers
from tests.support.pg_proxy import PostgresProxy, database_through_proxy
from tests.worker import database_url
from tools.demo.models import Notification

pytestmark = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="needs PostgreSQL (DATABASE_URL)"
)

ACT = {"tool_calls": [{"name": "effect_then_fault", "arguments": {"message": "acted"}}]}
DONE = {"text": "Done."}


@pytest.fixture
def after_effect():
    """The test's fault, run by ``effect_then_fault`` the moment it acted."""
    yield handlers.AFTER_EFFECT
    handlers.AFTER_EFFECT.clear()


def agent(agent_dir) -> str:
    return scripted_agent(agent_dir, [ACT, DONE], tools=["effect_then_fault"])


def run_sync(client, name: str):
    return client.post("/api/v1/runs", {"agent": name, "user": "bob", "input": "go"})


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def terminate_backends_but(spared: int) -> None:
    """What a PostgreSQL restart does to every connection: the driver's, its heartbeat's,
    the pool's — all but this one and ``spared`` (the test's own, which serves its request)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> %s",
            [spared],
        )


def verify_audit(tenant: str) -> str:
    out = io.StringIO()
    call_command("verify_audit", "--tenant", tenant, stdout=out)
    return out.getvalue()


def assert_acted_once_and_succeeded(run: Run) -> None:
    assert run.status == "succeeded", (run.status, run.status_detail)
    assert Notification.objects.filter(message="acted").count() == 1
    tool = [m for m in RunMessage.objects.filter(run=run) if m.data["role"] == "tool"]
    assert len(tool) == 1
    assert '"outcome_unknown"' not in tool[0].data["content"]
    sequences = list(run.events.order_by("sequence").values_list("sequence", flat=True))
    assert sequences == list(range(1, len(sequences) + 1))


def test_a_step_commit_cut_off_by_terminated_backends_is_retried_and_lands_once(
    acme, agent_dir, after_effect
):
    spared = backend_pid()
    after_effect.append(lambda: terminate_backends_but(spared))

    response = run_sync(acme, agent(agent_dir))

    assert response.status_code == 200, response.content
    run = Run.objects.get(id=response.json()["id"])
    assert_acted_once_and_succeeded(run)
    assert run.lease_token == 1  # the same driver went on: nobody took the run over


def test_a_commit_whose_answer_was_lost_is_recognised_not_written_again(
    acme, agent_dir, after_effect
):
    with database_through_proxy() as proxy:
        # The step that records the call's result: its COMMIT reaches PostgreSQL, the answer
        # never comes back. Written again it would break the unique (run, index) of messages.
        after_effect.append(lambda: proxy.lose_commit(after=b"harness_runmessage"))
        response = run_sync(acme, agent(agent_dir))
        assert proxy.commits_lost == 1

    assert response.status_code == 200, response.content
    run = Run.objects.get(id=response.json()["id"])
    assert_acted_once_and_succeeded(run)
    assert run.lease_token == 1


def test_a_commit_cut_off_before_it_reached_the_server_is_written_again_the_same_rows(
    acme, agent_dir, after_effect
):
    """The step's rows were sent (its audit records among them), the COMMIT never arrived:
    the retry sends the very same rows again, the run's chain unbroken."""
    with database_through_proxy() as proxy:
        after_effect.append(lambda: proxy.lose_commit(after=b"harness_runmessage", delivered=False))
        response = run_sync(acme, agent(agent_dir))
        assert proxy.commits_lost == 1

    assert response.status_code == 200, response.content
    run = Run.objects.get(id=response.json()["id"])
    assert_acted_once_and_succeeded(run)
    assert "ok" in verify_audit("acme")


def test_a_driver_that_gives_up_leaves_the_run_running_and_the_next_claims_it_at_once(
    acme, agent_dir, after_effect, settings, monkeypatch
):
    settings.HARNESS_RUN_LEASE_S = 60  # far longer than the test: only a release frees it
    monkeypatch.setattr(retry, "MAX_ATTEMPTS", 3)
    with database_through_proxy() as proxy:
        after_effect.append(lambda: proxy.cut(6))
        name = agent(agent_dir)
        response = run_sync(acme, name)
        # The database is still away when the driver gives up, and the run is not ended for
        # it. The request gave its pooled connection back while it waited for the run, so it
        # reads the run on a new one: told to come back (503) if the database is still away,
        # or, if the pool's wait for a connection outlasted the cut, the run as it stands,
        # running, handed to a worker (202). Never a 500.
        if response.status_code == 503:
            assert response.json()["error"]["details"] == {"dependency": "database"}
        else:
            assert response.status_code == 202, response.content
            assert response.json()["status"] == "running", response.content
        time.sleep(5)
        connection.close()  # the test's own connection went with the cut
        run = Run.objects.get(agent=name)
        assert run.status == "running"
        assert run.lease_token == 1
        assert run.lease_expires_at > run.updated_at  # the release did not reach the database

        # What the retried task does: release the lease the driver could not, then claim.
        started = time.monotonic()
        finished = execute_run(run.id, release=(run.lease_owner, run.lease_token))
        assert time.monotonic() - started < 10  # not the lease's 60 s

    assert finished.lease_token == 2
    assert_acted_once_and_succeeded(Run.objects.get(id=run.id))


@pytest.mark.worker
def test_a_worker_whose_driver_gave_up_retries_the_task_and_resumes_the_run(
    acme, agent_dir, start_worker
):
    """The worker reaches PostgreSQL through a proxy that the test cuts for longer than the
    worker's lease: its driver gives up, the task is retried (not acknowledged as done, not
    failed), and once the database is back the retry releases the lease and drives the run
    to its end — no beat runs here, so nothing else would."""
    url = urlsplit(database_url())
    proxy = PostgresProxy(url.hostname or "127.0.0.1", url.port or 5432)
    through = urlunsplit(url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}"))
    try:
        name = scripted_agent(
            agent_dir,
            [
                {
                    "tool_calls": [
                        {"name": "slow_effect", "arguments": {"seconds": 1, "message": "acted"}}
                    ]
                },
                DONE,
            ],
            tools=["slow_effect"],
        )
        worker = start_worker(
            env={
                "DATABASE_URL": through,
                "HARNESS_RUN_LEASE_S": "4",
                # Its pool gives up on a connection after a second, not ten, so that the
                # driver's retries meet the lease's end while the database is still away.
                "HARNESS_DB_POOL_TIMEOUT_S": "1",
                "HARNESS_AGENT_DIRS": str(agent_dir),
            }
        )
        body = {"agent": name, "user": "bob", "input": "go", "mode": "async"}
        run_id = acme.post("/api/v1/runs", body).json()["id"]
        wait_until(lambda: Notification.objects.filter(message="acted").exists(), 60)
        proxy.cut(8)  # the tool is still running: its step's commit meets the outage
        back = time.monotonic() + 8
        wait_until(lambda: Run.objects.get(id=run_id).is_terminal, timeout_s=60)
        recovered_s = time.monotonic() - back
    finally:
        proxy.close()

    run = Run.objects.get(id=run_id)
    assert run.status == "succeeded", (run.status, run.status_detail)
    assert run.lease_token >= 2
    assert Notification.objects.filter(message="acted").count() == 1
    log = worker.log()
    assert "gives the run up" in log
    assert "Retry in" in log
    print(f"resumed {recovered_s:.1f} s after the database came back")
