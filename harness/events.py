"""A run's live events, stored in order so a stream can be resumed with ``Last-Event-ID``."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from harness.models import RunEvent

RETRIES_ON_RACE = 5


class EventType:
    RUN_QUEUED = "run.queued"
    RUN_STARTED = "run.started"
    STEP_STARTED = "step.started"
    TEXT_DELTA = "text.delta"
    REASONING_DELTA = "reasoning.delta"
    TOOL_CALL_PROPOSED = "tool_call.proposed"
    TOOL_CALL_DECIDED = "tool_call.decided"
    TOOL_CALL_FINISHED = "tool_call.finished"
    APPROVAL_NEEDED = "approval.needed"
    CONTEXT_TRIMMED = "context.trimmed"
    RUN_FINISHED = "run.finished"


def emit(run_id: Any, event_type: str, data: dict[str, Any] | None = None) -> RunEvent:
    """Append an event to the run's stream. Safe if two writers race (the loser retries)."""
    for _ in range(RETRIES_ON_RACE):
        last = RunEvent.objects.filter(run_id=run_id).aggregate(m=Max("sequence"))["m"] or 0
        try:
            with transaction.atomic():
                return RunEvent.objects.create(
                    run_id=run_id, sequence=last + 1, type=event_type, data=data or {}
                )
        except IntegrityError:
            continue
    raise RuntimeError(f"could not append an event to run {run_id}")


def list_events_after(run_id: Any, after: int, limit: int = 500) -> list[RunEvent]:
    return list(
        RunEvent.objects.filter(run_id=run_id, sequence__gt=after).order_by("sequence")[:limit]
    )
