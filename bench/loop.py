"""Harness overhead per step, sync runs per second through the API, async runs per second.

The model is the scripted one and the tool a database read, so what is measured is the
harness itself: context building, policy checks, validation, checkpoints, events and the trace.
Uses the database of the environment (``DATABASE_URL``, PostgreSQL recommended) in a database
of its own: ``<name>_bench`` is created, migrated and dropped (SQLite: a file under var/).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/loop.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")

STEPS = 10
RUNS = int(os.environ.get("BENCH_RUNS", "30"))
API_RUNS = int(os.environ.get("BENCH_API_RUNS", "60"))
ASYNC_RUNS = int(os.environ.get("BENCH_ASYNC_RUNS", "60"))


def bench_database_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        base, _, name = url.rpartition("/")
        return f"{base}/{name or 'harness'}_bench"
    return f"sqlite:///{ROOT / 'var' / 'bench.sqlite3'}"


def main() -> None:
    os.environ["DATABASE_URL"] = bench_database_url()
    agents = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    script = agents.parent / f"{agents.name}-script.json"
    lookups = [
        {"tool_calls": [{"name": "search_tickets", "arguments": {"limit": n + 1}}]}
        for n in range(STEPS - 1)
    ]
    script.write_text(json.dumps([*lookups, {"text": "done"}]))
    (agents / "bench.json").write_text(
        json.dumps(
            {
                "name": "bench",
                "description": "benchmark agent",
                "system_prompt": "bench",
                "model": f"scripted:{script}",
                "tools": ["search_tickets"],
                "max_steps": STEPS + 1,
            }
        )
    )
    os.environ["HARNESS_AGENT_DIRS"] = str(agents)
    _create_database()

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("load_demo", verbosity=0)
    from django.conf import settings

    from policy.models import TenantLimits

    # Measure the harness, not the tenant's admission limits.
    TenantLimits.objects.update_or_create(
        tenant="acme",
        defaults={
            "runs_per_second": 100_000,
            "max_concurrent_runs": 100_000,
            "model_calls_per_minute": 1_000_000,
        },
    )

    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(f"database: {engine}, broker: {settings.CELERY_BROKER_URL.split(':')[0]}")
    per_step_us = _loop_overhead()
    print(
        f"loop overhead per step ({STEPS}-step runs, {RUNS} runs): "
        f"median {statistics.median(per_step_us):.0f} µs, p95 {_p95(per_step_us):.0f} µs"
    )
    print(f"sync runs through the API: {_sync_api_rate():.1f} runs/s ({STEPS} steps each)")
    print(f"async runs with two workers: {_async_rate():.1f} runs/s ({STEPS} steps each)")


def _create_database() -> None:
    url = os.environ["DATABASE_URL"]
    if not url.startswith("postgres"):
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
        return
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _loop_overhead() -> list[float]:
    from harness.models import Tenant
    from harness.services import RunRequest, create_run, execute_run

    tenant = Tenant.objects.get(slug="acme")
    samples = []
    for _ in range(RUNS):
        run, _ = create_run(tenant, RunRequest(agent="bench", user_id="bob", input="go"))
        started = time.perf_counter()
        finished = execute_run(run.id)
        elapsed = time.perf_counter() - started
        assert finished.status == "succeeded", finished.answer
        samples.append(elapsed / finished.steps * 1e6)
    return samples


def _sync_api_rate() -> float:
    from django.test import Client

    from harness.services import create_api_key

    key = create_api_key("acme", "bench", replace=True).secret
    client = Client()
    body = json.dumps({"agent": "bench", "user": "bob", "input": "go"})
    started = time.perf_counter()
    for _ in range(API_RUNS):
        response = client.post(
            "/api/v1/runs",
            data=body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
            HTTP_HOST="localhost",
        )
        assert response.status_code == 200, response.content
    return API_RUNS / (time.perf_counter() - started)


def _async_rate() -> float:
    from harness.models import Run, RunMode, Tenant
    from harness.services import RunRequest, create_run

    env = os.environ | {"DJANGO_SETTINGS_MODULE": "harness.settings.base"}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "harness",
                "worker",
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"bench{i}@%h",
                "--loglevel",
                "WARNING",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(2)
    ]
    try:
        time.sleep(4)  # let both workers connect
        tenant = Tenant.objects.get(slug="acme")
        started = time.perf_counter()
        ids = [
            create_run(
                tenant, RunRequest(agent="bench", user_id="bob", input="go", mode=RunMode.ASYNC)
            )[0].id
            for _ in range(ASYNC_RUNS)
        ]
        terminal = ["succeeded", "failed", "cancelled", "budget_exceeded", "step_limit"]
        while Run.objects.filter(id__in=ids, status__in=terminal).count() < len(ids):
            if time.perf_counter() - started > 600:
                raise SystemExit("async runs did not finish within 10 minutes")
            time.sleep(0.1)
        elapsed = time.perf_counter() - started
        failed = Run.objects.filter(id__in=ids).exclude(status="succeeded").count()
        if failed:
            raise SystemExit(f"{failed} of {len(ids)} async runs did not succeed")
        return ASYNC_RUNS / elapsed
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait()


def _p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1]


if __name__ == "__main__":
    main()
