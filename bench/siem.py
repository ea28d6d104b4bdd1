"""Benchmark: do runs slow down while a SIEM sink is down?

    .venv/bin/python bench/siem.py [--runs 40] [--steps 5] [--interval 0.5]

Times ``--runs`` runs of a ``--steps``-step agent (scripted model, one tool call a step) in
three phases, interleaved in rounds of 5 runs: no sink; an HTTPS sink that is down
(connections refused); the same sink up (a local receiver). In every phase a delivery loop
calls ``deliver_to_sinks`` every ``--interval`` s beside the runs, in this process (as the
worker's beat would on a worker; back-off here at most 2 s). Prints the
median and p90 per run and the ratios to the first phase, plus the records delivered and the
lag left. Runs on a throw-away database (``bench_siem`` beside ``DATABASE_URL``, else SQLite).
Asserts nothing about speed: on a shared machine absolute figures move with the load, which is
printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed_runs(agent: str, count: int) -> list[float]:
    from harness.models import Tenant
    from harness.runs import RunRequest, create_run, execute_run

    tenant = Tenant.objects.get(slug="acme")
    times = []
    for _ in range(count):
        run, _ = create_run(tenant, RunRequest(agent=agent, user_id="bob", input="go"))
        started = time.perf_counter()
        finished = execute_run(run.id)
        times.append(time.perf_counter() - started)
        assert finished.status == "succeeded", (finished.status, finished.answer)
    return times


class DeliveryLoop:
    """``deliver_to_sinks`` every ``interval`` s on a thread of its own (its own connection)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.delivered = 0
        self.attempts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        from django.db import connection

        from harness.siem.delivery import deliver_to_sinks

        while not self._stop.is_set():
            self.delivered += sum(r.records for r in deliver_to_sinks())
            self.attempts += 1
            self._stop.wait(self.interval)
        connection.close()

    def __enter__(self) -> DeliveryLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def line(label: str, times: list[float], base: float | None) -> str:
    median = statistics.median(times) * 1000
    p90 = sorted(times)[int(len(times) * 0.9) - 1] * 1000
    ratio = f"  {median / base:.2f}x of no sink" if base else ""
    return f"  {label:<28} median {median:7.1f} ms  p90 {p90:7.1f} ms{ratio}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--interval", type=float, default=0.5)
    options = parser.parse_args()

    from bench.support.setup import prepare

    prepare({"bench-siem": options.steps}, suffix="bench_siem")
    from django.conf import settings

    from harness.siem.delivery import siem_status
    from tests.support.siem_receivers import HttpReceiver

    settings.HARNESS_SIEM_SETTLE_S = 0
    settings.HARNESS_SIEM_RETRY_BASE_S = 0.5
    settings.HARNESS_SIEM_RETRY_MAX_S = 2.0
    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"database: {engine}; {options.runs} runs of {options.steps} steps per phase; delivery "
        f"every {options.interval} s; load average {load} on {os.cpu_count()} CPUs"
    )

    timed_runs("bench-siem", 3)  # warm-up: caches, prepared statements
    receiver = HttpReceiver()  # started for the "up" phase only: connections refused when down
    phases = {
        "no sink": [],
        "HTTPS sink down": [{"name": "down", "type": "https", "url": receiver.url}],
        "HTTPS sink up": [{"name": "up", "type": "https", "url": receiver.url}],
    }
    times: dict[str, list[float]] = {label: [] for label in phases}
    delivered = dict.fromkeys(phases, 0)
    # Interleaved rounds, so that drift of the machine's load and the database's growth
    # falls on every phase alike.
    per_round = 5
    for _ in range(max(1, options.runs // per_round)):
        for label, sinks in phases.items():
            settings.HARNESS_SIEM_SINKS = sinks
            if label == "HTTPS sink up":
                receiver.start()
            with DeliveryLoop(options.interval) as loop:
                times[label] += timed_runs("bench-siem", per_round)
            if label == "HTTPS sink up":
                receiver.stop()
            delivered[label] += loop.delivered
    base = statistics.median(times["no sink"]) * 1000
    for label in phases:
        print(line(label, times[label], None if label == "no sink" else base))
    status = {s["stream"]: s for s in siem_status() if s["sink"] == "down"}
    print(
        f"    sink down: {delivered['HTTPS sink down']} records delivered, audit lag at the end "
        f"{status['audit']['lag_records']} records / {status['audit']['lag_seconds']} s; "
        f"sink up: {delivered['HTTPS sink up']} records delivered"
    )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average now {load}")


if __name__ == "__main__":
    main()
