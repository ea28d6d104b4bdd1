"""A run's live events, stored in order so a stream can be resumed with ``Last-Event-ID``.

A run's driver numbers its events itself (it knows the last number from its claim on) and
writes them with the step they belong to (``harness.engine.writes``). ``emit`` is for the
writers outside a driven step: a new run, a cancelled idle run.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from harness.models import RunEvent
from traces.services import insert_rows

RETRIES_ON_RACE = 5


class EventType:
    RUN_QUEUED = "run.queued"
    RUN_STARTED = "run.started"
    STEP_STARTED = "step.started"
    TEXT_DELTA = "text.delta"
    REASONING_DELTA = "reasoning.delta"
    TOOL_CALL_PROPOSED = "tool_call.proposed"
    TOOL_CALL_FINISHED = "tool_call.finished"
    APPROVAL_NEEDED = "approval.needed"
    CONTEXT_TRIMMED = "context.trimmed"
    BUDGET_THRESHOLD = "budget.threshold"
    PLAN_CREATED = "plan.created"
    PLAN_REVISED = "plan.revised"
    RUN_FINISHED = "run.finished"


def last_sequence(run_id: Any) -> int:
    return RunEvent.objects.filter(run_id=run_id).aggregate(m=Max("sequence"))["m"] or 0


def emit(run_id: Any, event_type: str, data: dict[str, Any] | None = None) -> RunEvent:
    """Append an event to the stream of a run nobody drives. Safe if two writers race."""
    for _ in range(RETRIES_ON_RACE):
        try:
            with transaction.atomic():
                return RunEvent.objects.create(
                    run_id=run_id,
                    sequence=last_sequence(run_id) + 1,
                    type=event_type,
                    data=data or {},
                )
        except IntegrityError:
            continue
    raise RuntimeError(f"could not append an event to run {run_id}")


def emit_first(run_id: Any, event_type: str, data: dict[str, Any]) -> None:
    """The first event of a run, in the transaction that creates it (nobody else can have
    written one): number 1, nothing read."""
    insert_rows([RunEvent(run_id=run_id, sequence=1, type=event_type, data=data)])


def list_events_after(run_id: Any, after: int, limit: int = 500) -> list[RunEvent]:
    return list(
        RunEvent.objects.filter(run_id=run_id, sequence__gt=after).order_by("sequence")[:limit]
    )
