"""A real Celery worker process for integration tests, on the test database and broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

# A DATABASE_URL for the database the tests are using (the test database): the same
# function that hands the demo's MCP server its database.
from harness.demo import database_url

READY_TIMEOUT_S = 60


class WorkerProcess:
    def __init__(
        self,
        log_path: Path,
        pool: str = "solo",
        beat: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.log_path = log_path
        self.pool = pool
        self.beat = beat
        self.extra_env = env or {}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        env = (
            os.environ
            | {"DJANGO_SETTINGS_MODULE": "harness.settings.test", "DATABASE_URL": database_url()}
            | self.extra_env
        )
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "harness",
            "worker",
            "-Q",
            settings.CELERY_TASK_DEFAULT_QUEUE,
            "--pool",
            self.pool,
            "--concurrency",
            "1",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ]
        if self.beat:
            schedule = self.log_path.with_suffix(".beat-schedule")
            command += ["--beat", "--schedule", str(schedule)]
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a kill reaches pool children too
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if b" ready." in self.log_path.read_bytes():
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"worker did not start:\n{self.log_path.read_text(errors='replace')}")

    def kill_hard(self) -> None:
        """SIGKILL the worker and its children at once, as a crashed machine would."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
