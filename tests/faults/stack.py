"""The whole deployment on this machine, each part a process of its own that the fault tier can
stop, kill and start: a PostgreSQL cluster made with ``initdb`` in a temporary folder, a
redis-server without persistence, the shipped web command (gunicorn with uvicorn workers, as
``scripts/run-demo.sh`` and the Dockerfile start it), Celery workers and beat. Ports are free
ones; nothing touches the machine's shared servers."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from tests.support.outages import RedisServer
from tests.support.servers import free_port

ROOT = Path(settings.BASE_DIR)
VENV_BIN = Path(sys.executable).parent


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run its programs as the ``postgres`` user."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


class Postgres:
    """A PostgreSQL cluster of its own (``initdb``), on a private port."""

    def __init__(self, folder: Path) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found and shutil.which("initdb") is None:
            pytest.skip("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
        self.bin = Path(found[-1]).parent if found else Path(shutil.which("initdb")).parent
        self.folder = folder
        self.data = folder / "data"
        self.port = free_port()
        self.log = folder / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/harness"

    def _run(self, *command: str) -> None:
        subprocess.run(
            _as_postgres([str(self.bin / command[0]), *command[1:]]),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=120,
        )

    def init(self) -> Postgres:
        self.folder.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "harness")
        return self

    def start(self) -> None:
        # No fsync: the machine does not crash under the test; a restart still runs recovery.
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} "
            "-c fsync=off -c full_page_writes=off -c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-o", options, "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")


class Process:
    """A Harness process (web, worker, beat) in its own process group, killed and started at
    will, its output appended to a log."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.command = command
        self.env = env
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a kill reaches its children (workers, pool)
            )
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def text(self) -> str:
        return self.log.read_text(errors="replace")


class Stack:
    """PostgreSQL, Redis, the web server, Celery workers and beat, configured alike."""

    def __init__(self, settings_env: dict[str, str]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="harness-faults-"))
        self.folder.chmod(0o755)  # the postgres user reaches its folder inside
        self.postgres = Postgres(self.folder / "pg")
        self.redis = RedisServer(self.folder)
        self.web_port = free_port()
        self.settings_env = settings_env
        self.processes: dict[str, Process] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "DJANGO"))}
        keep.pop("DATABASE_URL", None)
        keep.pop("REDIS_URL", None)
        keep.pop("CELERY_BROKER_URL", None)
        return (
            keep
            | {
                "DJANGO_SETTINGS_MODULE": "harness.settings.base",
                "DATABASE_URL": self.postgres.url,
                "REDIS_URL": self.redis.url,
                "HARNESS_VAR_DIR": str(self.folder / "var"),
                "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
            }
            | self.settings_env
        )

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def up(self, workers: int = 2) -> None:
        (self.folder / "var").mkdir()
        self.postgres.init()
        self.redis.start()
        self.manage("migrate", "--no-input", "-v0")
        self.manage("load_demo")
        env = self.env()
        self.processes["web"] = Process(
            "web",
            [
                str(VENV_BIN / "gunicorn"),
                "harness.asgi:application",
                "-k",
                "uvicorn_worker.UvicornWorker",
                "--bind",
                f"127.0.0.1:{self.web_port}",
                "--workers",
                "2",
                "--timeout",
                "120",
            ],
            env | {"HARNESS_DB_CONN_MAX_AGE": "0"},
            self.folder / "web.log",
        )
        for n in range(workers):
            self.processes[f"worker-{n}"] = Process(
                f"worker-{n}",
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "harness",
                    "worker",
                    "--concurrency",
                    "2",
                    "--hostname",
                    f"worker-{n}@%h",
                    "--loglevel",
                    "INFO",
                ],
                env,
                self.folder / f"worker-{n}.log",
            )
        self.processes["beat"] = Process(
            "beat",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "harness",
                "beat",
                "--schedule",
                str(self.folder / "var" / "beat-schedule"),
                "--loglevel",
                "INFO",
            ],
            env,
            self.folder / "beat.log",
        )
        for process in self.processes.values():
            process.start()
        self.wait_web()
        for name, process in self.processes.items():
            if name.startswith("worker"):
                self.wait_worker(process)

    def wait_web(self, timeout_s: float = 120) -> float:
        """Seconds until the web server answers ``/healthz``."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return time.monotonic() - started
            time.sleep(0.2)
        raise RuntimeError(f"the web server did not come up:\n{self.processes['web'].text()}")

    def wait_worker(self, process: Process, before: int = 0, timeout_s: float = 180) -> float:
        """Seconds until ``process`` logs its ``before + 1``-th " ready." (a started worker)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if process.text().count(" ready.") > before:
                return time.monotonic() - started
            if process.process is None or process.process.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"{process.name} did not come up:\n{process.text()[-3000:]}")

    def down(self) -> None:
        for process in self.processes.values():
            process.kill(signal.SIGKILL)
        self.redis.kill()
        self.postgres.destroy()
        shutil.rmtree(self.folder, ignore_errors=True)
