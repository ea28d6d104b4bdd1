"""The threads the ASGI handler runs requests' sync work on, kept between requests.

A request takes the thread that went idle last (its database connection object and caches are
the warm ones), else a new thread while there are fewer than ``size``, else it waits for the
first to come free. A thread marks itself idle *before* it hands its result back, so a request
that follows another finds that thread free: the standard ``ThreadPoolExecutor`` marks it after,
and so starts new threads for requests made one after another, each with a connection object
of its own.
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

_Job = tuple[Future, Callable[..., Any], tuple, dict]


class RequestThreads(Executor):
    def __init__(self, size: int, name: str = "harness-request") -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.size = size
        self.name = name
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[_Job]] = []  # last idle last
        self._waiting: collections.deque[_Job] = collections.deque()
        self._started = 0

    @property
    def threads(self) -> int:
        with self._lock:
            return self._started

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        job: _Job = (Future(), fn, args, kwargs)
        with self._lock:
            if self._idle:
                self._idle.pop().put(job)
                return job[0]
            if self._started >= self.size:
                self._waiting.append(job)
                return job[0]
            self._started += 1
            number = self._started
        threading.Thread(
            target=self._serve, args=(job,), name=f"{self.name}-{number}", daemon=True
        ).start()
        return job[0]

    def _serve(self, job: _Job) -> None:
        inbox: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        while True:
            future, fn, args, kwargs = job
            ran, failed, value = future.set_running_or_notify_cancel(), False, None
            if ran:
                try:
                    value = fn(*args, **kwargs)
                except BaseException as error:  # handed to the caller, as an Executor does
                    failed, value = True, error
            with self._lock:
                following = self._waiting.popleft() if self._waiting else None
                if following is None:
                    self._idle.append(inbox)
            if ran:
                if failed:
                    future.set_exception(value)
                else:
                    future.set_result(value)
            job = following if following is not None else inbox.get()
