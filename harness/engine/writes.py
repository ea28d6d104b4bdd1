"""A step's writes, together: one fenced transaction per step.

The driver collects what a step produced — new conversation messages, events, spans and audit
records (the recorder's buffer), fingerprints, budget and label rows — and ``commit`` writes it
all in one transaction that begins with the fenced UPDATE of the run row
(``harness.engine.state``). If the lease is lost, the UPDATE matches nothing, the transaction
rolls back and nothing of the step is written. Rows go in as one multi-row INSERT per table,
all of them in one round trip (``traces.rows``); nothing is read before it is written (the
driver knows the next event number and message index). What must wait for the commit —
Celery messages, the OpenTelemetry export — runs ``on_commit``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from harness.engine import state
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
        ``state.LeaseLost`` if this driver lost the run: then nothing is written."""
        events, self._events = self._events, []
        messages, self._messages = self._messages, []
        inside, self._inside = self._inside, []
        blind, self._blind = self._blind, []
        after, self._after = self._after, []
        undo, self._rollback = self._rollback, []

        def append() -> Callable[[], None]:
            insert_rows(messages)
            insert_rows(events)
            for write in blind:
                write()
            return self.tracer.flush()

        try:
            with transaction.atomic():
                # Round trips: the fenced UPDATE (with BEGIN) and the step's rows travel
                # together, read back once; then the writes that read; then COMMIT.
                if transition is not None:
                    fence = transition()
                    with sent_together():
                        exports = [append()]
                else:
                    with sent_together():
                        fence = state.checkpoint(self.lease, fields or {}, self.tracer.tenant)
                        exports = [append()]
                for write in inside:
                    write()
                if self.tracer.pending:  # what the writes above recorded
                    with sent_together():
                        exports.append(self.tracer.flush())
                for export in exports:
                    transaction.on_commit(export)
                for action in after:
                    transaction.on_commit(action)
        except BaseException:
            # Nothing of the step was written: forget the numbers it had taken.
            self.next_event -= len(events)
            self.next_message -= len(messages)
            for action in undo:
                action()
            raise
        return fence if isinstance(fence, state.Fence) else None
