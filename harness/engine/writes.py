"""A step's writes, together: one fenced transaction per step.

The driver collects what a step produced — new conversation messages, events, spans and audit
records (the recorder's buffer), fingerprints, budget and label rows — and ``commit`` writes it
all in one transaction that begins with the fenced UPDATE of the run row
(``harness.engine.state``). If the lease is lost, the UPDATE matches nothing, the transaction
rolls back and nothing of the step is written. Rows go in as one multi-row INSERT per table,
all of them in one round trip (``traces.rows``); nothing is read before it is written (the
driver knows the next event number and message index). What must wait for the commit —
Celery messages, the OpenTelemetry export — runs ``on_commit``. A commit the database did not
take because it was unreachable is retried (``harness.engine.retry``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from harness.engine import retry, state
from harness.engine.heartbeat import get_heartbeat
from harness.models import RunEvent, RunMessage
from traces.services import TraceRecorder, insert_rows, new_row, seal, sent_together


class StepWrites:
    """Buffers the rows of a run's current step until ``commit``."""

    def __init__(
        self,
        lease: state.Lease,
        tracer: TraceRecorder,
        next_event: int,
        next_message: int,
    ) -> None:
        self.lease = lease
        self.tracer = tracer
        self.next_event = next_event
        self.next_message = next_message
        self._events: list[RunEvent] = []
        self._messages: list[RunMessage] = []
        self._inside: list[Callable[[], None]] = []
        self._blind: list[Callable[[], None]] = []
        self._after: list[Callable[[], None]] = []
        self._rollback: list[Callable[[], None]] = []

    def event(self, event_type: str, data: dict[str, Any]) -> None:
        """An event of the run's stream; ``data`` must already be masked."""
        self._events.append(
            new_row(
                RunEvent,
                run_id=self.lease.run_id,
                sequence=self.next_event,
                type=event_type,
                data=data,
            )
        )
        self.next_event += 1

    def event_now(self, event_type: str, data: dict[str, Any]) -> None:
        """An event decided inside the step's transaction (``inside``), written at once."""
        RunEvent.objects.create(
            run_id=self.lease.run_id, sequence=self.next_event, type=event_type, data=data
        )
        self.next_event += 1

    def message(self, clear: dict[str, Any]) -> None:
        """A new message of the run's conversation: stored masked, and sealed in clear."""
        self._messages.append(
            new_row(
                RunMessage,
                run_id=self.lease.run_id,
                index=self.next_message,
                data=self.tracer.mask(clear),
                sealed=seal(clear),
            )
        )
        self.next_message += 1

    def inside(self, write: Callable[[], None]) -> None:
        """Run ``write`` inside the step's transaction, after the run row is fenced."""
        self._inside.append(write)

    def inside_blind(self, write: Callable[[], None]) -> None:
        """Like ``inside``, for a write that reads nothing back — no row, not even a count
        (on PostgreSQL it travels with the step's rows, whose results come at the end)."""
        self._blind.append(write)

    def after_commit(self, action: Callable[[], None]) -> None:
        self._after.append(action)

    def on_rollback(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` if the next commit fails: for what a write changed in memory as well
        as in the database (the budget ledger's counters), so that the driver's last resort
        records it again rather than losing it."""
        self._rollback.append(undo)

    def taking(self, owner: object, *names: str) -> None:
        """For a write that takes what it writes out of ``owner``'s lists ``names`` (noted
        labels, tool outcomes): put them back as they are now if the commit rolls back, so
        that a retry writes them again."""
        saved = {name: list(getattr(owner, name)) for name in names}

        def put_back() -> None:
            for name, items in saved.items():
                setattr(owner, name, list(items))

        self.on_rollback(put_back)

    def discard(self) -> None:
        """Drop everything buffered and not written (the driver's last resort starts over)."""
        self.next_event -= len(self._events)
        self.next_message -= len(self._messages)
        self._events, self._messages, self._inside, self._blind = [], [], [], []
        self._after, self._rollback = [], []

    def commit(
        self,
        fields: dict[str, Any] | None = None,
        transition: Callable[[], Any] | None = None,
    ) -> state.Fence | None:
        """Write the step. The run row is updated first — ``state.checkpoint`` with
        ``fields`` by default, or ``transition`` (pause, finish) — which raises
        ``state.LeaseLost`` if this driver lost the run: then nothing is written.

        A connection error (the database restarting, a dropped connection) is retried with
        back-off, the very same rows each time, for as long as the lease surely holds (see
        ``retry``); a COMMIT whose answer was lost is recognised (``state.landed``) and not
        written again. Past that the error is raised: nothing of the step was written, or
        it is unknown whether it was (the driver gives the run up)."""
        step = _Step(
            self._events, self._messages, self._inside, self._blind, self._after, self._rollback
        )
        self._events, self._messages, self._inside, self._blind = [], [], [], []
        self._after, self._rollback = [], []
        backoff = retry.Backoff(self.lease)
        while True:
            stamp = timezone.now()
            next_event = self.next_event  # ``event_now`` numbers more inside the transaction
            put_back = self.tracer.hold()
            started = time.monotonic()
            exports: list[Callable[[], None]] = []
            try:
                fence = self._write(step, fields, transition, stamp, exports)
                break
            except BaseException as exc:
                error = exc
            again = retry.transient(error)
            if again:
                try:
                    if retry.settle(backoff, stamp, transition is not None, error):
                        for action in [*exports, *step.after]:  # what on_commit would have run
                            action()
                        fence = None
                        break
                except BaseException as exc:  # gave up waiting, or the lease is lost
                    error, again = exc, False
            self.next_event = next_event
            for action in step.undo:
                action()
            if not again:
                # Nothing of the step was written (or, given up, it is not known): forget the
                # numbers it had taken.
                self.next_event -= len(step.events)
                self.next_message -= len(step.messages)
                raise error
            put_back()  # and write the very same rows again
        get_heartbeat().renewed(self.lease, started)  # the fenced UPDATE renewed it
        return fence if isinstance(fence, state.Fence) else None

    def _write(
        self,
        step: _Step,
        fields: dict[str, Any] | None,
        transition: Callable[[], Any] | None,
        stamp: datetime,
        exports: list[Callable[[], None]],
    ) -> Any:
        """One attempt at the step's transaction; ``exports`` gets what runs after it."""

        def append() -> Callable[[], None]:
            insert_rows(step.messages)
            insert_rows(step.events)
            for write in step.blind:
                write()
            return self.tracer.flush()

        with transaction.atomic():
            # Round trips: the fenced UPDATE (with BEGIN) and the step's rows travel
            # together, read back once; then the writes that read; then COMMIT.
            if transition is not None:
                fence = transition()
                with sent_together():
                    exports.append(append())
            else:
                with sent_together():
                    fence = state.checkpoint(
                        self.lease, fields or {}, self.tracer.tenant, now=stamp
                    )
                    exports.append(append())
            for write in step.inside:
                write()
            if self.tracer.pending:  # what the writes above recorded
                with sent_together():
                    exports.append(self.tracer.flush())
            for export in exports:
                transaction.on_commit(export)
            for action in step.after:
                transaction.on_commit(action)
        return fence


@dataclass(frozen=True)
class _Step:
    """What one commit writes, kept as it was handed over so that a retry writes it again."""

    events: list[RunEvent]
    messages: list[RunMessage]
    inside: list[Callable[[], None]]
    blind: list[Callable[[], None]]
    after: list[Callable[[], None]]
    undo: list[Callable[[], None]]
