"""The run engine's figures: round trips per step, per-step cost by run length, throughputs,
24 concurrent runs of one tenant, and goodput under a tenant's daily token budget.

The model is the scripted one and the tools pure Python (``bench/support/tools``), so what is
measured is the harness itself. Everything goes through public entry points:
``harness.runs.create_run`` / ``execute_run``, the HTTP API (Django's test client and a
real gunicorn), real Celery workers, and Django's database connection (statement counts).
Uses the database of the environment (``DATABASE_URL``, PostgreSQL recommended) in a database
of its own: ``<name>_bench`` is dropped and created (SQLite: a file under var/).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/loop.py

Options (environment), each with its default (``BENCH_QUICK=1``: smaller batches, for a short
run): ``BENCH_REPS`` (3) repetitions of each timing, whose median is printed; ``BENCH_RUNS``
(30) runs for the loop overhead; ``BENCH_STATEMENT_RUNS`` (5); ``BENCH_LENGTHS`` (``5,20,80``)
and ``BENCH_LENGTH_REPS`` (3); ``BENCH_API_RUNS`` (30, in-process client, per repetition);
``BENCH_HTTP_RUNS`` (300) / ``BENCH_HTTP_S`` (20) / ``BENCH_HTTP_CLIENTS`` (8): the shipped
ASGI server and the threaded WSGI one, in alternating rounds, at most so many runs or seconds
a round, concurrent clients; ``BENCH_ASYNC_RUNS`` (40, per
repetition); ``BENCH_CONCURRENT`` (24) runs of ``BENCH_CONCURRENT_STEPS`` (10) steps;
``BENCH_GOODPUT_RUNS`` (20) and ``BENCH_GOODPUT_TOKENS`` (6000); ``BENCH_SKIP``, a comma list
of ``statements,overhead,lengths,api,http,async,goodput,concurrent``.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.settings.base")

from bench.support.setup import open_limits, prepare  # noqa: E402
from bench.support.sql import StatementCounter, Tally, server_transactions  # noqa: E402

QUICK = os.environ.get("BENCH_QUICK", "") not in {"", "0"}


def _int(name: str, default: int, quick: int) -> int:
    return int(os.environ.get(name, quick if QUICK else default))


STEPS = 10
REPS = _int("BENCH_REPS", 3, 3)
RUNS = _int("BENCH_RUNS", 30, 5)
STATEMENT_RUNS = _int("BENCH_STATEMENT_RUNS", 5, 3)
LENGTHS = [int(n) for n in os.environ.get("BENCH_LENGTHS", "5,20,80").split(",")]
LENGTH_REPS = _int("BENCH_LENGTH_REPS", REPS, 1)
API_RUNS = _int("BENCH_API_RUNS", 30, 4)
HTTP_RUNS = _int("BENCH_HTTP_RUNS", 300, 60)
HTTP_S = _int("BENCH_HTTP_S", 20, 5)
HTTP_CLIENTS = _int("BENCH_HTTP_CLIENTS", 8, 8)
ASYNC_RUNS = _int("BENCH_ASYNC_RUNS", 40, 6)
CONCURRENT = _int("BENCH_CONCURRENT", 24, 24)
CONCURRENT_STEPS = _int("BENCH_CONCURRENT_STEPS", STEPS, 5)
GOODPUT_RUNS = _int("BENCH_GOODPUT_RUNS", 20, 20)
GOODPUT_TOKENS = _int("BENCH_GOODPUT_TOKENS", 6000, 6000)
GOODPUT_STEPS = 6
SKIP = {s.strip() for s in os.environ.get("BENCH_SKIP", "").split(",") if s.strip()}
TERMINAL = {
    *("succeeded", "failed", "cancelled", "budget_exceeded", "step_limit", "deadline_exceeded"),
}

# Issue #10's targets, printed next to the figures.
TARGET_STATEMENTS = 12
TARGET_TRANSACTIONS = 3
TARGET_QUARTER_RATIO = 1.2
TARGET_SYNC_RPS = 25
TARGET_ASYNC_RPS = 20

counter = StatementCounter()
verdicts: list[tuple[str, str, bool]] = []


def main() -> None:
    agents = {"bench": STEPS, "bench-2": 2, "bench-goodput": GOODPUT_STEPS}
    agents |= {f"bench-{n}": n for n in [*LENGTHS, CONCURRENT_STEPS]}
    prepare(agents)
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    broker = settings.CELERY_BROKER_URL.split(":")[0]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"database: {engine}, broker: {broker}, repetitions: {REPS}{' (quick)' if QUICK else ''}"
        f", load average {load} on {os.cpu_count()} CPUs"
    )
    counter.install()
    sections = [
        ("statements", statements_per_step),
        ("overhead", loop_overhead),
        ("lengths", run_lengths),
        ("api", sync_api_in_process),
        ("http", sync_api_gunicorn),
        ("async,goodput", async_and_goodput),
        ("concurrent", concurrent_runs),
    ]
    took = []
    for name, section in sections:
        if not set(name.split(",")) <= SKIP:
            started = time.perf_counter()
            section()
            took.append(f"{name} {time.perf_counter() - started:.0f} s")
    print(f"\n(time taken: {', '.join(took)})")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\ntargets (issue #10; load average now {load}):")
    for figure, target, met in verdicts:
        print(f"  {'met   ' if met else 'MISSED'}  {figure}  (target {target})")


def verdict(figure: str, target: str, met: bool) -> None:
    verdicts.append((figure, target, met))


# -- statements and transactions ------------------------------------------------------------


def _counted_run(agent: str, tenant) -> tuple[Tally, Tally, int]:
    from harness.runs import RunRequest, create_run, execute_run

    with counter.measure() as admission:
        run, _ = create_run(tenant, RunRequest(agent=agent, user_id="bob", input="go"))
    with counter.measure() as driving:
        finished = execute_run(run.id)
    assert finished.status == "succeeded", (finished.status, finished.answer)
    return admission, driving, finished.steps


def _server_delta(work) -> int | None:
    """Transactions PostgreSQL counted in this database while ``work`` ran (None elsewhere)."""
    before = server_transactions()
    work()
    if before is None:
        return None
    time.sleep(1.1)  # a backend publishes its statistics at most once a second
    return server_transactions() - before


def _median_tally(tallies: list[Tally]) -> dict[str, float]:
    """Median per figure over runs; per-kind counts as the mean (they sum to the total)."""
    return {
        "statements": statistics.median(t.statements for t in tallies),
        "pairs": statistics.median(t.pairs for t in tallies),
        "autocommit": statistics.median(t.autocommit for t in tallies),
        "transactions": statistics.median(t.transactions for t in tallies),
        "round_trips": statistics.median(t.round_trips for t in tallies),
        "connections": statistics.median(t.connections for t in tallies),
    }


def _kinds(tallies: list[Tally]) -> dict[str, float]:
    total: dict[str, float] = {}
    for tally in tallies:
        for label, n in tally.kinds.items():
            total[label] = total.get(label, 0) + n / len(tallies)
    return total


def statements_per_step() -> None:
    from harness.models import Tenant

    tenant = Tenant.objects.get(slug="acme")
    _counted_run("bench", tenant)  # warm caches (agents, tools, policy) as a server has them
    # PostgreSQL counts the transactions too: a check that none escaped Django's connection.
    idle = _server_delta(lambda: None)
    long: list = []

    def runs() -> None:
        long.extend(_counted_run("bench", tenant) for _ in range(STATEMENT_RUNS))

    seen = _server_delta(runs)
    short = [_counted_run("bench-2", tenant) for _ in range(STATEMENT_RUNS)]
    steps = long[0][2]
    admission = _median_tally([a for a, _, _ in long])
    drive10 = _median_tally([d for _, d, _ in long])
    drive2 = _median_tally([d for _, d, _ in short])
    tool_step = {k: (drive10[k] - drive2[k]) / (steps - 2) for k in drive10}
    final_step = {k: drive2[k] - tool_step[k] for k in drive2}
    whole = {k: (drive10[k] + admission[k]) / steps for k in drive10}

    def line(label: str, f: dict[str, float]) -> str:
        split = f"= {f['pairs']:4.1f} pairs + {f['autocommit']:4.1f} autocommit"
        return (
            f"  {label:<48}{f['statements']:>11.1f}{f['transactions']:>13.1f} {split:<34}"
            f"{f['round_trips']:>12.1f}{f['connections']:>12.1f}"
        )

    print(f"\nstatements and transactions ({steps}-step runs, median of {STATEMENT_RUNS}):")
    head = ("statements", "transactions", "= BEGIN/COMMIT pairs + autocommit", "round trips")
    print(f"  {'':<48}{head[0]:>11}{head[1]:>13} {head[2]:<34}{head[3]:>12}{'connections':>12}")
    print(line("per step, whole run (create_run + execute_run)", whole))
    print(line("per step, execute_run only", {k: v / steps for k, v in drive10.items()}))
    print(line("a tool step (10-step run minus 2-step run, /8)", tool_step))
    print(line("final step with run start and finish", final_step))
    print(line("create_run (admission), per run", admission))
    print(
        "  (round trips = statements + 2 x BEGIN/COMMIT pairs: BEGIN and COMMIT are one each,\n"
        "   except statements (and a BEGIN) queued in psycopg's pipeline mode, which count\n"
        "   as the syncs that carried them; connections: database connections opened)"
    )

    kinds10 = _kinds([d for _, d, _ in long])
    kinds2 = _kinds([d for _, d, _ in short])
    kinds_admission = _kinds([a for a, _, _ in long])
    labels = set(kinds10) | set(kinds_admission)
    per_step = {k: (kinds10.get(k, 0) + kinds_admission.get(k, 0)) / steps for k in labels}
    per_tool = {k: (kinds10.get(k, 0) - kinds2.get(k, 0)) / (steps - 2) for k in kinds10}
    print("  where the statements go, per step (whole run) / per tool step:")
    for label, n in sorted(per_step.items(), key=lambda kv: -kv[1])[:15]:
        print(f"    {n:5.1f} / {per_tool.get(label, 0):5.1f}  {label}")
    rest = sum(sorted(per_step.values(), reverse=True)[15:])
    if rest:
        print(f"    {rest:5.1f}          (other statements)")
    if seen is not None:
        counted = sum(a.transactions + d.transactions for a, d, _ in long)
        server = seen - idle
        # Autovacuum's analyze of the new rows counts too: allow less than one per run.
        if abs(server - counted) < len(long):
            note = "agrees" if server == counted else "agrees, but for autovacuum's"
        else:
            note = "DIFFERS: some work bypasses Django's connection, or other clients ran"
        print(
            f"  PostgreSQL's own count (pg_stat_database): {server / (steps * len(long)):.1f} "
            f"transactions per step, whole run ({server} in all; counted here {counted}: {note})"
        )
    worst = max(whole["statements"], tool_step["statements"])
    verdict(
        f"statements per step {whole['statements']:.1f} (tool step {tool_step['statements']:.1f})",
        f"≤ {TARGET_STATEMENTS}",
        worst <= TARGET_STATEMENTS,
    )
    worst = max(whole["transactions"], tool_step["transactions"])
    verdict(
        f"transactions per step {whole['transactions']:.1f} "
        f"(tool step {tool_step['transactions']:.1f})",
        f"≤ {TARGET_TRANSACTIONS}",
        worst <= TARGET_TRANSACTIONS,
    )


# -- per-step cost --------------------------------------------------------------------------


def _timed_run(agent: str) -> tuple[float, int, list[float]]:
    """Seconds of ``execute_run``, its steps, and the times of its tool calls."""
    from bench.support.handlers import TICKS
    from harness.models import Tenant
    from harness.runs import RunRequest, create_run, execute_run

    tenant = Tenant.objects.get(slug="acme")
    run, _ = create_run(tenant, RunRequest(agent=agent, user_id="bob", input="go"))
    TICKS.clear()
    started = time.perf_counter()
    finished = execute_run(run.id)
    elapsed = time.perf_counter() - started
    assert finished.status == "succeeded", (finished.status, finished.answer)
    return elapsed, finished.steps, list(TICKS)


def loop_overhead() -> None:
    samples = []
    for _ in range(RUNS):
        elapsed, steps, _ = _timed_run("bench")
        samples.append(elapsed / steps * 1e6)
    median = statistics.median(samples)
    print(
        f"\nloop overhead per step ({STEPS}-step runs, {RUNS} runs): "
        f"median {median:.0f} µs, p95 {_p95(samples):.0f} µs"
    )
    peer = _langgraph_per_step_us()
    if peer is None:
        print(
            "  (LangGraph + PostgresSaver for the target: needs PostgreSQL and bench/peers/.venv; "
            "make bench-peers compares both on one task)"
        )
        return
    print(
        f"  LangGraph create_react_agent + PostgresSaver right after, on its own 4-step task: "
        f"{peer:.0f} µs per step; Harness ÷ LangGraph: {median / peer:.1f}x"
    )
    verdict(
        f"loop overhead per step {median / 1e3:.1f} ms = {median / peer:.1f}x LangGraph's",
        "≤ 1x LangGraph + PostgresSaver's",
        median <= peer,
    )


def _langgraph_per_step_us() -> float | None:
    from django.db import connection

    from bench.peers.compare import PEER_PYTHON, langgraph
    from bench.support.setup import bench_database_url, create_database

    if connection.vendor != "postgresql" or not Path(PEER_PYTHON).exists():
        return None
    url = bench_database_url("peers_lg")
    create_database(url)
    return langgraph(url, runs=RUNS) * 1e3


def run_lengths() -> None:
    print(f"\nper-step cost by run length (execute_run ÷ steps, median of {LENGTH_REPS}):")
    for n in LENGTHS:
        per_step, ratios = [], []
        for _ in range(LENGTH_REPS):
            elapsed, steps, ticks = _timed_run(f"bench-{n}")
            per_step.append(elapsed / steps * 1e3)
            ratio = _quarter_ratio(ticks)
            if ratio:
                ratios.append(ratio)
        line = f"  {n:3d} steps: {statistics.median(per_step):7.2f} ms per step"
        if ratios:
            ratio = statistics.median(ratios)
            line += f"; last quarter's steps ÷ first quarter's: {ratio:.2f}x"
            if n == max(LENGTHS):
                verdict(
                    f"{n}-step run, last quarter ÷ first quarter {ratio:.2f}x",
                    f"≤ {TARGET_QUARTER_RATIO}x",
                    ratio <= TARGET_QUARTER_RATIO,
                )
        print(line)


def _quarter_ratio(ticks: list[float]) -> float | None:
    """Mean step time (between consecutive tool calls) of the last quarter ÷ the first's."""
    steps = [b - a for a, b in itertools.pairwise(ticks)]
    quarter = len(steps) // 4
    if quarter < 2:
        return None
    return statistics.fmean(steps[-quarter:]) / statistics.fmean(steps[:quarter])


