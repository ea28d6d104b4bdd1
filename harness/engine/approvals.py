"""Pausing for and resuming after human approvals, and an approver's edit of a held call.

A run whose calls are held for approval is paused (``awaiting_approval``); once none of its
approvals is pending, it is queued again (``state.resume``, exactly one caller wins) and the
run task continues it on any worker, from its last commit.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction

from harness.engine import state
from harness.engine.conversation import load_run_messages
from harness.models import Run
from policy import services as policy
from policy.errors import ApprovalEditRefused
from tools.services import find_violations, get_tool_registry, summarize_violations
from traces.services import SpanKind, SpanStatus, TraceRecorder, mask_for_storage, seal

logger = logging.getLogger(__name__)


def merge_patch(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as a JSON Merge Patch (RFC 7386): members of an object
    patch replace the target's, a member set to null is removed; any other patch replaces."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def edit_held_arguments(run: Run, call_id: str, patch: dict[str, Any]) -> policy.EditedArguments:
    """The arguments a held call runs with once approved with ``patch`` (a JSON Merge Patch
    over the arguments the model sent, so an approver who sees them masked changes only what
    they name), validated against the tool's schema. Raises ``ApprovalEditRefused``."""
    calls = (c for m in load_run_messages(run) if m.role == "assistant" for c in m.tool_calls)
    call = next((c for c in calls if c.id == call_id), None)
    tool = get_tool_registry().get(call.name) if call is not None else None
    if call is None or call.arguments is None or tool is None:
        raise ApprovalEditRefused(
            f"No held call {call_id} with readable arguments in this run.", {"call_id": call_id}
        )
    edited = merge_patch(call.arguments, patch)
    violations = find_violations(tool, edited)
    if violations:
        raise ApprovalEditRefused(
            summarize_violations(call.name, violations),
            {"call_id": call_id, "violations": violations},
        )
    shown = mask_for_storage(
        run.request_id, run.tenant.slug, edited, tool.sensitive.get("arguments")
    )
    return policy.EditedArguments(
        shown=shown, sha256=policy.hash_arguments(edited), sealed=seal(edited)
    )


def waiting_detail(waiting: list[policy.ToolApproval]) -> str:
    """The paused run's status detail, naming the pending approvals ``waiting``."""
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
