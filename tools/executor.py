"""Running tool handlers: timeouts, idempotency, retries and parallelism, every failure as data.

A handler is ``handler(arguments: dict, context: ToolContext) -> JSON-able value``. It runs in
a bounded thread pool so that a hung handler cannot hang the run: past its timeout the caller
gets a ``timeout`` error (the thread is abandoned; the pool bounds how many can pile up, and a
late result is still stored under the call's idempotency key).

Idempotency: each call has a key (run id + call id), handed to the handler and used as the key
of a ``ToolExecution`` row, written before the handler runs and updated with its outcome (on
the caller's database connection; a worker writes only the late result of a call the caller
gave up on). A call executed again with the same key returns the stored result without
running the handler. If an earlier execution never recorded its end (the process died
between the handler's effect and the store write), an idempotent tool runs again with the same
key — its handler deduplicates by the key, which is what declaring ``idempotent`` promises —
while a non-idempotent one gets ``outcome_unknown`` and is not run a second time. A caller
that knows none of its keys ran before (a run's first drive: ``first_execution``) spares an
idempotent call the row written before it runs: its row is written once, with its outcome —
were the process to die in between, running it again is what ``idempotent`` allows.

An outcome that cannot be stored (the database is down, or the step that was to write it
never commits) is kept in this process's memory, not lost: a later execution of its key in
this process gets it (and the engine writes it with the step that records it), and a
background thread writes it under its key once the database takes it, so that whichever
process drives the run next reads the effect as done, never as ``outcome_unknown``.

Retries: a ``TransientToolError`` is retried with backoff within the timeout, only for
idempotent tools; non-idempotent tools are never retried automatically.

Parallelism (``execute_tool_calls``): consecutive concurrency-safe calls of a step run together,
at most ``HARNESS_TOOL_PARALLELISM_PER_RUN`` at a time; a call that is not concurrency-safe
runs alone, after the calls before it and before the calls after it. Outcomes come back in the
order of the calls, whatever order they finish in.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, connections, transaction
from django.db.models import F
from django.utils import timezone

from tools.context import ToolContext
from tools.errors import ToolCallError, ToolErrorCode, ToolHandlerError
from tools.models import ExecutionStatus, ToolExecution
from tools.registry import ToolDefinition
from traces.services import insert_rows, new_row, seal, unseal
from traces.untrusted import clean

RETRY_BACKOFF_S = 0.2

logger = logging.getLogger(__name__)

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


@dataclass(frozen=True)
class PlannedCall:
    """A call that passed every check and may be executed."""

    tool: ToolDefinition
    arguments: dict[str, Any]
    context: ToolContext


@dataclass
class ToolOutcome:
    result: Any = None
    error: ToolCallError | None = None
    duration_ms: float = 0.0
    traceback: str = ""
    attempts: int = 0
    # True when the result (or error) came from the idempotency store, not from the handler.
    replayed: bool = False
    # What was replaced in the handler's answer (NUL, lone surrogates, non-finite numbers:
    # ``traces.untrusted``) before anything stored, masked or showed it.
    normalised: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


def execute_tool(
    tool: ToolDefinition, arguments: dict[str, Any], context: ToolContext
) -> ToolOutcome:
    """Run one call within its timeout. Never raises for a handler's failure."""
    return execute_tool_calls([PlannedCall(tool, arguments, context)])[0]


def execute_tool_calls(
    calls: Sequence[PlannedCall],
    on_start: Callable[[int], None] | None = None,
    on_finish: Callable[[int, ToolOutcome], None] | None = None,
    store: Callable[[PlannedCall, int, ToolOutcome], None] | None = None,
    first_execution: bool = False,
) -> list[ToolOutcome]:
    """Execute a step's calls; return their outcomes in the order of ``calls``.

    ``on_start(i)`` and ``on_finish(i, outcome)`` are called in the caller's thread as call
    ``i`` is handed to a worker and as its outcome is known (for spans and audit records).
    Side effects: whatever the handlers do, and one ``ToolExecution`` row per call. Each
    outcome is stored under its key at once, or handed to ``store(call, record_id, outcome)``
    — the run engine writes it with the step that records the result (``store_outcome``): until
    then the execution reads as started, which is what it is if that step never commits.
    ``first_execution``: no call's key was executed before, so an idempotent call is not
    recorded as started (``record_id`` 0: its row is written with the outcome).
    """
    outcomes: list[ToolOutcome | None] = [None] * len(calls)
    limit = settings.HARNESS_TOOL_PARALLELISM_PER_RUN
    for group in _groups(calls):
        _run_group(
            calls,
            group,
            limit,
            outcomes,
            on_start,
            on_finish,
            store or store_outcome,
            first_execution,
        )
    return [outcome for outcome in outcomes if outcome is not None]