# -- throughput -----------------------------------------------------------------------------


def _api_key(tenant: str) -> str:
    from harness.api_keys import create_api_key

    return create_api_key(tenant, "bench", replace=True).secret


def sync_api_in_process() -> None:
    from django.test import Client

    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {_api_key('acme')}", "HTTP_HOST": "localhost"}
    body = json.dumps({"agent": "bench", "user": "bob", "input": "go"})
    rates = []
    for _ in range(REPS):
        started = time.perf_counter()
        for _ in range(API_RUNS):
            response = client.post(
                "/api/v1/runs", data=body, content_type="application/json", **headers
            )
            assert response.status_code == 200, response.content
        rates.append(API_RUNS / (time.perf_counter() - started))
    print(
        f"\nsync runs through the API, Django test client in process, one at a time: "
        f"{statistics.median(rates):.1f} runs/s ({STEPS} steps each, {API_RUNS} runs x {REPS})"
    )


# The server the project ships (scripts/run-demo.sh, docker-compose.yml, the Dockerfile) and,
# beside it while both exist, the threaded WSGI server the engine was first measured on, with
# the persistent connections it had then (no pool).
SERVERS = {
    "shipped": (
        "ASGI, gunicorn + uvicorn workers x 2 (shipped)",
        ["harness.asgi:application", "-k", "uvicorn_worker.UvicornWorker", "--workers", "2"],
        {"HARNESS_DB_CONN_MAX_AGE": "0"},
    ),
    "wsgi": (
        "WSGI, gunicorn 2 workers x 4 threads, no pool",
        ["harness.wsgi:application", "--workers", "2", "--threads", "4", "-k", "gthread"],
        {"HARNESS_DB_POOL": "off", "HARNESS_DB_CONN_MAX_AGE": "60"},
    ),
}


