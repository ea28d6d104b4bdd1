"""What the harness adds to the policy app's approvals: decisions only on runs that still
wait, and a wait that never counts against the run's deadline.

- ``refuse_decisions_on_ended_runs`` is a decision guard (``policy.add_decision_guard``): a
  held call of a run that was cancelled or has finished is refused with
  ``409 run_not_awaiting_approval``, from the API and the admin alike.
- ``requeue_after_approvals`` moves a paused run back to ``queued`` (conditional update, so
  exactly one caller does it) and moves its ``deadline_at`` later by the time it waited: the
  run's ``updated_at`` is set when it pauses (``awaiting_approval``) and nothing writes the
  run while it waits, so ``now - updated_at`` is the wait. The budget's wall time already
  counts driven segments only.
"""

from __future__ import annotations

from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, Value
from django.utils import timezone

from harness.models import TERMINAL_STATUSES, Run, RunStatus
from policy import services as policy
from policy.errors import RunNotAwaitingApproval


def refuse_decisions_on_ended_runs(approval: policy.ToolApproval) -> None:
    """Raise ``RunNotAwaitingApproval`` if the approval's run is gone or has ended."""
    status = Run.objects.filter(id=approval.run_id).values_list("status", flat=True).first()
    if status is None or status in TERMINAL_STATUSES:
        raise RunNotAwaitingApproval(
            f"The run is {status or 'gone'}: its held calls can no longer be decided.",
            {"run_id": approval.run_id, "call_id": approval.call_id, "run_status": status},
        )


def requeue_after_approvals(run_id: str) -> int:
    """``awaiting_approval`` → ``queued``, crediting the wait to the deadline; returns the
    number of rows moved (0 or 1). Call inside the transaction that enqueues the resume."""
    now = timezone.now()
    waited = ExpressionWrapper(
        Value(now, output_field=DateTimeField()) - F("updated_at"), output_field=DurationField()
    )
    return Run.objects.filter(id=run_id, status=RunStatus.AWAITING_APPROVAL).update(
        status=RunStatus.QUEUED,
        updated_at=now,
        deadline_at=ExpressionWrapper(F("deadline_at") + waited, output_field=DateTimeField()),
    )
