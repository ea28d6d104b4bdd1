"""What the loop asks the policy engine around each step, and pausing for / resuming after
human approvals.

- Before each model call: pace it under the tenant's model calls per minute (waiting, never
  failing, within the run's wall time), then reserve tokens and cost from an estimate; a spent
  budget ends the run as ``budget_exceeded``, a spent wall time as ``deadline_exceeded``.
- After it: settle the reservation with the real usage.
- At the end of each driven segment: add its wall time, free the concurrency slot.
- A run whose calls are held for approval is paused (``awaiting_approval``); once no approval
  of it is pending, it is queued again and ``harness.resume_run`` continues it on any worker.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from gateway.messages import Message, ModelResponse, ToolSpec
from gateway.services import estimate_cost_usd
from gateway.tokens import estimate_tokens
from harness.agent_registry import AgentSpec
from harness.approval_wait import requeue_after_approvals
from harness.models import Run, RunStatus
from policy import services as policy
from traces.services import OpenSpan, SpanKind, SpanStatus, TraceRecorder

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stop:
    status: RunStatus
    detail: str


class RunGuard:
    """Budget, pacing and wall time of one driven segment of a run."""

    def __init__(self, run: Run) -> None:
        self.tenant = run.tenant.slug
        self.run_id = str(run.id)
        self.started = time.monotonic()
        self.reservation: policy.Reservation | None = None
        # The run (re)takes its concurrency slot: a no-op for a new run, which took it at
        # admission; needed after a pause, a hand-off or a crash, which released or lost it.
        policy.resume_run_slot(self.tenant, self.run_id)

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def before_model_call(
        self, agent: AgentSpec, messages: list[Message], specs: list[ToolSpec]
    ) -> Stop | None:
        """Pace and reserve the next model call; a ``Stop`` ends the run instead."""
        if not policy.pace_model_call(self.tenant, self.run_id, self._remaining_s()):
            return Stop(
                RunStatus.DEADLINE_EXCEEDED,
                "The run stopped: the tenant's limit of model calls per minute kept it waiting "
                "past its wall-time limit.",
            )
        prompt = estimate_tokens(messages, specs)
        completion = settings.HARNESS_COMPLETION_RESERVE_TOKENS
        cost = estimate_cost_usd(agent.model or None, prompt, completion)
        result = policy.reserve_model_call(
            self.tenant,
            self.run_id,
            prompt + completion,
            policy.usd_to_micros(cost) or 0,
            self.elapsed_ms(),
        )
        if isinstance(result, policy.BudgetStop):
            status = (
                RunStatus.DEADLINE_EXCEEDED
                if result.kind == "wall_time"
                else RunStatus.BUDGET_EXCEEDED
            )
            return Stop(status, f"The run stopped before finishing. {result.message}")
        self.reservation = result
        return None

    def after_model_call(self, response: ModelResponse | None) -> int:
        """Settle with the real usage (``None``: the call failed); returns its micro-USD."""
        reservation, self.reservation = self.reservation, None
        if reservation is None:
            return 0
        if response is None:
            policy.cancel_reservation(reservation)
            return 0
        # The gateway prices the call from its route's price table.
        return policy.settle_model_call(
            reservation,
            response.usage.total_tokens,
            policy.usd_to_micros(response.cost_usd or 0.0) or 0,
        )

    def end_segment(self) -> None:
        """The run ends or pauses: count its wall time and free its concurrency slot."""
        if self.reservation is not None:
            self.after_model_call(None)
        policy.add_wall_time(self.tenant, self.run_id, self.elapsed_ms())
        policy.release_run(self.tenant, self.run_id)

    def _remaining_s(self) -> float | None:
        usage = policy.run_usage(self.run_id)
        if not usage or usage["wall_time_limit_s"] is None:
            return None
        spent = usage["wall_time_s"] + self.elapsed_ms() / 1000
        return max(0.0, usage["wall_time_limit_s"] - spent)


def pause_run(run: Run, tracer: TraceRecorder, session: OpenSpan) -> Run:
    """Persist ``awaiting_approval`` with what it waits for; resume at once if every held
    call was decided meanwhile."""
    waiting = [
        a
        for a in policy.list_approvals(run.tenant.slug, str(run.id))
        if a.status == policy.ApprovalStatus.PENDING
    ]
    detail = (
        "Waiting for approval of "
        + ", ".join(f"{a.tool} (call {a.call_id}, rule {a.rule})" for a in waiting)
        + "."
    )
    Run.objects.filter(id=run.id).update(
        status=RunStatus.AWAITING_APPROVAL, status_detail=detail, updated_at=timezone.now()
    )
    session.set(
        status=RunStatus.AWAITING_APPROVAL,
        steps=run.steps,
        waiting_for=[a.call_id for a in waiting],
    )
    tracer.end(session)
    resume_if_decided(str(run.id))
    run.refresh_from_db()
    return run


def resume_if_decided(run_id: str) -> bool:
    """Queue a paused run for ``harness.resume_run`` once none of its approvals is pending.
    Exactly one caller moves it (conditional update), so it is resumed once."""
    if policy.has_pending_approvals(run_id):
        return False
    with transaction.atomic():
        # sec-authz: waiting for approval does not count against the deadline.
        moved = requeue_after_approvals(run_id)
        if moved:
            transaction.on_commit(lambda: _enqueue_resume(run_id))
    return bool(moved)


def _enqueue_resume(run_id: str) -> None:
    from harness.tasks import resume_run_task

    resume_run_task.delay(run_id)


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
