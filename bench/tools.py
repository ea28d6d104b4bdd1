"""Tool benchmarks: validation cost, executor overhead, parallel wall time. Prints figures.

    .venv/bin/python bench/tools.py [--calls 200] [--parallel 8]

Runs on a throwaway SQLite database under a temporary HARNESS_VAR_DIR, or on PostgreSQL when
DATABASE_URL is set (use a database of your own: the script migrates it).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, this file's folder would come first on sys.path and shadow the tools app.
sys.path = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]


def setup_django() -> None:
    if "HARNESS_VAR_DIR" not in os.environ:
        var_dir = tempfile.mkdtemp(prefix="harness-bench-")
        atexit.register(shutil.rmtree, var_dir, ignore_errors=True)
        os.environ["HARNESS_VAR_DIR"] = var_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def large_schema() -> dict[str, Any]:
    """~60 properties: nested objects three deep, enums, arrays of objects, 10 if/then rules."""
    address = {
        "type": "object",
        "properties": {
            "street": {"type": "string", "minLength": 1},
            "city": {"type": "string"},
            "postcode": {"type": "string", "pattern": "^[0-9A-Z -]{3,10}$"},
            "country": {"enum": ["CN", "DE", "FR", "GB", "JP", "US"]},
            "geo": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"],
            },
        },
        "required": ["street", "city", "country"],
        "additionalProperties": False,
    }
    properties: dict[str, Any] = {
        f"field_{n}": {"type": "string", "maxLength": 200} for n in range(40)
    } | {
        "kind": {"enum": [f"kind_{n}" for n in range(10)]},
        "email": {"type": "string", "format": "email"},
        "due": {"type": "string", "format": "date-time"},
        "billing": address,
        "shipping": address,
        "lines": {
            "type": "array",
            "maxItems": 100,
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^SKU-[0-9]+$"},
                    "quantity": {"type": "integer", "minimum": 1},
                    "price": {"type": "number", "exclusiveMinimum": 0},
                },
                "required": ["sku", "quantity"],
                "additionalProperties": False,
            },
        },
    }
    properties |= {f"reason_{n}": {"type": "string"} for n in range(10)}
    return {
        "type": "object",
        "properties": properties,
        "required": ["kind", "billing", "lines"],
        "additionalProperties": False,
        "allOf": [
            {
                "if": {"properties": {"kind": {"const": f"kind_{n}"}}},
                "then": {"required": [f"reason_{n}"]},
            }
            for n in range(10)
        ],
    }


def large_arguments() -> dict[str, Any]:
    address = {"street": "1 Main St", "city": "Berlin", "postcode": "10115", "country": "DE"}
    return {f"field_{n}": f"value {n}" for n in range(40)} | {
        "kind": "kind_3",
        "reason_3": "because",
        "email": "buyer@example.com",
        "due": "2025-04-01T09:00:00Z",
        "billing": address | {"geo": {"lat": 52.5, "lon": 13.4}},
        "shipping": address,
        "lines": [{"sku": f"SKU-{n}", "quantity": n + 1, "price": 9.5} for n in range(20)],
    }


def per_call_us(function: Any, repeat: int) -> float:
    function()  # warm caches (compiled validators)
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            function()
        samples.append((time.perf_counter() - started) / repeat * 1e6)
    return statistics.median(samples)


def bench_validation() -> None:
    from tools.registry import ToolDefinition
    from tools.services import find_violations, get_tool_registry

    small = get_tool_registry().get("get_ticket")
    large = ToolDefinition(
        name="big",
        description="A large schema for the benchmark.",
        parameters=large_schema(),
        handler_path="bench.handlers.noop",
        access=("bench:run",),
        path="(bench)",
    )
    good_small = {"ticket_id": "T-20250318-007"}
    bad_small = {"ticket_id": 7, "extra": True}
    good_large = large_arguments()
    bad_large = good_large | {"kind": "kind_5", "lines": [{"sku": "x", "quantity": 0}]}
    assert not find_violations(small, good_small)
    assert find_violations(small, bad_small)
    assert not find_violations(large, good_large)
    assert find_violations(large, bad_large)
    print("Validation (Draft 2020-12, formats on), median of 5 runs:")
    for label, tool, arguments, repeat in [
        ("small schema (get_ticket), valid", small, good_small, 5000),
        ("small schema (get_ticket), 2 violations", small, bad_small, 5000),
        ("large schema (~60 props, 10 if/then), valid", large, good_large, 300),
        ("large schema, 4 violations", large, bad_large, 300),
    ]:
        cost = per_call_us(lambda t=tool, a=arguments: find_violations(t, a), repeat)
        print(f"  {label:<46} {cost:9.1f} µs/call")


def tool(name: str, handler: str, safe: bool, timeout_s: float = 10.0) -> Any:
    from tools.registry import ToolDefinition

    return ToolDefinition(
        name=name,
        description="A benchmark tool.",
        parameters={"type": "object"},
        handler_path=handler,
        access=("bench:run",),
        path="(bench)",
        timeout_s=timeout_s,
        idempotent=True,
        concurrency_safe=safe,
    )


def planned(definition: Any, run_id: str, n: int) -> Any:
    from tools.services import PlannedCall, ToolContext

    context = ToolContext("bench", "bench", run_id, f"call_{n}", f"{run_id}:call_{n}")
    return PlannedCall(definition, {}, context)


def bench_executor(calls: int) -> None:
    from tools.services import execute_tool_calls

    noop = tool("noop", "bench.handlers.noop", safe=False)
    run_id = uuid.uuid4().hex
    for n in range(5):  # warm up: thread pool, connections, imports
        execute_tool_calls([planned(noop, run_id, -n - 1)])
    durations = []
    for n in range(calls):
        started = time.perf_counter()
        [outcome] = execute_tool_calls([planned(noop, run_id, n)])
        durations.append((time.perf_counter() - started) * 1000)
        assert outcome.ok, outcome.error
    started = time.perf_counter()
    for n in range(calls):
        [outcome] = execute_tool_calls([planned(noop, run_id, n)])
        assert outcome.replayed
    replay_ms = (time.perf_counter() - started) * 1000 / calls
    direct = per_call_us(lambda: noop.handler({}, None), 2000) / 1000
    print(f"Executor overhead, no-op handler, {calls} calls, one at a time:")
    print(f"  handler called directly                        {direct:9.4f} ms/call")
    print(
        f"  through the executor (thread, timeout, store)  {statistics.median(durations):9.3f} "
        f"ms/call median, p95 {sorted(durations)[int(calls * 0.95) - 1]:.3f} ms"
    )
    print(f"  same key again (stored result returned)        {replay_ms:9.3f} ms/call")


def bench_parallel(n: int) -> None:
    from django.conf import settings

    from tools.services import execute_tool_calls

    print(f"{n} tools sleeping 200 ms in one step (serial would take {n * 200} ms):")
    for safe, limit in [(True, n), (True, 4), (False, n)]:
        settings.HARNESS_TOOL_PARALLELISM_PER_RUN = limit
        sleeper = tool("sleeper", "bench.handlers.sleep_200ms", safe=safe)
        run_id = uuid.uuid4().hex
        started = time.perf_counter()
        outcomes = execute_tool_calls([planned(sleeper, run_id, i) for i in range(n)])
        wall = (time.perf_counter() - started) * 1000
        assert all(o.ok for o in outcomes)
        label = f"concurrency-safe, at most {limit} per run" if safe else "not concurrency-safe"
        print(f"  {label:<46} {wall:9.0f} ms wall")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=8)
    options = parser.parse_args()
    setup_django()
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(f"Harness tool benchmarks (database: {engine}, python {sys.version.split()[0]})\n")
    bench_validation()
    print()
    bench_executor(options.calls)
    print()
    bench_parallel(options.parallel)


if __name__ == "__main__":
    main()