def _groups(calls: Sequence[PlannedCall]) -> list[list[int]]:
    """Runs of consecutive concurrency-safe calls; every other call is a group of its own."""
    groups: list[list[int]] = []
    for index, call in enumerate(calls):
        if call.tool.concurrency_safe and groups and calls[groups[-1][0]].tool.concurrency_safe:
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


@dataclass
class _Running:
    """A call handed to a worker. The lock settles who records its end: the caller, or (once
    the caller gave up at the timeout) the worker itself when it finishes late."""

    index: int
    record_id: int
    started: float
    deadline: float
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    finished: bool = False
    abandoned: bool = False

    def finish(self) -> bool:
        """Worker side: True if the caller will take (and store) the outcome."""
        with self.lock:
            self.finished = not self.abandoned
            return self.finished

    def abandon(self) -> bool:
        """Caller side: True if the call is given up (it had not finished)."""
        with self.lock:
            self.abandoned = not self.finished
            return self.abandoned


def _run_group(
    calls: Sequence[PlannedCall],
    group: list[int],
    limit: int,
    outcomes: list[ToolOutcome | None],
    on_start: Callable[[int], None] | None,
    on_finish: Callable[[int, ToolOutcome], None] | None,
    store: Callable[[PlannedCall, int, ToolOutcome], None],
    first_execution: bool,
) -> None:
    def settle(index: int, outcome: ToolOutcome) -> None:
        outcomes[index] = outcome
        if on_finish:
            on_finish(index, outcome)

    pending = deque(group)
    running: dict[Future[ToolOutcome], _Running] = {}
    while pending or running:
        while pending and len(running) < limit:
            index = pending.popleft()
            if on_start:
                on_start(index)
            started = time.monotonic()
            kept = _kept.get(calls[index].context.idempotency_key)
            if kept is not None:  # it ran here before and is not stored yet: not run again
                outcome = dataclasses.replace(kept.outcome, replayed=True)
                _store_or_keep(calls[index], kept.record_id, kept.outcome, store)
                outcome.duration_ms = _elapsed_ms(started)
                settle(index, outcome)
                continue
            try:
                if first_execution and calls[index].tool.idempotent:
                    record_id, stored = 0, None  # recorded with its outcome only
                else:
                    record_id, stored = _claim(calls[index])
            except DatabaseError as exc:  # not recorded, so not run: still data, not a raise
                record_id, stored = 0, _failure(calls[index].tool, exc, attempts=0)
            if stored is not None:
                stored.duration_ms = _elapsed_ms(started)
                settle(index, stored)
                continue
            state = _Running(index, record_id, started, started + calls[index].tool.timeout_s)
            running[_executor().submit(_run_in_worker, calls[index], state)] = state
        if not running:
            continue
        nearest = min(state.deadline for state in running.values())
        wait(running, timeout=max(0.0, nearest - time.monotonic()), return_when=FIRST_COMPLETED)
        now = time.monotonic()
        for future, state in list(running.items()):
            if not future.done() and now < state.deadline:
                continue
            del running[future]
            if future.done() or not state.abandon():
                outcome = _collect(future, calls[state.index], state, store)
            else:
                never_started = future.cancel()
                if never_started and state.record_id:  # nothing ran: a later one may run it
                    ToolExecution.objects.filter(pk=state.record_id).delete()
                outcome = _timed_out(calls[state.index].tool, state.started, never_started)
            outcome.duration_ms = _elapsed_ms(state.started)
            settle(state.index, outcome)