def _server(name: str, args: list[str], env: dict[str, str]):
    """A gunicorn of the project on a free loopback port; yields the port and its pid."""
    from bench.support.procs import gunicorn

    return gunicorn(name, args, env)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` and its children alive."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if entry.name == str(pid) or fields[1] == str(pid):
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def sync_api_gunicorn() -> None:
    """Both servers up at once, measured in alternating rounds (the order swapped each round),
    so that a change in the machine's load falls on both alike."""
    key = _api_key("acme")
    body = json.dumps({"agent": "bench", "user": "bob", "input": "go"})
    results: dict[str, list] = {name: [] for name in SERVERS}
    with ExitStack() as stack:
        servers = {
            name: stack.enter_context(_server(name, args, env))
            for name, (_, args, env) in SERVERS.items()
        }
        for port, _ in servers.values():
            _http_burst(port, key, body, runs=HTTP_CLIENTS * 2, seconds=30)  # warm each worker
        for rep in range(REPS):
            order = list(SERVERS) if rep % 2 == 0 else list(reversed(SERVERS))
            for name in order:
                port, pid = servers[name]
                cpu = _cpu_s(pid)
                spread = _spread_later(pid, port)
                done, failed, elapsed, latencies = _http_burst(port, key, body, HTTP_RUNS, HTTP_S)
                cpu_ms = (_cpu_s(pid) - cpu) * 1e3 / max(done, 1)
                results[name].append((done, failed, elapsed, latencies, cpu_ms, spread.result()))
    print(
        f"sync runs through the API, real gunicorn, {HTTP_CLIENTS} clients on loopback "
        f"(≤ {HTTP_RUNS} runs or {HTTP_S} s a round, {REPS} rounds alternating):"
    )
    figures = {}
    for name, (label, _, _) in SERVERS.items():
        rounds = results[name]
        rate = statistics.median(r[0] / r[2] for r in rounds)
        p50 = statistics.median(statistics.median(r[3]) for r in rounds if r[3]) * 1e3
        cpu_ms = statistics.median(r[4] for r in rounds)
        failures = sum(r[1] for r in rounds)
        each = ", ".join(f"{r[0] / r[2]:.1f} {'/'.join(map(str, r[5])) or '?'}" for r in rounds)
        print(
            f"  {label:<48} {rate:5.1f} runs/s, p50 {p50:4.0f} ms, server CPU {cpu_ms:4.1f} ms "
            f"a run (rounds: {each} runs/s; {failures} failed)"
        )
        figures[name] = (rate, p50)
    print(
        "  (after each figure of a round, its clients' connections per worker, busiest first: "
        "a worker's Python runs on one core at a time, so an uneven spread caps a round)"
    )
    pairs = zip(results["shipped"], results["wsgi"], strict=True)
    ratios = [(s[0] / s[2]) / (w[0] / w[2]) for s, w in pairs]
    print(f"  shipped ÷ WSGI, round by round: {', '.join(f'{r:.2f}x' for r in ratios)}")
    (rate, p50), (wsgi_rate, wsgi_p50) = figures["shipped"], figures["wsgi"]
    verdict(
        f"sync API {rate:.1f} runs/s, p50 {p50:.0f} ms (shipped ASGI server)",
        f"≥ {TARGET_SYNC_RPS} runs/s",
        rate >= TARGET_SYNC_RPS,
    )
    verdict(
        f"shipped ÷ WSGI in the same sitting: {rate / wsgi_rate:.2f}x runs/s, p50 "
        f"{p50:.0f} vs {wsgi_p50:.0f} ms",
        "≥ 1x runs/s, p50 no worse",
        rate >= wsgi_rate and p50 <= wsgi_p50,
    )


def _spread_later(pid: int, port: int) -> Future:
    """The clients' connections per worker of server ``pid``, read 2 s into the round (once
    every client is connected; the connections are kept alive for the whole round)."""
    from bench.support.procs import connections_per_worker

    sampler = ThreadPoolExecutor(max_workers=1)
    spread = sampler.submit(lambda: (time.sleep(2), connections_per_worker(pid, port))[1])
    sampler.shutdown(wait=False)
    return spread


def _http_burst(port: int, key: str, body: str, runs: int, seconds: float):
    """Clients post sync runs until ``runs`` were started or ``seconds`` passed: runs done,
    failed, the seconds taken and each successful request's latency."""
    lock = threading.Lock()
    state = {"started": 0, "done": 0, "failed": 0, "errors": []}
    latencies: list[float] = []
    started = time.perf_counter()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if state["started"] >= runs or time.perf_counter() - started > seconds:
                    break
                state["started"] += 1
            sent = time.perf_counter()
            try:
                conn.request("POST", "/api/v1/runs", body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                ok = response.status == 200 and json.loads(payload)["status"] == "succeeded"
            except (OSError, http.client.HTTPException, ValueError) as error:
                ok, payload = False, repr(error).encode()
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            took = time.perf_counter() - sent
            with lock:
                state["done" if ok else "failed"] += 1
                if ok:
                    latencies.append(took)
                elif len(state["errors"]) < 3:
                    state["errors"].append(payload[:300])
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(HTTP_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    for error in state["errors"]:
        print(f"  a failed request: {error!r}")
    return state["done"], state["failed"], elapsed, latencies


def _wait_terminal(ids: list, timeout_s: float = 600) -> None:
    from harness.models import Run

    started = time.perf_counter()
    while Run.objects.filter(id__in=ids, status__in=TERMINAL).count() < len(ids):
        if time.perf_counter() - started > timeout_s:
            raise SystemExit(f"runs did not finish within {timeout_s:.0f} s")
        time.sleep(0.05)


def async_and_goodput() -> None:
    from bench.support.procs import celery_workers

    with celery_workers(2):
        if "async" not in SKIP:
            async_rate()
        if "goodput" not in SKIP:
            goodput()


def _submit_async(agent: str, count: int) -> list:
    from harness.models import RunMode, Tenant
    from harness.runs import RunRequest, create_run

    tenant = Tenant.objects.get(slug="acme")
    request = RunRequest(agent=agent, user_id="bob", input="go", mode=RunMode.ASYNC)
    return [create_run(tenant, request)[0].id for _ in range(count)]


def async_rate() -> None:
    from harness.models import Run

    _wait_terminal(_submit_async("bench", 4), timeout_s=120)  # both workers up and warm
    rates, failed = [], 0
    for _ in range(REPS):
        started = time.perf_counter()
        ids = _submit_async("bench", ASYNC_RUNS)
        _wait_terminal(ids)
        rates.append(ASYNC_RUNS / (time.perf_counter() - started))
        failed += Run.objects.filter(id__in=ids).exclude(status="succeeded").count()
    rate = statistics.median(rates)
    print(
        f"\nasync runs with two Celery workers: {rate:.1f} runs/s ({STEPS} steps each, "
        f"{ASYNC_RUNS} runs x {REPS}; {failed} did not succeed)"
    )
    verdict(
        f"async {rate:.1f} runs/s, {failed} not succeeded",
        f"≥ {TARGET_ASYNC_RPS} runs/s",
        rate >= TARGET_ASYNC_RPS and not failed,
    )


def goodput() -> None:
    """Async runs against a small daily token budget: how many finish with an answer, and how
    many tokens go to runs that never do? In the default configuration (no budget of their
    own: each holds its agent's expected spend from admission), with estimates switched off
    (``HARNESS_DEFAULT_RUN_RESERVE_TOKENS=0``: each model call reserved from the day), and
    asking for a per-run budget big enough for a whole run (reserved from the day at
    admission). Runs refused at admission are submitted again once the ones admitted have
    ended, until none is admitted any more. First, statements per step in a tenant with a
    daily budget, the run holding an estimate or reserving per call."""
    from django.conf import settings

    from harness.models import Tenant
    from harness.runs import RunRequest, create_run, execute_run

    # What one whole run of the agent spends, on another tenant with no budget: the ideal
    # goodput is the budget divided by it.
    acme = Tenant.objects.get(slug="acme")
    run, _ = create_run(acme, RunRequest(agent="bench-goodput", user_id="bob", input="go"))
    one_run = execute_run(run.id).total_tokens
    print(
        f"\ngoodput: {GOODPUT_RUNS} async runs of a {GOODPUT_STEPS}-step agent against a "
        f"{GOODPUT_TOKENS:,}-token daily budget (two workers); a whole run spends "
        f"{one_run:,} tokens: at most {GOODPUT_TOKENS // one_run} could finish"
    )
    default = settings.HARNESS_DEFAULT_RUN_RESERVE_TOKENS
    _budget_statements(default)
    _goodput_round(
        f"default configuration: no per-run budget, the agent's expected spend held at "
        f"admission (HARNESS_DEFAULT_RUN_RESERVE_TOKENS={default} until it has history)",
        None,
    )
    settings.HARNESS_DEFAULT_RUN_RESERVE_TOKENS = 0  # admission decides; workers follow
    try:
        _goodput_round("HARNESS_DEFAULT_RUN_RESERVE_TOKENS=0: each model call reserved", None)
    finally:
        settings.HARNESS_DEFAULT_RUN_RESERVE_TOKENS = default
    # A run's last model call must fit its reserve for the answer too.
    enough = one_run + settings.HARNESS_COMPLETION_RESERVE_TOKENS + 256
    _goodput_round(f"per-run budget {enough:,} (reserved at admission)", enough)


def _budget_statements(default: int) -> None:
    """Statements per step of a 10-step run in a tenant with a (large) daily token budget: the
    run holding an estimate from admission, then reserving each model call from the day."""
    from django.conf import settings

    from harness.models import Tenant
    from policy.models import BudgetLedger

    open_limits("globex", daily_tokens=100_000_000)
    tenant = Tenant.objects.get(slug="globex")
    print("  statements with a daily budget (10-step runs, median of 3):")
    try:
        for label, reserve in (("estimate held (default)", default), ("per call (=0)", 0)):
            settings.HARNESS_DEFAULT_RUN_RESERVE_TOKENS = reserve
            _counted_run("bench", tenant)  # warm
            counted = [_counted_run("bench", tenant) for _ in range(3)]
            steps = counted[0][2]
            admission = statistics.median(a.statements for a, _, _ in counted)
            per_step = statistics.median(d.statements for _, d, _ in counted) / steps
            print(f"    {label:<24} admission {admission:.0f}, per step {per_step:.1f}")
    finally:
        settings.HARNESS_DEFAULT_RUN_RESERVE_TOKENS = default
        BudgetLedger.objects.filter(key__startswith="tenant:globex:").delete()


def _goodput_round(label: str, run_budget: int | None) -> None:
    from django.test import Client

    from policy.models import BudgetLedger

    BudgetLedger.objects.filter(key__startswith="tenant:globex:").delete()  # a fresh day
    open_limits("globex", daily_tokens=GOODPUT_TOKENS)
    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {_api_key('globex')}", "HTTP_HOST": "localhost"}
    request = {"agent": "bench-goodput", "user": "charlie", "input": "go", "mode": "async"}
    if run_budget is not None:
        request["budget"] = {"max_tokens": run_budget}
    body = json.dumps(request)
    statuses: dict[str, int] = {}
    refusals: dict[str, int] = {}
    waves: list[int] = []
    tokens = wasted = submissions = 0
    left = GOODPUT_RUNS
    while left:
        ids = []
        for _ in range(left):
            submissions += 1
            response = client.post(
                "/api/v1/runs", data=body, content_type="application/json", **headers
            )
            if response.status_code == 202:
                ids.append(response.json()["id"])
            else:
                code = response.json().get("error", {}).get("code", "?")
                retry = response.get("Retry-After") or "none"
                retry = "to midnight" if retry.isdigit() and int(retry) > 60 else retry
                refusal = f"{response.status_code} {code}, Retry-After {retry}"
                refusals[refusal] = refusals.get(refusal, 0) + 1
        waves.append(len(ids))
        if not ids:
            break
        _wait_terminal(ids)
        for run_id in ids:
            run = client.get(f"/api/v1/runs/{run_id}", **headers).json()
            statuses[run["status"]] = statuses.get(run["status"], 0) + 1
            tokens += run["usage"]["total_tokens"]
            if run["status"] != "succeeded":
                wasted += run["usage"]["total_tokens"]
        left -= len(ids)
    succeeded = statuses.get("succeeded", 0)
    print(f"  {label}:")
    print(f"    finished: {', '.join(f'{n} {s}' for s, n in sorted(statuses.items())) or 'none'}")
    print(f"    never admitted: {left} (after {submissions} submissions in all)")
    print(f"    admitted per wave: {', '.join(map(str, waves))}")
    shown = "; ".join(f"{n} x {r}" for r, n in sorted(refusals.items())) or "none"
    print(f"    refused: {shown}")
    print(
        f"    tokens spent: {tokens:,} of {GOODPUT_TOKENS:,}, {wasted:,} on runs that ended "
        "without an answer"
    )
    print(f"    goodput: {succeeded} runs finished with an answer per {GOODPUT_TOKENS:,} tokens")


# -- concurrency ----------------------------------------------------------------------------


def concurrent_runs() -> None:
    """``CONCURRENT`` runs of one tenant driven at once, one thread (and connection) each."""
    from django.db import connections

    from harness.models import Run, Tenant
    from harness.runs import RunRequest, create_run, execute_run

    tenant = Tenant.objects.get(slug="acme")
    agent = f"bench-{CONCURRENT_STEPS}"
    barrier = threading.Barrier(CONCURRENT)
    statuses: list[str] = []
    errors: list[str] = []
    deadlocks_before = _deadlocks()

    def drive(n: int) -> None:
        try:
            barrier.wait()
            request = RunRequest(agent=agent, user_id="bob", input=f"go {n}")
            run, _ = create_run(tenant, request)
            finished = execute_run(run.id)
            statuses.append(finished.status)
            if finished.status != "succeeded":
                errors.append(f"{finished.status}: {Run.objects.get(id=run.id).answer[:200]}")
        except Exception as error:  # a deadlock surfaces here or as a failed run
            errors.append(repr(error)[:300])
        finally:
            connections.close_all()

    started = time.perf_counter()
    threads = [threading.Thread(target=drive, args=(n,)) for n in range(CONCURRENT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    time.sleep(1.5)  # let the server publish its statistics
    deadlocks = _deadlocks() - deadlocks_before if deadlocks_before is not None else None
    check = subprocess.run(
        [sys.executable, "manage.py", "verify_audit"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    chain_ok = check.returncode == 0
    succeeded = statuses.count("succeeded")
    print(
        f"\n{CONCURRENT} concurrent runs of one tenant ({CONCURRENT_STEPS} steps, one thread "
        f"each): {succeeded} succeeded, {len(errors)} failed, in {elapsed:.1f} s; "
        f"deadlocks reported by PostgreSQL: {'n/a' if deadlocks is None else deadlocks}; "
        f"verify_audit: {'ok' if chain_ok else 'FAILED'}"
    )
    for error in errors[:5]:
        print(f"  {error}")
    if not chain_ok:
        print("  " + (check.stdout + check.stderr).strip().replace("\n", "\n  ")[-1500:])
    chain = "verifies" if chain_ok else "BROKEN"
    verdict(
        f"{CONCURRENT} concurrent runs: {len(errors)} failed, deadlocks "
        f"{'n/a' if deadlocks is None else deadlocks}, chain {chain}",
        "no deadlock, no failure, chain verifies",
        not errors and not deadlocks and chain_ok,
    )


def _deadlocks() -> int | None:
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def _p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1] if len(samples) > 1 else samples[0]


if __name__ == "__main__":
    main()
