"""Retrying a step's commit while the database is unreachable (a restart, a dropped
connection): connection errors are transient, so the driver tries again, with back-off, for as
long as its lease surely holds — no other driver can claim the run meanwhile, and the fence
(the lease token in the step's first UPDATE) and the unique ``(run, sequence)`` of its rows
make a second attempt write the step at most once.

A COMMIT whose answer was lost (the connection dropped after the server committed) is not
written again: before each new attempt ``settle`` asks the run row whether the step is there
(``state.landed``). Only this lease can have written the run since it was claimed, so the row
tells: a step already committed by this driver is recognised, neither written twice nor taken
for a lost lease. Past the lease's margin the driver gives up (``harness.engine.driver``).
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, connection

from harness.dependencies import unavailable_dependency
from harness.engine import state
from harness.engine.heartbeat import get_heartbeat

logger = logging.getLogger(__name__)

# The first wait, doubled at each attempt up to the cap: a restarted PostgreSQL answers again
# within seconds, and a cap keeps the driver from sleeping long past its return.
FIRST_WAIT_S = 0.1
MAX_WAIT_S = 2.0
# Attempts at most, whatever the lease (a lease of hours must not mean retrying for hours).
MAX_ATTEMPTS = 60


def unreachable(exc: BaseException) -> str | None:
    """The dependency ``exc`` says is unreachable (``harness.dependencies``), or None. On
    SQLite, whose every failure is an ``OperationalError`` (a bad statement too), only a
    locked or unopenable file counts: nothing else there is a connection that comes back."""
    dependency = unavailable_dependency(exc)
    if dependency == "database" and connection.vendor == "sqlite":
        text = str(exc)
        if "database is locked" not in text and "unable to open database" not in text:
            return None
    return dependency


def transient(exc: BaseException) -> bool:
    """A connection error of the database, met outside any enclosing transaction (inside one,
    the caller's transaction is gone with the connection: only the caller can start over)."""
    return unreachable(exc) == "database" and not connection.in_atomic_block


def lease_margin_s() -> float:
    """How long before the lease would run out the driver stops retrying: room to release the
    lease, and for the clocks of the processes that compare expiries."""
    return max(0.5, settings.HARNESS_RUN_LEASE_S * 0.1)


class Backoff:
    """The waits of one commit's retries, bounded by attempts and by the lease."""

    def __init__(self, lease: state.Lease) -> None:
        self.lease = lease
        self.attempts = 0

    def wait(self) -> bool:
        """Sleep before the next attempt; False (without sleeping) when there is none: the
        attempts are used up, or the lease might run out before the wait and an attempt end."""
        self.attempts += 1
        if self.attempts >= MAX_ATTEMPTS:
            return False
        delay = min(MAX_WAIT_S, FIRST_WAIT_S * 2 ** (self.attempts - 1))
        delay *= random.uniform(0.5, 1.0)  # noqa: S311 (jitter: drivers do not retry in step)
        if get_heartbeat().held_for(self.lease) - delay < lease_margin_s():
            return False
        time.sleep(delay)
        return True


def settle(backoff: Backoff, stamp: datetime, transition: bool, error: BaseException) -> bool:
    """After a commit failed with a connection error: True if it was committed all the same
    (its answer was lost), False if it was not (write it again now). Waits, with back-off,
    until the database answers; raises ``error`` when it does not in time, and
    ``state.LeaseLost`` if another driver claimed the run meanwhile."""
    logger.warning(
        "run %s: the step's commit failed (%s); retrying while the lease holds",
        backoff.lease.run_id,
        error,
    )
    while True:
        drop_connection()
        try:
            return state.landed(backoff.lease, stamp, transition)
        except state.LeaseLost:
            raise
        except Exception as exc:
            if not transient(exc):
                raise
        if not backoff.wait():
            raise error


def drop_connection() -> None:
    """Close this thread's broken connection, so that the next query opens a new one (with
    the pool: hands it back, and the pool checks it before giving one out again)."""
    with contextlib.suppress(DatabaseError):
        connection.close()