def _timed_out(tool: ToolDefinition, started: float, never_started: bool) -> ToolOutcome:
    if never_started:
        message = (
            f"{tool.name} could not start within {tool.timeout_s:g} s: "
            "every tool worker of this process is busy."
        )
    else:
        message = f"{tool.name} did not finish within {tool.timeout_s:g} s and was abandoned."
    return ToolOutcome(
        error=ToolCallError(ToolErrorCode.TIMEOUT, message, {"timeout_s": tool.timeout_s}),
        duration_ms=_elapsed_ms(started),
    )


def _collect(
    future: Future[ToolOutcome],
    call: PlannedCall,
    state: _Running,
    store: Callable[[PlannedCall, int, ToolOutcome], None],
) -> ToolOutcome:
    """The worker's outcome, stored under the call's key. Never raises."""
    try:
        outcome = future.result()
    except Exception as exc:
        return _failure(call.tool, exc, attempts=0)
    outcome.duration_ms = _elapsed_ms(state.started)
    _store_or_keep(call, state.record_id, outcome, store)
    return outcome


def _store_or_keep(
    call: PlannedCall,
    record_id: int,
    outcome: ToolOutcome,
    store: Callable[[PlannedCall, int, ToolOutcome], None],
) -> None:
    """Keep the outcome in memory until it is stored, then hand it to ``store``. Never raises
    for the database: a store that fails leaves it kept, and written later."""
    _kept.keep(call, record_id, outcome)
    try:
        store(call, record_id, outcome)
    except DatabaseError as exc:
        logger.warning(
            "could not store the outcome of %s (record %s), kept to write later: %s",
            call.tool.name,
            record_id,
            exc,
        )


def _claim(call: PlannedCall) -> tuple[int, ToolOutcome | None]:
    """Record that the call starts, or return what an earlier execution of its key settled.

    One statement when the key is new (the common case): INSERT … ON CONFLICT DO NOTHING
    RETURNING, which PostgreSQL and SQLite both have; a second read only for a repeat."""
    quote = connection.ops.quote_name
    table = quote(ToolExecution._meta.db_table)
    columns = ", ".join(
        quote(c) for c in ("idempotency_key", "tenant", "tool", "status", "sealed_outcome")
    )
    columns += f", {quote('attempts')}, {quote('started_at')}"
    sql = (
        f"INSERT INTO {table} ({columns}) VALUES (%s, %s, %s, %s, '', 0, %s) "  # noqa: S608
        f"ON CONFLICT ({quote('idempotency_key')}) DO NOTHING RETURNING {quote('id')}"
    )
    started_at = ToolExecution._meta.get_field("started_at").get_db_prep_value(
        timezone.now(), connection
    )
    key = call.context.idempotency_key
    with connection.cursor() as cursor:
        cursor.execute(
            sql, [key, call.context.tenant, call.tool.name, ExecutionStatus.STARTED, started_at]
        )
        row = cursor.fetchone()
    if row is not None:
        return row[0], None
    record = _settled(ToolExecution.objects.get(idempotency_key=key), call.tool)
    stored = _stored_outcome(call.tool, record)
    # An outcome stored before outcomes were normalised (``_attempt``) is, when it is read.
    return record.pk, _normalised(stored) if stored is not None else None


def store_outcome(call: PlannedCall, record_id: int, outcome: ToolOutcome) -> None:
    """Record how an execution ended under its key: one UPDATE of the row written when it
    started, or (``record_id`` 0: none was) one INSERT. Reads nothing back."""
    key = call.context.idempotency_key
    _kept.attempted(key)
    status = ExecutionStatus.SUCCEEDED if outcome.ok else ExecutionStatus.FAILED
    sealed = seal(
        {"result": outcome.result, "error": outcome.error.to_dict() if outcome.error else None}
    )
    now = timezone.now()
    if record_id:
        ToolExecution.objects.filter(pk=record_id).update(
            status=status,
            sealed_outcome=sealed,
            attempts=F("attempts") + outcome.attempts,
            finished_at=now,
        )
        _forget_when_committed(key, outcome)
        return
    record = new_row(
        ToolExecution,
        idempotency_key=call.context.idempotency_key,
        tenant=call.context.tenant,
        tool=call.tool.name,
        status=status,
        sealed_outcome=sealed,
        attempts=outcome.attempts,
        started_at=now - timedelta(milliseconds=outcome.duration_ms),
        finished_at=now,
    )
    insert_rows([record], ignore_conflicts=True, unique_fields=("idempotency_key",))
    _forget_when_committed(key, outcome)


