"""Workers are supervised: under `make run` (scripts/supervise.sh) a worker that dies is
started again within seconds, and a Redis connection lost while a worker holds unacknowledged
messages does not crash it (kombu 5.7.0's restore on a closed connection)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import kombu
import pytest
import redis
from django.conf import settings

from harness import kombu_fix
from harness.demo import database_url
from tests.runs import wait_until
from tests.support.outages import redis_server  # noqa: F401

pytestmark = pytest.mark.worker

BODY = {"agent": "ticket-assistant", "user": "bob", "input": "Why is T-20250318-007 open?"}


def test_the_make_run_supervisor_restarts_a_killed_worker_within_seconds(acme, tmp_path):
    from harness.celery import app

    app.control.purge()
    pidfile, log = tmp_path / "worker.pid", tmp_path / "worker.log"
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "harness.settings.test",
        "DATABASE_URL": database_url(),
    }
    worker = [sys.executable, "-m", "celery", "-A", "harness", "worker", "-Q"]
    worker += [settings.CELERY_TASK_DEFAULT_QUEUE, "--pool", "solo", "--without-gossip"]
    worker += ["--without-mingle", "--loglevel", "INFO"]
    with log.open("wb") as out:
        supervisor = subprocess.Popen(
            ["scripts/supervise.sh", str(pidfile), *worker],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: log.read_bytes().count(b" ready.") == 1, timeout_s=60)
        first = int(pidfile.read_text())

        os.kill(first, signal.SIGKILL)
        killed = time.monotonic()
        wait_until(lambda: pidfile.exists() and int(pidfile.read_text() or 0) != first, 10)
        wait_until(lambda: log.read_bytes().count(b" ready.") == 2, timeout_s=60)
        print(f"worker ready again {time.monotonic() - killed:.1f} s after SIGKILL")
        assert time.monotonic() - killed < 45  # a 1 s pause, then Celery boots (busy CI: ~18 s)

        run = acme.post("/api/v1/runs", BODY | {"mode": "async"}).json()
        finished = wait_until(
            lambda: acme.get(f"/api/v1/runs/{run['id']}").json()["status"] == "succeeded", 60
        )
        assert finished
    finally:
        os.killpg(supervisor.pid, signal.SIGTERM)
        supervisor.wait(timeout=30)
    assert not pidfile.exists()  # the supervisor stopped its worker and itself


def test_a_lost_broker_connection_with_unacked_messages_does_not_crash_the_worker(
    redis_server,  # noqa: F811
):
    """The state kombu leaves when a Redis connection is lost: a channel holding a delivered,
    unacknowledged message whose transport lost its connection info. Closing it must not
    raise (kombu 5.7.0: AttributeError on ``hostname``), and the message stays in Redis."""
    kombu_fix.install()
    connection = kombu.Connection(redis_server.url)
    channel = connection.channel()
    queue = kombu.Queue("runs", kombu.Exchange("runs"), routing_key="runs")
    queue(channel).declare()
    kombu.Producer(channel).publish({"run": 1}, exchange="runs", routing_key="runs")
    assert channel.basic_get("runs", no_ack=False) is not None
    channel.connection.client = None  # what the lost connection leaves behind
    channel._pool = None

    channel.qos.restore_unacked_once()  # raised AttributeError before the fix

    assert redis.Redis.from_url(redis_server.url).hlen("unacked") == 1  # kept for restore
