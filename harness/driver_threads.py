"""Threads that drive sync runs in the web process, kept between runs.

A sync request hands its run to a thread so that it can stop waiting at the sync deadline
while the run goes on. A new thread per run would also mean a new database connection per
run: a server process forked, and the statements PostgreSQL had prepared on the last one lost
(a step's writes are the same few statements, run thousands of times). So a thread that
finishes a run waits for the next one and keeps its connection for as long as ``CONN_MAX_AGE``
allows (Django's ``close_old_connections`` after every run: with ``0`` it is closed each
time, as is a broken one or one left in a transaction). A thread idle for ``idle_s`` closes its
connections and ends. There are as many threads as runs driven at once: a run never waits.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections, connections

logger = logging.getLogger(__name__)

# How long a thread waits for another run before it closes its connection and ends.
IDLE_S = 60.0

_STOP = object()


class DriverThreads:
    """Runs each submitted job at once: in an idle thread if there is one, else in a new one."""

    def __init__(self, idle_s: float = IDLE_S, name: str = "run-driver") -> None:
        self.idle_s = idle_s
        self.name = name
        self._jobs: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._changed = threading.Condition()
        self._idle = 0  # threads waiting for a job that no job or stop was put for yet
        self._busy = 0  # jobs submitted and not finished
        self._threads: set[threading.Thread] = set()
        self._started = 0

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` now, in a thread (an exception it raises is logged)."""
        with self._changed:
            self._busy += 1
            if self._idle:
                self._idle -= 1
                self._jobs.put(job)
                return
            self._started += 1
            thread = threading.Thread(
                target=self._serve, args=(job,), name=f"{self.name}-{self._started}", daemon=True
            )
            self._threads.add(thread)
        thread.start()

    @property
    def busy(self) -> int:
        return self._busy

    @property
    def threads(self) -> int:
        with self._changed:
            return len(self._threads)

    def drain(self, timeout_s: float) -> bool:
        """Wait until no job is running, then end every thread (their connections closed):
        before a test's data is flushed, at shutdown. False if jobs still ran at the end."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for _ in range(self._idle):
                    self._jobs.put(_STOP)
                self._idle = 0
                if not self._threads:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return self._busy == 0
                self._changed.wait(remaining)

    def _serve(self, job: object) -> None:
        try:
            while job is not _STOP:
                try:
                    job()  # type: ignore[operator]
                except Exception:
                    logger.exception("a run driven inline failed")
                finally:
                    # A healthy connection within CONN_MAX_AGE is kept for the next run.
                    close_old_connections()
                with self._changed:
                    self._busy -= 1
                    self._idle += 1
                    self._changed.notify_all()
                job = self._next()
        finally:
            connections.close_all()
            with self._changed:
                self._threads.discard(threading.current_thread())
                self._changed.notify_all()

    def _next(self) -> object:
        while True:
            try:
                return self._jobs.get(timeout=self.idle_s)
            except queue.Empty:
                with self._changed:
                    # A job (or stop) put as the wait ended is this thread's to take.
                    if not self._jobs.empty():
                        continue
                    self._idle -= 1
                    return _STOP
