"""The experiment engine's overhead per item against a plain run of the same item.

A plain run: ``create_run`` + ``execute_run`` of a scripted agent making ``BENCH_EXP_STEPS``
(5) tool calls (pure-Python ``bench_lookup``) and an answer. An experiment item: the same
recorded run re-executed with the same model, tools answered from the recording, and scored
(``experiments.services.run_item``: run creation, the drive, scoring and the item's rows).
Prints the median per-run times and their ratio (target <= 1.2x). Uses the database of the
environment in a database of its own (``<name>_experiments``; SQLite: a file under var/).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test .venv/bin/python bench/experiments.py

``BENCH_EXP_RUNS`` (20) runs of each kind, ``BENCH_EXP_STEPS`` (5).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")

from bench.support.setup import prepare  # noqa: E402

RUNS = int(os.environ.get("BENCH_EXP_RUNS", 20))
STEPS = int(os.environ.get("BENCH_EXP_STEPS", 5))
AGENT = "bench-experiment"


def main() -> None:
    prepare({AGENT: STEPS}, suffix="experiments")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiments import services
    from harness.models import Tenant
    from harness.runs import RunRequest, create_run, execute_run

    tenant = Tenant.objects.get(slug="acme")

    def plain() -> str:
        run, _ = create_run(tenant, RunRequest(agent=AGENT, user_id="bob", input="go"))
        finished = execute_run(run.id)
        assert finished.status == "succeeded", (finished.status, finished.answer)
        return str(run.id)

    recorded = plain()
    services.create_dataset(tenant, "bench", [recorded], "bench")

    def item() -> Any:
        experiment = services.start_experiment(
            tenant, "bench", {"model": f"scripted:{_script()}"}, enqueue=False
        )
        return str(experiment.items.get().id)

    plain_ms, item_ms = [], []
    for _ in range(RUNS):  # interleaved, so that both kinds see the same machine
        started = time.perf_counter()
        plain()
        plain_ms.append((time.perf_counter() - started) * 1000)
        row_id = item()
        started = time.perf_counter()
        row = services.run_item(row_id)
        item_ms.append((time.perf_counter() - started) * 1000)
        assert row.verdict == "same", row.score
        assert row.score["tool_calls"]["executed"] == 0
    with CaptureQueriesContext(connection) as plain_statements:
        plain()
    row_id = item()
    with CaptureQueriesContext(connection) as item_statements:
        services.run_item(row_id)
    plain_median, item_median = statistics.median(plain_ms), statistics.median(item_ms)
    print(f"experiments: {STEPS} tool steps, {RUNS} runs of each kind (medians)")
    print(f"  plain run        {plain_median:8.1f} ms  {len(plain_statements):4d} statements")
    print(
        f"  experiment item  {item_median:8.1f} ms  {len(item_statements):4d} statements"
        "  (run + recorded tools + scoring)"
    )
    print(f"  overhead         {item_median / plain_median:8.2f}x  (target <= 1.2x)")
    if os.environ.get("BENCH_EXP_SHOW_STATEMENTS"):
        for statement in item_statements.captured_queries:
            print("   ", statement["sql"][:160])


def _script() -> str:
    from harness.agent_registry import get_agent

    return get_agent(AGENT).model.removeprefix("scripted:")


if __name__ == "__main__":
    main()
