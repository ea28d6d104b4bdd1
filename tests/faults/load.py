"""A steady load of sync and async runs, sent the way a well-behaved client sends them: each run
has its own Idempotency-Key, and a request that fails (no connection, ``503``, ``429``, any
``5xx``) is sent again with the same key until the run is accepted. Every answer is counted;
a ``500`` is kept with its body."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

# How long a client keeps sending one request before it gives up on it (counted as unsent).
GIVE_UP_S = 240.0


@dataclass
class Accepted:
    key: str
    mode: str
    run_id: str
    first_sent: float  # time.time()
    accepted_at: float
    attempts: int


@dataclass
class Load:
    url: str
    api_key: str
    agent: str
    runs_per_s: float = 2.0
    accepted: list[Accepted] = field(default_factory=list)
    answers: Counter[str] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    unsent: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="client")
        self._thread = threading.Thread(target=self._generate, daemon=True, name="load")
        self._sent = 0

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop starting runs; wait until every request sent so far is accepted (or given up)."""
        self._stop.set()
        self._thread.join()
        self._pool.shutdown(wait=True)

    @property
    def pending(self) -> int:
        with self._lock:
            return self._sent - len(self.accepted) - len(self.unsent)

    def _generate(self) -> None:
        n = 0
        while not self._stop.is_set():
            mode = "sync" if n % 2 == 0 else "async"
            with self._lock:
                self._sent += 1
            self._pool.submit(self._send, mode)
            n += 1
            self._stop.wait(1 / self.runs_per_s)

    def _send(self, mode: str) -> None:
        key = uuid.uuid4().hex
        body = {"agent": self.agent, "user": "bob", "input": f"fault load {key}", "mode": mode}
        headers = {"Authorization": f"Bearer {self.api_key}", "Idempotency-Key": key}
        first = time.time()
        attempts = 0
        pause = 0.5
        with httpx.Client(timeout=60) as client:
            while time.time() - first < GIVE_UP_S:
                attempts += 1
                try:
                    response = client.post(f"{self.url}/api/v1/runs", json=body, headers=headers)
                except httpx.HTTPError as exc:
                    self._count(f"no answer ({type(exc).__name__})")
                else:
                    self._count(str(response.status_code))
                    if response.status_code in (200, 201, 202):
                        with self._lock:
                            self.accepted.append(
                                Accepted(
                                    key, mode, response.json()["id"], first, time.time(), attempts
                                )
                            )
                        return
                    if response.status_code >= 500 and response.status_code != 503:
                        with self._lock:
                            self.server_errors.append(
                                f"{response.status_code} {response.text[:300]}"
                            )
                    elif response.status_code not in (429, 503):
                        with self._lock:
                            self.unsent.append(f"{response.status_code} {response.text[:300]}")
                        return
                    pause = float(response.headers.get("Retry-After", pause))
                time.sleep(min(pause, 5.0))
                pause = min(pause * 2, 5.0)
        with self._lock:
            self.unsent.append(f"gave up after {attempts} attempts")

    def _count(self, answer: str) -> None:
        with self._lock:
            self.answers[answer] += 1
