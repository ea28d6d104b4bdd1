"""Harness against LangGraph + PostgresSaver on the same task, back to back, in one run.

The task (the shared peer benchmark's): get a ticket, look two users up in one response,
assign the ticket, answer — 4 model calls (a scripted model) and 4 pure-Python tool calls.
Each repetition runs LangGraph ``create_react_agent`` with ``PostgresSaver`` (sync
``invoke``; in its own venv, ``bench/peers/.venv``) and then Harness (``create_run`` +
``execute_run``, PostgreSQL as ``DATABASE_URL`` names it), and prints each one's per-step
median (per run ÷ 4 model calls) and the ratio; the last lines are the medians over the
repetitions.

    make bench-peers        # or, by hand:
    python3 -m venv bench/peers/.venv
    bench/peers/.venv/bin/pip install -r bench/peers/requirements.txt
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/peers/compare.py

Uses databases of its own beside ``DATABASE_URL``'s: ``<name>_peers`` (Harness) and
``<name>_peers_lg`` (LangGraph's checkpoints), dropped and created. Options (environment):
``BENCH_PEER_REPS`` (5), ``BENCH_PEER_RUNS`` timed runs per repetition and peer (20),
``BENCH_PEER_WARMUP`` (5), ``BENCH_PEER_PYTHON`` (the peers' interpreter).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")

from bench.support.setup import (  # noqa: E402
    PEER_SCRIPT,
    PEER_STEPS,
    bench_database_url,
    create_database,
    prepare,
)
from bench.support.sql import StatementCounter, Tally  # noqa: E402

REPS = int(os.environ.get("BENCH_PEER_REPS", "5"))
RUNS = int(os.environ.get("BENCH_PEER_RUNS", "20"))
WARMUP = int(os.environ.get("BENCH_PEER_WARMUP", "5"))
PEER_PYTHON = os.environ.get("BENCH_PEER_PYTHON", str(HERE / ".venv" / "bin" / "python"))


def main() -> None:
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("bench/peers/compare.py needs DATABASE_URL to name a PostgreSQL server")
    if not Path(PEER_PYTHON).exists():
        raise SystemExit(
            f"no peers venv at {PEER_PYTHON}: python3 -m venv bench/peers/.venv && "
            "bench/peers/.venv/bin/pip install -r bench/peers/requirements.txt"
        )
    langgraph_url = bench_database_url("peers_lg")
    create_database(langgraph_url)
    prepare({}, peer_agent=True, suffix="peers")
    harness_runs(WARMUP)  # warm Harness's caches as a running server has them
    counted = harness_round_trips()
    print(
        f"per-step median, {PEER_STEPS} model calls + 4 tool calls per run, {RUNS} runs per "
        f"peer and repetition, back to back:"
    )
    rows = []
    for rep in range(1, REPS + 1):
        peer = langgraph(langgraph_url)
        whole, driving = harness_runs(RUNS)
        row = (peer, whole, driving, whole / peer)
        rows.append(row)
        print(
            f"  repetition {rep}: LangGraph+PostgresSaver {peer:6.2f} ms, Harness {whole:6.2f} ms "
            f"(execute_run alone {driving:6.2f} ms): {whole / peer:5.1f}x"
        )
    peer, whole, driving, ratio = (statistics.median(col) for col in zip(*rows, strict=True))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"(load average {load} on {os.cpu_count()} CPUs)")
    print(f"LangGraph create_react_agent + PostgresSaver (sync): {peer:.2f} ms per step")
    print(f"Harness, PostgreSQL (create_run + execute_run):      {whole:.2f} ms per step")
    print(
        f"Harness ÷ LangGraph+PostgresSaver: {ratio:.1f}x (target ≤ 1x; execute_run alone "
        f"{driving / peer:.1f}x)"
    )
    print(
        f"Harness on this task, per step: {counted.statements / PEER_STEPS:.1f} statements, "
        f"{counted.transactions / PEER_STEPS:.1f} transactions, "
        f"{counted.connections / PEER_STEPS:.1f} database connections opened"
    )


def langgraph(url: str, runs: int = RUNS) -> float:
    """LangGraph's per-step median (ms) over ``runs`` runs, in the peers' venv."""
    url = url.replace("postgres://", "postgresql://", 1)
    script = str(HERE / "langgraph_run.py")
    out = subprocess.run(
        [PEER_PYTHON, script, "--postgres", url, "--runs", str(runs), "--warmup", str(WARMUP)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode:
        raise SystemExit(f"langgraph_run.py failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["per_step_ms_median"]


def harness_round_trips() -> Tally:
    """What one whole Harness run of the task costs in statements, transactions, connections."""
    from harness.models import Tenant
    from harness.runs import RunRequest, create_run, execute_run

    counter = StatementCounter()
    tenant = Tenant.objects.get(slug="acme")
    with counter.measure() as tally:
        run, _ = create_run(tenant, RunRequest(agent="bench-peer", user_id="bob", input="go"))
        execute_run(run.id)
    return tally


def harness_runs(count: int) -> tuple[float, float]:
    """Harness's per-step medians (ms): whole runs (create + execute) and execute_run alone."""
    from harness.models import Tenant
    from harness.runs import RunRequest, create_run, execute_run

    tenant = Tenant.objects.get(slug="acme")
    answer = PEER_SCRIPT[-1]["text"]
    whole, driving = [], []
    for _ in range(count):
        started = time.perf_counter()
        run, _ = create_run(tenant, RunRequest(agent="bench-peer", user_id="bob", input="go"))
        created = time.perf_counter()
        finished = execute_run(run.id)
        ended = time.perf_counter()
        if finished.status != "succeeded" or finished.steps != PEER_STEPS:
            raise SystemExit(f"a Harness run ended {finished.status}: {finished.answer}")
        if answer not in finished.answer:
            raise SystemExit(f"wrong answer: {finished.answer!r}")
        whole.append(ended - started)
        driving.append(ended - created)
    return (
        statistics.median(whole) * 1e3 / PEER_STEPS,
        statistics.median(driving) * 1e3 / PEER_STEPS,
    )


if __name__ == "__main__":
    main()
