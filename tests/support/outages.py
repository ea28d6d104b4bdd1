"""Dependencies a test can take down for real: its own redis-server, and the database
connection pointed at a place where no database answers (never the machine's shared servers)."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections

from tests.support.servers import free_port


class RedisServer:
    """A private redis-server (no persistence) on a free port, stopped and started at will."""

    def __init__(self, folder: Path) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed")
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return self
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def pause(self) -> None:
        """SIGSTOP: connections are still accepted (by the kernel) but nothing is answered."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server of this test's own, killed at the end."""
    server = RedisServer(tmp_path).start()
    yield server
    if server.process is not None:
        server.resume()
    server.kill()


@contextlib.contextmanager
def database_unreachable(alias: str = "default") -> Iterator[None]:
    """Point ``alias`` where no database answers (a closed local port for PostgreSQL, a path
    that cannot be opened for SQLite) until the block ends; every query in between fails the
    way it does when the database is down."""
    connection = connections[alias]
    saved = dict(connection.settings_dict)
    _close(connection)
    if connection.vendor == "postgresql":
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))
        options = dict(connection.settings_dict.get("OPTIONS", {}))
        if isinstance(options.get("pool"), dict):
            # A pool made anew from these settings, which gives up after a second, not ten.
            options["pool"] = {**options["pool"], "min_size": 0, "timeout": 1}
        connection.settings_dict["OPTIONS"] = options
    else:
        connection.settings_dict["NAME"] = "/nonexistent-harness-dir/down.sqlite3"
    try:
        yield
    finally:
        _close(connection)
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def _close(connection) -> None:
    """Close the connection and, with the connection pool on (HARNESS_DB_POOL), the pool, whose
    connections would otherwise still reach the old address."""
    connection.close()
    close_pool = getattr(connection, "close_pool", None)
    if close_pool is not None:
        close_pool()
