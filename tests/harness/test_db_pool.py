"""The per-process PostgreSQL connection pool (``HARNESS_DB_POOL``, docs/configuration.md).

Under the shipped ASGI server every request ran on a thread of its own (Django's handler), so
Django's persistent connections were off there (``CONN_MAX_AGE=0``), and before the pool every
sync run opened a new connection (a new PostgreSQL server process, its prepared statements
lost). The request threads are kept now (harness/asgi_handler.py), so persistent connections
work there too. The settings tests
load ``harness/settings/base.py`` afresh under a given environment; the server test starts the
shipped command (gunicorn with uvicorn workers) on the test database and counts the sessions
PostgreSQL opened while it served sync runs.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from types import ModuleType

import httpx
import psycopg
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections
from django.db.backends.postgresql.base import DatabaseWrapper
from django.db.utils import ConnectionHandler
from hypothesis import given
from hypothesis import strategies as st

from harness.api_keys import create_api_key
from harness.models import Tenant
from tests.runs import QUESTION
from tests.support.servers import serve
from tests.worker import database_url

BASE_SETTINGS = Path(settings.BASE_DIR) / "harness" / "settings" / "base.py"
POSTGRES_URL = "postgres://harness@db.example:5432/harness"
on_postgresql = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="needs PostgreSQL (DATABASE_URL)"
)


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """The database variables exactly as given (others of the kind unset), for the block."""
    saved = dict(os.environ)
    try:
        for name in list(os.environ):
            if name == "DATABASE_URL" or name.startswith("HARNESS_DB_"):
                del os.environ[name]
        os.environ.update(env)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def load_settings(**env: str) -> ModuleType:
    """``harness/settings/base.py`` executed afresh under ``env``."""
    with environment(env):
        spec = importlib.util.spec_from_file_location("harness_settings_probe", BASE_SETTINGS)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def database(**env: str) -> dict:
    return load_settings(**env).DATABASES["default"]


# -- settings --------------------------------------------------------------------------------


def test_the_pool_is_on_by_default_on_postgresql() -> None:
    db = database(DATABASE_URL=POSTGRES_URL)
    assert db["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 16, "timeout": 10.0}
    assert db["CONN_MAX_AGE"] == 0  # Django's pool requires it
    assert db["CONN_HEALTH_CHECKS"] is True
    assert db["OPTIONS"]["prepare_threshold"] == 5


def test_the_shipped_command_environment_gets_the_pool() -> None:
    """scripts/run-demo.sh, the Dockerfile and docker-compose start the web server with
    ``HARNESS_DB_CONN_MAX_AGE=0``: that is compatible with the pool, which stays on."""
    db = database(DATABASE_URL=POSTGRES_URL, HARNESS_DB_CONN_MAX_AGE="0")
    assert db["OPTIONS"]["pool"]["max_size"] == 16


@pytest.mark.parametrize("off", ["off", "0", "false", "no"])
def test_harness_db_pool_off_turns_it_off(off: str) -> None:
    db = database(DATABASE_URL=POSTGRES_URL, HARNESS_DB_POOL=off)
    assert "pool" not in db["OPTIONS"]
    assert db["CONN_MAX_AGE"] == 60  # persistent connections, as before the pool
    db = database(DATABASE_URL=POSTGRES_URL, HARNESS_DB_POOL=off, HARNESS_DB_CONN_MAX_AGE="0")
    assert "pool" not in db["OPTIONS"]
    assert db["CONN_MAX_AGE"] == 0


def test_no_pool_on_sqlite() -> None:
    assert "pool" not in database()["OPTIONS"]
    assert "pool" not in database(DATABASE_URL="sqlite:////tmp/pool-probe.sqlite3")["OPTIONS"]


def test_persistent_connections_asked_for_keep_working_without_the_pool() -> None:
    """A deployment's HARNESS_DB_CONN_MAX_AGE=60 from before the pool still starts, as before."""
    db = database(DATABASE_URL=POSTGRES_URL, HARNESS_DB_CONN_MAX_AGE="60")
    assert "pool" not in db["OPTIONS"]
    assert db["CONN_MAX_AGE"] == 60


def test_persistent_connections_with_the_pool_asked_for_stop_start_up_naming_both() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"HARNESS_DB_CONN_MAX_AGE.*HARNESS_DB_POOL"):
        load_settings(DATABASE_URL=POSTGRES_URL, HARNESS_DB_POOL="on", HARNESS_DB_CONN_MAX_AGE="60")


