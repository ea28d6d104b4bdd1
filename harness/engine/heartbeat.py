"""Keeping the leases of this process's drivers alive while they wait on a model or a tool.

A step renews its lease when it commits, but one model or tool call may last longer than
``HARNESS_RUN_LEASE_S`` (a tool may have ``timeout_s`` up to an hour). Without a heartbeat
another worker would take the run over while the first is still inside the call, and both
would act. One thread per process renews every registered lease a few times per lease period;
if the process dies, the renewals stop and the lease runs out as it should. A renewal that
finds the lease gone marks it lost, and the driver stops at its next write.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import connection

from harness.engine import state

logger = logging.getLogger(__name__)

RENEWALS_PER_LEASE = 3


class Heartbeat:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leases: dict[state.Lease, threading.Event] = {}
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def keep(self, lease: state.Lease) -> threading.Event:
        """Renew ``lease`` until ``release``; the returned event is set once it is lost."""
        lost = threading.Event()
        with self._lock:
            self._leases[lease] = lost
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._beat, name="lease-heartbeat", daemon=True
                )
                self._thread.start()
        return lost

    def release(self, lease: state.Lease) -> None:
        with self._lock:
            self._leases.pop(lease, None)

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
            if not state.renew(lease):
                lost.set()
                self.release(lease)
        except Exception:
            # A database hiccup: try again at the next beat (the lease has slack for it).
            logger.warning("could not renew the lease of run %s", lease.run_id, exc_info=True)
            connection.close()


_heartbeat = Heartbeat()


def get_heartbeat() -> Heartbeat:
    return _heartbeat
