"""Pausing for and resuming after human approvals.

A run whose calls are held for approval is paused (``awaiting_approval``); once none of its
approvals is pending, it is queued again (``state.resume``, exactly one caller wins) and the
run task continues it on any worker, from its last commit.
"""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction

from harness.engine import state
from harness.models import Run
from policy import services as policy
from traces.services import SpanKind, SpanStatus, TraceRecorder

logger = logging.getLogger(__name__)


def waiting_detail(run: Run) -> str:
    waiting = [
        a
        for a in policy.list_approvals(run.tenant.slug, str(run.id))
        if a.status == policy.ApprovalStatus.PENDING
    ]
    return (
        "Waiting for approval of "
        + ", ".join(f"{a.tool} (call {a.call_id}, rule {a.rule})" for a in waiting)
        + "."
    )


def resume_if_decided(run_id: str) -> bool:
    """Queue a paused run once none of its approvals is pending; True for the one caller
    that moved it."""
    if policy.has_pending_approvals(run_id):
        return False
    from harness.dispatch import enqueue_run

    with transaction.atomic():
        moved = state.resume(run_id)
        if moved:
            enqueue_run(run_id)
    return moved


def on_approval_decided(sender: object, approval_id: int, **kwargs: object) -> None:
    """Receiver of ``approval_decided``: an ``approval`` span in the run's trace, then
    resume the run if nothing else of it waits."""
    approval = policy.get_approval(approval_id)
    run = Run.objects.select_related("tenant").filter(id=approval.run_id).first()
    if run is None:
        return
    _record_approval_span(run, approval)
    resume_if_decided(str(run.id))


def _record_approval_span(run: Run, approval: policy.ToolApproval) -> None:
    attributes = {
        "call_id": approval.call_id,
        "tool": approval.tool,
        "decision": approval.status,
        "decided_by": approval.decided_by,
        "comment": approval.comment,
        "rule": approval.rule,
        "policy_version": approval.policy_version,
        "arguments_sha256": approval.arguments_sha256,
        "requested_at": approval.created_at.isoformat(),
    }
    for _attempt in range(3):
        # Two decisions on one run may race for the next span sequence number: retry.
        try:
            tracer = TraceRecorder(run.request_id, run.tenant.slug)
            with tracer.span(
                SpanKind.APPROVAL, f"{approval.status} {approval.tool}", **attributes
            ) as span:
                if approval.status != policy.ApprovalStatus.APPROVED:
                    span.fail(SpanStatus.REFUSED)
            return
        except IntegrityError:
            continue
    logger.warning("could not record the approval span of %s", approval)
