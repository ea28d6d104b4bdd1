"""Count the database round trips of a piece of work, exactly, from Django's connection.

Every statement run through a Django connection (any thread: the wrapper is installed on each
connection as it is created) is counted and classified by kind and table. Transactions are
counted as PostgreSQL sees them: a statement in autocommit is one transaction of its own; a
statement run when the connection is idle inside ``atomic`` opens one (the driver sends
``BEGIN`` first, ``COMMIT`` or ``ROLLBACK`` at the end: one BEGIN/COMMIT pair).

Round trips: a statement is one, and so are BEGIN and COMMIT — except in psycopg's pipeline
mode, where statements (and the BEGIN sent before the first of a transaction) are queued and
travel together: there each sync with the server (a fetch, the end of the block) is one.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

_TABLE = re.compile(
    r'^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?(\w+)"?|\bFROM\s+"?(\w+)"?', re.IGNORECASE
)


@dataclass
class Tally:
    statements: int = 0
    pairs: int = 0  # BEGIN/COMMIT pairs: transactions opened inside ``atomic``
    autocommit: int = 0  # statements that were transactions of their own
    connections: int = 0  # database connections opened
    pipelined: int = 0  # statements queued in pipeline mode (not a round trip each)
    queued_begins: int = 0  # BEGINs that travelled with a pipelined statement
    syncs: int = 0  # pipeline syncs: one round trip each
    kinds: Counter = field(default_factory=Counter)

    @property
    def transactions(self) -> int:
        return self.pairs + self.autocommit

    @property
    def round_trips(self) -> int:
        """Statements, plus a BEGIN and a COMMIT for each transaction opened inside ``atomic``
        (psycopg sends each as a round trip of its own); pipelined statements and BEGINs
        count through the syncs that carried them."""
        return self.statements - self.pipelined + 2 * self.pairs - self.queued_begins + self.syncs

    def add(self, other: Tally) -> None:
        self.statements += other.statements
        self.pairs += other.pairs
        self.autocommit += other.autocommit
        self.connections += other.connections
        self.pipelined += other.pipelined
        self.queued_begins += other.queued_begins
        self.syncs += other.syncs
        self.kinds.update(other.kinds)


def classify(sql: str) -> str:
    """``INSERT traces_span``, ``SELECT … FOR UPDATE policy_budgetledger``, ``SAVEPOINT`` …"""
    words = sql.lstrip().split(None, 1)
    kind = words[0].upper() if words else "?"
    if kind in {"SAVEPOINT", "RELEASE", "ROLLBACK", "BEGIN", "COMMIT"}:
        return "SAVEPOINT" if kind in {"SAVEPOINT", "RELEASE"} else kind
    match = _TABLE.search(sql)
    table = (match.group(1) or match.group(2)) if match else "(no table)"
    if kind == "SELECT" and re.search(r"\bFOR\s+(NO\s+KEY\s+)?UPDATE\b", sql, re.IGNORECASE):
        kind = "SELECT FOR UPDATE"
    return f"{kind} {table}"


class StatementCounter:
    """``with counter.measure() as tally: …`` counts what runs inside, in every thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tally: Tally | None = None
        self._installed = False

    def install(self) -> None:
        from django.db import connections
        from django.db.backends.signals import connection_created

        if self._installed:
            return
        self._installed = True
        self._count_pipeline_syncs()
        connection_created.connect(self._on_connection, weak=False)
        for conn in connections.all(initialized_only=True):
            self._on_connection(connection=conn)

    def _on_connection(self, connection: Any, **kwargs: Any) -> None:
        tally = self._tally
        if tally is not None and kwargs.get("signal") is not None:
            with self._lock:
                tally.connections += 1
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)

    @contextmanager
    def measure(self):
        from django.db import connections

        self.install()
        for conn in connections.all():  # this thread's, even if not connected yet
            self._on_connection(connection=conn)
        tally = Tally()
        self._tally = tally
        try:
            yield tally
        finally:
            self._tally = None

    def __call__(self, execute, sql, params, many, context):
        tally = self._tally
        if tally is not None:
            self._count(tally, context["connection"], sql)
        return execute(sql, params, many, context)

    def _count_pipeline_syncs(self) -> None:
        """psycopg queues a Sync message for each round trip a pipeline makes: count those."""
        from psycopg._pipeline_base import BasePipeline

        enqueue_sync = BasePipeline._enqueue_sync
        counter = self

        def counted(pipeline: Any) -> None:
            tally = counter._tally
            if tally is not None:
                with counter._lock:
                    tally.syncs += 1
            enqueue_sync(pipeline)

        BasePipeline._enqueue_sync = counted  # type: ignore[method-assign]

    def _count(self, tally: Tally, conn: Any, sql: str) -> None:
        label = classify(sql)
        with self._lock:
            if label == "BEGIN":  # SQLite: Django opens transactions with a statement
                tally.pairs += 1
                return
            tally.statements += 1
            tally.kinds[label] += 1
            pipelined = _pipelined(conn)
            tally.pipelined += pipelined
            if conn.get_autocommit() and not conn.in_atomic_block:
                tally.autocommit += 1
            elif conn.vendor == "postgresql" and _idle(conn):
                tally.pairs += 1
                tally.queued_begins += pipelined


def _pipelined(conn: Any) -> bool:
    raw = conn.connection if conn.vendor == "postgresql" else None
    return raw is not None and getattr(raw, "_pipeline", None) is not None


def _idle(conn: Any) -> bool:
    """True when the next statement makes psycopg open a transaction (send BEGIN)."""
    from psycopg.pq import TransactionStatus

    raw = conn.connection
    return raw is not None and raw.info.transaction_status == TransactionStatus.IDLE


def server_transactions() -> int | None:
    """PostgreSQL's own count of this database's transactions so far (``pg_stat_database``),
    or None on another database. Flushes this backend's statistics first; the two statements
    it runs are themselves transactions, so compare against an empty interval."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database "
            "WHERE datname = current_database()"
        )
        return cursor.fetchone()[0]
