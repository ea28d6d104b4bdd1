"""Harness's own web servers, started by a test on the test database: gunicorn with uvicorn
workers (the command of the Dockerfile and ``scripts/run-demo.sh``) or with its sync workers
(WSGI)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from tests.worker import database_url


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


# The commands of the Dockerfile / scripts/run-demo.sh (ASGI) and of a WSGI deployment.
COMMANDS = {
    "asgi": ["harness.asgi:application", "-k", "uvicorn_worker.UvicornWorker"],
    "wsgi": ["harness.wsgi:application"],
}


def serve(
    django_db_blocker, tmp_path_factory, env: Mapping[str, str] | None = None
) -> Iterator[Callable[[str], Server]]:
    """Yields ``start(kind)``, which starts a server of that kind once (``"asgi"`` or
    ``"wsgi"``) on the test database (tests that write to it use ``transactional_db`` or
    ``demo``), with ``env`` over the environment; stops them all when closed. The body of a
    module-scoped fixture (``yield from serve(...)``), or of a test's own fixture::

        with closing(serve(django_db_blocker, tmp_path_factory, env={...})) as servers:
            yield next(servers)("asgi").url
    """
    processes: list[subprocess.Popen] = []
    started: dict[str, Server] = {}
    tmp_path = tmp_path_factory.mktemp("servers")
    extra = dict(env or {})

    def start(kind: str) -> Server:
        if kind in started:
            return started[kind]
        port = free_port()
        log_path = tmp_path / f"{kind}.log"
        with django_db_blocker.unblock():
            url = database_url()
        env = (
            os.environ
            | {
                "DJANGO_SETTINGS_MODULE": "harness.settings.test",
                "DATABASE_URL": url,
                "HARNESS_DB_CONN_MAX_AGE": "0",
                "HARNESS_LOG_LEVEL": "INFO",
            }
            | extra
        )
        command = [
            sys.executable, "-m", "gunicorn", *COMMANDS[kind], "--workers", "1",
            "--bind", f"127.0.0.1:{port}", "--timeout", "120",
        ]  # fmt: skip
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command, cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        processes.append(process)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    # Warm: the first request of each kind imports what it needs.
                    httpx.post(f"http://127.0.0.1:{port}/api/v1/runs", json={}, timeout=30)
                    httpx.get(f"http://127.0.0.1:{port}/admin/login/", timeout=30)
                    started[kind] = Server(port, log_path)
                    return started[kind]
            except httpx.HTTPError:
                time.sleep(0.2)
        pytest.fail(log_path.read_text(errors="replace"))

    try:
        yield start
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
