"""What the harness adds to the policy app's approvals: decisions only on runs that still
wait. ``refuse_decisions_on_ended_runs`` is a decision guard (``policy.add_decision_guard``):
a held call of a run that was cancelled or has finished is refused with
``409 run_not_awaiting_approval``, from the API and the admin alike. (The wait itself is
credited to the run's deadline when it resumes: ``harness.engine.state.resume``.)
"""

from __future__ import annotations

from harness.models import TERMINAL_STATUSES, Run
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