@given(
    max_size=st.integers(min_value=1, max_value=10_000),
    min_size=st.integers(min_value=0, max_value=10_000),
    timeout=st.floats(min_value=0.1, max_value=3600, allow_nan=False),
)
def test_pool_sizes_come_from_the_environment(max_size: int, min_size: int, timeout: float):
    db = database(
        DATABASE_URL=POSTGRES_URL,
        HARNESS_DB_POOL_MAX_SIZE=str(max_size),
        HARNESS_DB_POOL_MIN_SIZE=str(min_size),
        HARNESS_DB_POOL_TIMEOUT_S=repr(timeout),
    )
    assert db["OPTIONS"]["pool"] == {
        "min_size": min(min_size, max_size),  # never more kept open than allowed
        "max_size": max_size,
        "timeout": timeout,
    }


def _not_an_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return text.strip() != ""
    return False


@given(
    name=st.sampled_from(["HARNESS_DB_POOL_MAX_SIZE", "HARNESS_DB_POOL_MIN_SIZE"]),
    raw=st.one_of(
        st.text(st.characters(blacklist_characters="\x00", codec="utf-8")).filter(_not_an_int),
        st.integers(max_value=-1).map(str),
    ),
)
def test_a_bad_pool_size_stops_start_up_naming_it(name: str, raw: str) -> None:
    if name == "HARNESS_DB_POOL_MAX_SIZE" and raw.strip().lstrip("-").isdigit():
        raw = "0"  # the maximum must be at least 1
    with pytest.raises(ImproperlyConfigured, match=name):
        load_settings(DATABASE_URL=POSTGRES_URL, **{name: raw})


def test_a_bad_pool_switch_stops_start_up_naming_it() -> None:
    with pytest.raises(ImproperlyConfigured, match="HARNESS_DB_POOL"):
        load_settings(DATABASE_URL=POSTGRES_URL, HARNESS_DB_POOL="sometimes")


def _probe(db: dict) -> DatabaseWrapper:
    handler = ConnectionHandler({"default": db})
    return DatabaseWrapper(handler.settings["default"], alias="probe")


def test_behind_pgbouncer_the_pooled_connections_prepare_nothing() -> None:
    """A transaction-mode pooler older than PgBouncer 1.21: ``HARNESS_DB_PREPARE_THRESHOLD=off``
    reaches the connections the pool opens (Django hands the pool its connection parameters)."""
    db = database(DATABASE_URL=POSTGRES_URL, HARNESS_DB_PREPARE_THRESHOLD="off")
    assert "pool" in db["OPTIONS"]
    assert _probe(db).get_connection_params()["prepare_threshold"] is None
    db = database(DATABASE_URL=POSTGRES_URL)
    assert _probe(db).get_connection_params()["prepare_threshold"] == 5


@on_postgresql
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("threshold", "prepared"), [("off", 0), ("5", 1)])
def test_a_pooled_connection_prepares_as_configured(threshold: str, prepared: int) -> None:
    """On the test database: a statement run six times on a connection from the pool is
    prepared by default, and not with the PgBouncer setting."""
    db = database(DATABASE_URL=database_url(), HARNESS_DB_PREPARE_THRESHOLD=threshold)
    probe = _probe(db)
    try:
        with probe.cursor() as cursor:
            assert probe.pool is not None
            for n in range(6):
                cursor.execute("SELECT %s::int + 2", [n])
            cursor.execute(
                "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                ["SELECT $1::int + 2%"],
            )
            assert cursor.fetchone()[0] == prepared
    finally:
        probe.close()
        probe.close_pool()


# -- the shipped server ----------------------------------------------------------------------


@contextmanager
def shipped_server(django_db_blocker, tmp_path_factory, **env: str) -> Iterator[str]:
    """The web command as scripts/run-demo.sh, compose and the Dockerfile start it (one
    worker here), on the test database; yields its URL. Runs back to back start faster than
    a tenant's default 10 a second on a quick machine: the limit is raised."""
    env = {"HARNESS_TENANT_RUNS_PER_SECOND": "1000"} | env
    with closing(serve(django_db_blocker, tmp_path_factory, env=env)) as servers:
        yield next(servers)("asgi").url


