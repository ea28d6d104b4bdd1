"""Keeping the leases of this process's drivers alive while they wait on a model or a tool.

A step renews its lease when it commits, but one model or tool call may last longer than
``HARNESS_RUN_LEASE_S`` (a tool may have ``timeout_s`` up to an hour). Without a heartbeat
another worker would take the run over while the first is still inside the call, and both
would act. One thread per process renews every registered lease a few times per lease period;
if the process dies, the renewals stop and the lease runs out as it should. A renewal that
finds the lease gone marks it lost, and the driver stops at its next write.

It also knows when each lease was last renewed (by a beat or by a step's commit, which
renews it too): while the database is unreachable nothing renews it, and a driver retrying
its step asks ``held_for`` how long the lease still holds before another driver may claim
the run.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import connection

from harness.engine import state

logger = logging.getLogger(__name__)

RENEWALS_PER_LEASE = 3


class Heartbeat:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leases: dict[state.Lease, threading.Event] = {}
        self._renewed: dict[state.Lease, float] = {}  # time.monotonic() of the last renewal
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def keep(self, lease: state.Lease) -> threading.Event:
        """Renew ``lease`` until ``release``; the returned event is set once it is lost."""
        lost = threading.Event()
        with self._lock:
            self._leases[lease] = lost
            self._renewed[lease] = time.monotonic()  # claimed just now
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._beat, name="lease-heartbeat", daemon=True
                )
                self._thread.start()
        return lost

    def release(self, lease: state.Lease) -> None:
        with self._lock:
            self._leases.pop(lease, None)
            self._renewed.pop(lease, None)

    def renewed(self, lease: state.Lease, at: float) -> None:
        """``lease`` was renewed at ``at`` (``time.monotonic()``: a step's commit renews it)."""
        with self._lock:
            if lease in self._leases:
                self._renewed[lease] = max(at, self._renewed.get(lease, at))

    def held_for(self, lease: state.Lease) -> float:
        """Seconds ``lease`` still holds for certain (from its last renewal this process
        saw); 0 for a lease not kept here."""
        with self._lock:
            renewed = self._renewed.get(lease)
        if renewed is None:
            return 0.0
        return max(0.0, renewed + settings.HARNESS_RUN_LEASE_S - time.monotonic())

    def _beat(self) -> None:
        try:
            while True:
                interval = max(0.5, settings.HARNESS_RUN_LEASE_S / RENEWALS_PER_LEASE)
                self._wake.wait(interval)
                self._wake.clear()
                with self._lock:
                    leases = list(self._leases.items())
                for lease, lost in leases:
                    self._renew(lease, lost)
                if not leases:
                    # Idle: hold no connection (it would pin the database for nothing).
                    connection.close()
        finally:
            connection.close()

    def _renew(self, lease: state.Lease, lost: threading.Event) -> None:
        try:
            started = time.monotonic()  # the new expiry counts from before the UPDATE
            if not state.renew(lease):
                lost.set()
                self.release(lease)
            else:
                self.renewed(lease, started)
        except Exception:
            # A database hiccup: try again at the next beat (the lease has slack for it).
            logger.warning("could not renew the lease of run %s", lease.run_id, exc_info=True)
            connection.close()


_heartbeat = Heartbeat()


def get_heartbeat() -> Heartbeat:
    return _heartbeat