def _forget_when_committed(key: str, outcome: ToolOutcome) -> None:
    # Forgotten once written for good: if the step's transaction rolls back, it stays kept.
    transaction.on_commit(lambda: _kept.stored(key, outcome))


def _run_in_worker(call: PlannedCall, state: _Running) -> ToolOutcome:
    """In a pool thread: run the handler; store the outcome only if the caller gave up."""
    close_old_connections()
    try:
        outcome = _attempt(call, state.deadline)
        if not state.finish():  # a late result, kept for later
            _store_or_keep(call, state.record_id, outcome, store_outcome)
        return outcome
    finally:
        # Pool threads outlive requests and tests: a connection a handler opened here would
        # pin the database (PostgreSQL refuses to drop a database with open sessions).
        connections.close_all()


# How long a driver that finds a non-idempotent call started and not ended waits for its
# outcome before answering ``outcome_unknown``: the process that ran it may be alive and
# storing it now (it kept it in memory while the database was away, and the driver that gave
# the run up asked it to write it at once: ``store_kept_outcomes_soon``).
UNSETTLED_WAIT_S = 3.0


def _settled(record: ToolExecution, tool: ToolDefinition) -> ToolExecution:
    """``record``, read again until it has an outcome or ``UNSETTLED_WAIT_S`` have passed (a
    non-idempotent tool's only: an idempotent one simply runs again)."""
    deadline = time.monotonic() + UNSETTLED_WAIT_S
    while (
        not tool.idempotent
        and record.status == ExecutionStatus.STARTED
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
        record.refresh_from_db()
    return record


def _stored_outcome(tool: ToolDefinition, record: ToolExecution) -> ToolOutcome | None:
    """What an earlier execution of this key settles; None means "run the handler again"."""
    stored = unseal(record.sealed_outcome, {})
    if record.status == ExecutionStatus.SUCCEEDED:
        return ToolOutcome(result=stored.get("result"), replayed=True)
    if tool.idempotent:
        return None
    if record.status == ExecutionStatus.FAILED and stored.get("error"):
        error = ToolCallError(
            ToolErrorCode(stored["error"]["code"]),
            stored["error"]["message"],
            stored["error"]["details"],
        )
        return ToolOutcome(error=error, replayed=True)
    return ToolOutcome(
        error=ToolCallError(
            ToolErrorCode.OUTCOME_UNKNOWN,
            f"An earlier attempt of this {tool.name} call did not finish and {tool.name} is not "
            "idempotent, so it was not run again. Check the current state before calling it "
            "again.",
            {"tool": tool.name},
        ),
        replayed=True,
    )


def _attempt(call: PlannedCall, deadline: float) -> ToolOutcome:
    """One execution (with its retries), its outcome normalised: the boundary for what a tool
    (a Python handler, an HTTP endpoint, an MCP server) answers."""
    return _normalised(_attempts(call, deadline))


def _normalised(outcome: ToolOutcome) -> ToolOutcome:
    error = outcome.error
    answer = {
        "result": outcome.result,
        "error": (error.message, error.details) if error else None,
        "traceback": outcome.traceback,
    }
    cleaned, found = clean(answer)
    if not found:
        return outcome
    outcome.result, outcome.traceback = cleaned["result"], cleaned["traceback"]
    if error is not None:
        message, details = cleaned["error"]
        outcome.error = ToolCallError(error.code, message, details)
    outcome.normalised = found
    return outcome


def _attempts(call: PlannedCall, deadline: float) -> ToolOutcome:
    retries = settings.HARNESS_TOOL_MAX_RETRIES if call.tool.idempotent else 0
    attempt = 0
    while True:
        attempt += 1
        context = dataclasses.replace(call.context, deadline=deadline, attempt=attempt)
        try:
            result = call.tool.handler(call.arguments, context)
            json.dumps(result)  # the result must be JSON data: it is stored and sent on
        except ToolHandlerError as exc:
            backoff = RETRY_BACKOFF_S * 2 ** (attempt - 1)
            if exc.transient and attempt <= retries and time.monotonic() + backoff < deadline:
                time.sleep(backoff)
                continue
            return ToolOutcome(error=exc.to_call_error(), attempts=attempt)
        except Exception as exc:
            return _failure(call.tool, exc, attempts=attempt)
        return ToolOutcome(result=result, attempts=attempt)


def _failure(tool: ToolDefinition, exc: Exception, attempts: int) -> ToolOutcome:
    """A short error for the model; the full traceback is for the audit only."""
    return ToolOutcome(
        error=ToolCallError(
            ToolErrorCode.TOOL_FAILED,
            f"{tool.name} failed: {type(exc).__name__}: {_first_line(exc)}",
        ),
        traceback="".join(traceback.format_exception(exc)),
        attempts=attempts,
    )


# --- outcomes not stored yet -----------------------------------------------------------------

# How long after a store was tried (and did not commit) the writer thread writes the outcome
# itself; an outcome whose store was never tried (its step is still going: parallel calls
# wait for the slowest) waits ``UNTRIED_GRACE_S``. Writing twice is harmless: same values.
STORE_GRACE_S = 1.0
UNTRIED_GRACE_S = 30.0
WRITER_INTERVAL_S = 0.5


@dataclass
class _Kept:
    call: PlannedCall
    record_id: int
    outcome: ToolOutcome
    due: float  # time.monotonic() after which the writer thread writes it


class _KeptOutcomes:
    """This process's outcomes that happened and are not stored yet, by idempotency key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, _Kept] = {}
        self._writer: threading.Thread | None = None

    def keep(self, call: PlannedCall, record_id: int, outcome: ToolOutcome) -> None:
        due = time.monotonic() + UNTRIED_GRACE_S
        with self._lock:
            self._items[call.context.idempotency_key] = _Kept(call, record_id, outcome, due)
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_loop, name="tool-outcome-writer", daemon=True
                )
                self._writer.start()

    def get(self, key: str) -> _Kept | None:
        with self._lock:
            return self._items.get(key)

    def attempted(self, key: str) -> None:
        with self._lock:
            kept = self._items.get(key)
            if kept is not None:
                kept.due = min(kept.due, time.monotonic() + STORE_GRACE_S)

    def soon(self, prefix: str) -> None:
        with self._lock:
            for key, kept in self._items.items():
                if key.startswith(prefix):
                    kept.due = min(kept.due, time.monotonic())

    def stored(self, key: str, outcome: ToolOutcome) -> None:
        with self._lock:
            kept = self._items.get(key)
            if kept is not None and kept.outcome is outcome:
                del self._items[key]

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def _write_loop(self) -> None:
        try:
            while True:
                time.sleep(WRITER_INTERVAL_S)
                now = time.monotonic()
                with self._lock:
                    if not self._items:
                        self._writer = None
                        return
                    due = [kept for kept in self._items.values() if kept.due <= now]
                for kept in due:
                    try:
                        store_outcome(kept.call, kept.record_id, kept.outcome)
                    except DatabaseError as exc:
                        logger.warning("kept tool outcome not written yet: %s", exc)
                        break
                    logger.info(
                        "kept outcome of %s written under %s",
                        kept.call.tool.name,
                        kept.call.context.idempotency_key,
                    )
                if due:
                    connections.close_all()  # a fresh one next time; none held while idle
        finally:
            connections.close_all()


_kept = _KeptOutcomes()


def store_kept_outcomes_soon(prefix: str) -> None:
    """Have the writer thread store the kept outcomes whose idempotency key starts with
    ``prefix`` (a run's calls: ``<run id>:``) as soon as the database takes them, not after
    the grace left for the step that was to store them: that step will not (its driver gave
    the run up), and the driver that takes the run over reads them."""
    _kept.soon(prefix)


def forget_kept_outcomes() -> None:
    """Drop the outcomes kept in memory (tests: one test's late results are not another's)."""
    _kept.clear()


def _executor() -> ThreadPoolExecutor:
    """The process's tool threads (a new pool when ``HARNESS_TOOL_MAX_THREADS`` changes)."""
    global _pool, _pool_size
    size = settings.HARNESS_TOOL_MAX_THREADS
    with _pool_lock:
        if _pool is None or _pool_size != size:
            if _pool is not None:
                _pool.shutdown(wait=False)  # its busy threads end on their own
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="tool")
            _pool_size = size
        return _pool


def _elapsed_ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else "(no message)"