def _sessions(conn: psycopg.Connection) -> int:
    """Sessions PostgreSQL has opened on this database so far (counted at connection)."""
    return conn.execute(
        "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()[0]


SYNC_RUNS = 10


@on_postgresql
@pytest.mark.parametrize("pool", ["on", "off"])
def test_the_shipped_server_reuses_connections_across_sync_runs(
    demo, django_db_blocker, tmp_path_factory, pool
) -> None:
    """With the pool (the default), ten sync runs through the shipped server open no new
    database session once it is warm; without it each run opened its own."""
    key = create_api_key("acme", "pool").secret
    env = {} if pool == "on" else {"HARNESS_DB_POOL": "off"}
    body = {"agent": "ticket-assistant", "user": "bob", "input": QUESTION}
    headers = {"Authorization": f"Bearer {key}"}
    with (
        shipped_server(django_db_blocker, tmp_path_factory, **env) as url,
        httpx.Client(base_url=url, headers=headers, timeout=60) as client,
        psycopg.connect(database_url(), autocommit=True) as watcher,
    ):

        def sync_run() -> None:
            response = client.post("/api/v1/runs", json=body)
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "succeeded", response.text

        for _ in range(2):
            sync_run()  # warm: the pool opened, the heartbeat and driver threads started
        time.sleep(0.5)  # the pool's background connections are in
        before = _sessions(watcher)
        for _ in range(SYNC_RUNS):
            sync_run()
        opened = _sessions(watcher) - before
    if pool == "on":
        assert opened <= 1, f"{opened} new sessions for {SYNC_RUNS} sync runs"
    else:
        assert opened >= SYNC_RUNS, opened  # what the pool saves: one or more per run
    connection.close()


@on_postgresql
def test_with_persistent_connections_the_shipped_server_keeps_a_request_threads_connection(
    demo, django_db_blocker, tmp_path_factory
) -> None:
    """Without the pool but with ``CONN_MAX_AGE``, requests one after another are served by one
    kept request thread and its connection: Django's ASGI handler gave each request a new
    thread, so each opened a session of its own."""
    key = create_api_key("acme", "persistent").secret
    env = {"HARNESS_DB_POOL": "off", "HARNESS_DB_CONN_MAX_AGE": "60"}
    with (
        shipped_server(django_db_blocker, tmp_path_factory, **env) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as client,
        psycopg.connect(database_url(), autocommit=True) as watcher,
    ):
        assert client.get("/api/v1/runs?limit=1").status_code == 200
        before = _sessions(watcher)
        for _ in range(10):
            response = client.get("/api/v1/runs?limit=1")
            assert response.status_code == 200, response.text
        opened = _sessions(watcher) - before
    assert opened == 0, f"{opened} new sessions for 10 requests"
    connection.close()


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_sync_request_gives_its_pooled_connection_back_while_its_run_is_driven(
    demo, monkeypatch
) -> None:
    """A sync run in flight holds one pooled connection (its driver's), not two: the request's
    own goes back to the pool while it waits for the run."""
    from harness import runs

    assert settings.DATABASES["default"]["OPTIONS"].get("pool"), "the pool is on by default"
    requests_connection = connections["default"]
    seen: list[bool] = []
    drive = runs.drive_run

    def watched(*args, **kwargs):
        deadline = time.monotonic() + 2
        while requests_connection.connection is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(requests_connection.connection is None)
        return drive(*args, **kwargs)

    monkeypatch.setattr(runs, "drive_run", watched)
    run, _ = runs.start_run(
        Tenant.objects.get(slug="acme"),
        runs.RunRequest(agent="ticket-assistant", user_id="bob", input=QUESTION, mode="sync"),
    )
    assert run.status == "succeeded"
    assert seen == [True]


@on_postgresql
@pytest.mark.worker
def test_a_celery_prefork_worker_with_the_pool_finishes_async_runs(acme, start_worker) -> None:
    """The pool is per process and must not cross the prefork fork: Celery's Django fix-up
    closes it in each child and around each task (celery 5.7). Runs one after another in the
    same child all finish, on the pool as configured by default."""
    worker = start_worker(pool="prefork")
    ids = []
    for _ in range(3):
        response = acme.post(
            "/api/v1/runs",
            {"agent": "ticket-assistant", "user": "bob", "input": QUESTION, "mode": "async"},
        )
        assert response.status_code == 202, response.content
        ids.append(response.json()["id"])
    deadline = time.monotonic() + 90
    statuses: dict[str, str] = {}
    while time.monotonic() < deadline:
        statuses = {i: acme.get(f"/api/v1/runs/{i}").json()["status"] for i in ids}
        if not {"queued", "running"} & set(statuses.values()):
            break
        time.sleep(0.3)
    assert set(statuses.values()) == {"succeeded"}, (statuses, worker.log()[-3000:])
    assert "Traceback" not in worker.log(), worker.log()[-3000:]
