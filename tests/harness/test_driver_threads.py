"""Sync runs' driver threads: kept between runs with their database connection, never waited
for, closed when idle; and PostgreSQL statements a connection repeats are prepared."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from harness import runs
from harness.driver_threads import DriverThreads
from harness.settings.env import env_int_or_off
from tests.runs import demo_run, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
on_postgresql = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="prepared statements and backend ids"
)


@pytest.fixture
def threads() -> Iterator[DriverThreads]:
    pool = DriverThreads(name="test-driver")
    yield pool
    assert pool.drain(timeout_s=10)


def _run(pool: DriverThreads, job: Any) -> Any:
    """Submit ``job`` and wait for what it returns (or raises)."""
    done = threading.Event()
    box: dict[str, Any] = {}

    def wrapped() -> None:
        try:
            box["value"] = job()
        finally:
            done.set()

    pool.submit(wrapped)
    assert done.wait(10)
    return box.get("value")


def _where() -> tuple[int, int]:
    """The thread and the database connection (its server process on PostgreSQL) a job ran on."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_backend_pid()")
            return threading.get_ident(), cursor.fetchone()[0]
        cursor.execute("SELECT 1")
    return threading.get_ident(), id(connection.connection)


@pytest.fixture
def conn_max_age() -> Iterator[Any]:
    """Set the connections' ``CONN_MAX_AGE`` (every thread's share this dict) for the test."""
    before = connection.settings_dict["CONN_MAX_AGE"]
    yield lambda seconds: connection.settings_dict.__setitem__("CONN_MAX_AGE", seconds)
    connection.settings_dict["CONN_MAX_AGE"] = before


def test_runs_one_after_another_share_a_thread_and_its_connection(threads, conn_max_age) -> None:
    conn_max_age(60)
    first = _run(threads, _where)
    wait_until(lambda: threads.busy == 0)
    second = _run(threads, _where)
    assert second == first
    assert threads.threads == 1


def test_sync_runs_through_the_api_one_after_another_use_one_driver_thread(acme) -> None:
    for _ in range(2):
        assert demo_run(acme)["status"] == "succeeded"
        wait_until(lambda: runs._driver_threads.busy == 0)
    assert runs._driver_threads.threads == 1


def test_with_conn_max_age_zero_the_thread_stays_and_the_connection_does_not(
    threads, conn_max_age
) -> None:
    conn_max_age(0)
    first = _run(threads, _where)
    wait_until(lambda: threads.busy == 0)
    if connection.vendor == "postgresql":
        _wait_until_released(first[1])  # closed, or back in the process's pool
    second = _run(threads, _where)
    assert second[0] == first[0]


def test_runs_at_once_each_get_a_thread_none_waits(threads) -> None:
    release = threading.Event()
    started = threading.Semaphore(0)

    def blocked() -> None:
        started.release()
        release.wait(10)

    for _ in range(3):
        threads.submit(blocked)
    try:
        for _ in range(3):
            assert started.acquire(timeout=5), "a run waited for another one's thread"
        assert threads.threads == 3
        assert threads.busy == 3
    finally:
        release.set()


def test_a_failing_run_is_logged_and_its_thread_serves_the_next(threads, caplog) -> None:
    def fails() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="harness.driver_threads"):
        threads.submit(fails)
        wait_until(lambda: threads.busy == 0)
    assert "a run driven inline failed" in caplog.text
    assert "boom" in caplog.text
    assert _run(threads, lambda: 42) == 42
    assert threads.threads == 1


@on_postgresql
def test_an_idle_thread_closes_its_connection_and_ends() -> None:
    pool = DriverThreads(idle_s=0.2, name="test-idle")
    _thread, backend = _run(pool, _where)
    wait_until(lambda: pool.threads == 0)
    _wait_until_released(backend)


def _wait_until_released(backend: int) -> None:
    """Until no thread holds PostgreSQL's server process ``backend``: with the connection pool
    (``HARNESS_DB_POOL``, on by default) it is back among the pool's idle connections, without
    it the connection is closed and the server process has ended."""
    pool = connection.pool

    def released() -> bool:
        if pool is not None:
            return backend in {idle.info.backend_pid for idle in list(pool._pool)}
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [backend])
            return cursor.fetchone()[0] == 0

    wait_until(released)


@on_postgresql
def test_drain_ends_the_threads_and_closes_their_connections(conn_max_age) -> None:
    conn_max_age(60)
    pool = DriverThreads(name="test-drain")
    _thread, backend = _run(pool, _where)
    assert pool.threads == 1
    assert pool.drain(timeout_s=5)
    assert pool.threads == 0
    _wait_until_released(backend)


def test_drain_reports_a_run_still_going() -> None:
    pool = DriverThreads(name="test-busy")
    release = threading.Event()
    pool.submit(lambda: release.wait(10))
    try:
        assert pool.drain(timeout_s=0.2) is False
    finally:
        release.set()
    assert pool.drain(timeout_s=5)


@on_postgresql
def test_a_statement_a_connection_repeats_is_prepared() -> None:
    """psycopg prepares a statement on its fifth run (``HARNESS_DB_PREPARE_THRESHOLD``);
    Django alone would leave every statement unprepared."""
    connection.close()  # a new connection: nothing prepared on it yet
    with connection.cursor() as cursor:
        for n in range(6):
            cursor.execute("SELECT %s::int + 1", [n])
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["SELECT $1::int + 1%"],
        )
        assert cursor.fetchone()[0] == 1


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, 5), ("", 5), ("0", 0), ("12", 12), ("off", None), ("None", None)]
)
def test_the_prepare_threshold_setting(monkeypatch, raw, expected) -> None:
    if raw is None:
        monkeypatch.delenv("HARNESS_DB_PREPARE_THRESHOLD", raising=False)
    else:
        monkeypatch.setenv("HARNESS_DB_PREPARE_THRESHOLD", raw)
    assert env_int_or_off("HARNESS_DB_PREPARE_THRESHOLD", 5, minimum=0) == expected


@pytest.mark.parametrize("raw", ["-1", "soon"])
def test_a_bad_prepare_threshold_stops_start_up_naming_it(monkeypatch, raw) -> None:
    monkeypatch.setenv("HARNESS_DB_PREPARE_THRESHOLD", raw)
    with pytest.raises(ImproperlyConfigured, match="HARNESS_DB_PREPARE_THRESHOLD"):
        env_int_or_off("HARNESS_DB_PREPARE_THRESHOLD", 5, minimum=0)
