"""An effect that happened is never answered ``outcome_unknown`` because its outcome could not
be stored: the outcome is kept in memory, given to a later execution of its key in this
process, and written under its key once the database takes it.

The failure is real: another connection holds a lock the store needs (PostgreSQL: the
execution's row, ``SELECT … FOR UPDATE``; SQLite: the database's write lock) and the storing
connection's lock timeout runs out, so the database refuses the write with an
OperationalError, as it does for a restart or a failover."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from tests.runs import wait_until
from tests.tools import handlers
from tests.tools.test_idempotency import context, registered
from tools.executor import forget_kept_outcomes
from tools.models import ExecutionStatus, ToolExecution
from tools.services import execute_tool

pytestmark = pytest.mark.usefixtures("transactional_db")


class ExecutionLocker(threading.Thread):
    """Once the execution's row exists, hold a lock its store needs (on a connection of its
    own), let the handler finish, and keep the lock until ``unlock``."""

    def __init__(self, key: str) -> None:
        super().__init__(daemon=True)
        self.key = key
        self.locked = threading.Event()
        self.unlock = threading.Event()

    def run(self) -> None:
        try:
            wait_until(lambda: ToolExecution.objects.filter(idempotency_key=self.key).exists())
            with connection.cursor() as cursor:
                if connection.vendor == "postgresql":
                    cursor.execute("BEGIN")
                    table = ToolExecution._meta.db_table
                    cursor.execute(
                        f"SELECT id FROM {table} WHERE idempotency_key = %s FOR UPDATE",  # noqa: S608
                        [self.key],
                    )
                else:
                    cursor.execute("BEGIN IMMEDIATE")
                self.locked.set()
                handlers.release.set()  # the effect happens now; its store will meet the lock
                self.unlock.wait(30)
                cursor.execute("ROLLBACK")
        finally:
            connections.close_all()


def short_lock_timeout() -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET lock_timeout = '300ms'")
        else:
            cursor.execute("PRAGMA busy_timeout = 300")


def test_an_outcome_the_database_refused_is_kept_then_written_never_unknown(tool_dir):
    tool = registered(tool_dir, "hang", idempotent=False, concurrency_safe=False, timeout_s=20)
    call = context()
    locker = ExecutionLocker(call.idempotency_key)
    locker.start()
    short_lock_timeout()

    try:
        first = execute_tool(tool, {}, call)  # the store times out on the lock: refused
        assert locker.locked.is_set()
        assert (first.ok, first.result) == (True, {"released": True})
        assert ToolExecution.objects.get(idempotency_key=call.idempotency_key).status == "started"

        again = execute_tool(tool, {}, call)  # the database still refuses: memory answers
        assert (again.result, again.replayed) == ({"released": True}, True)
    finally:
        locker.unlock.set()
    locker.join(10)
    wait_until(
        lambda: (
            ToolExecution.objects.get(idempotency_key=call.idempotency_key).status
            == ExecutionStatus.SUCCEEDED
        ),
        timeout_s=10,
    )
    forget_kept_outcomes()  # as another process would: only the database knows now
    elsewhere = execute_tool(tool, {}, call)
    assert (elsewhere.error, elsewhere.result, elsewhere.replayed) == (
        None,
        {"released": True},
        True,
    )
    assert handlers.calls["hang"] == 1  # one effect, reported as done every time
