"""A Redis outage fails the tenant limiters open: runs in flight finish, new runs are
admitted, nothing waits longer than the limiter's timeout, and a slot that could not be
released is released once Redis answers again. The Redis is a redis-server of the test's own,
killed or stopped (SIGSTOP: it accepts connections and answers nothing) in the test."""

from __future__ import annotations

import time

import redis

from harness.models import RunStatus
from harness.runs import execute_run
from policy.limiter import KEY_PREFIX, REDIS_RETRY_S, REDIS_TIMEOUT_S, RedisLimiter
from tests.support.outages import redis_server  # noqa: F401

BODY = {"agent": "ticket-assistant", "user": "bob", "input": "Why is T-20250318-007 open?"}


def test_runs_in_flight_when_redis_dies_finish_and_new_runs_are_admitted(
    acme,
    settings,
    redis_server,  # noqa: F811
):
    settings.REDIS_URL = redis_server.url
    queued = acme.post("/api/v1/runs", BODY | {"mode": "async"})
    assert queued.status_code == 202, queued.content  # admitted while Redis was up

    redis_server.kill()
    # The admitted run is driven now: every model call is paced by the dead limiter.
    run = execute_run(queued.json()["id"])
    assert (run.status, run.stop_reason) == (RunStatus.SUCCEEDED, "final_answer")

    response = acme.post("/api/v1/runs", BODY)
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "succeeded"


def test_a_redis_that_does_not_answer_costs_one_timeout_then_limits_hold_again(
    redis_server,  # noqa: F811
):
    limiter = RedisLimiter(redis_server.url)
    key = "concurrent:acme"
    assert limiter.acquire_slot(key, "run-1", 1, 60)
    assert not limiter.acquire_slot(key, "run-2", 1, 60)  # the limit holds while Redis does

    redis_server.pause()
    started = time.monotonic()
    assert limiter.hit_rate("runs:acme", 1, 1000).allowed
    assert time.monotonic() - started < REDIS_TIMEOUT_S + 0.5
    started = time.monotonic()
    assert limiter.acquire_slot(key, "run-2", 1, 60)  # fails open at once: Redis is known down
    assert limiter.rate_usage("model:acme", 60_000) == (0, 0.0)
    limiter.release_slot(key, "run-1")  # cannot reach Redis: remembered
    assert time.monotonic() - started < 0.2

    redis_server.resume()
    time.sleep(REDIS_RETRY_S + 0.1)
    assert limiter.acquire_slot(key, "run-3", 1, 60)  # run-1's slot was released on the way
    held = redis.Redis.from_url(redis_server.url).zrange(KEY_PREFIX + key, 0, -1)
    assert held == [b"run-3"]
    assert not limiter.acquire_slot(key, "run-4", 1, 60)  # enforced again


def test_an_async_run_posted_while_the_broker_is_down_is_accepted_and_left_to_the_sweep(
    acme,
    redis_server,  # noqa: F811
):
    from harness.celery import app

    redis_server.kill()  # the broker: a Redis that is not there
    conf = app.conf
    saved = conf.broker_url, conf.broker_transport_options, app._pool
    conf.broker_url, conf.broker_transport_options, app._pool = redis_server.url, {}, None
    try:
        response = acme.post("/api/v1/runs", BODY | {"mode": "async"})
    finally:
        app.pool.force_close_all()
        conf.broker_url, conf.broker_transport_options, app._pool = saved
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued"  # committed: recover_stalled_runs sends it
