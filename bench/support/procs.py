"""Real processes for the benchmarks: Celery workers and a gunicorn server, on this machine."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def _env() -> dict[str, str]:
    return os.environ | {"DJANGO_SETTINGS_MODULE": "harness.settings.base"}


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def celery_workers(count: int = 2, pool: str = "solo"):
    """``count`` Celery worker processes of the project's app, stopped on exit."""
    procs = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "harness", "worker"),
                *("--pool", pool, "--without-gossip", "--without-mingle"),
                *("-n", f"bench{i}-{os.getpid()}@%h", "--loglevel", "WARNING"),
            ],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(count)
    ]
    try:
        yield procs
    finally:
        _stop(procs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gunicorn(name: str, args: list[str], env: dict[str, str] | None = None):
    """A gunicorn of the project (``args``: its app and worker options) on a free loopback
    port, logging to ``var/bench-<name>.log``; yields the port and its pid once /healthz
    answers."""
    port = free_port()
    log_path = ROOT / "var" / f"bench-{name}.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "gunicorn", *args),
            *("--bind", f"127.0.0.1:{port}", "--timeout", "120", "--log-level", "warning"),
        ],
        cwd=ROOT,
        env=_env() | (env or {}),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                conn.close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"gunicorn ({name}) did not start; see {log_path}") from None
                time.sleep(0.2)
        yield port, proc.pid
    finally:
        _stop([proc])
        log.close()


def connections_per_worker(master_pid: int, port: int) -> list[int]:
    """How the established client connections to ``port`` are spread over the workers of the
    gunicorn ``master_pid``, busiest first (read from ``/proc``: Linux only, else ``[]``)."""
    established = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local address is hex "ip:port"; state 01 is ESTABLISHED.
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                established.add(fields[9])
    counts = []
    for worker in _children(master_pid):
        try:
            links = [os.readlink(fd) for fd in (Path("/proc") / str(worker) / "fd").iterdir()]
        except OSError:
            continue
        sockets = {link[8:-1] for link in links if link.startswith("socket:[")}
        counts.append(len(sockets & established))
    return sorted(counts, reverse=True)


def _children(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == str(pid):
                children.append(int(entry.name))
    return children
