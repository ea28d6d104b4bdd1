"""Human approvals of tool calls.

A call that needs approval is held: a ``ToolApproval`` row keeps its exact arguments, their
SHA-256, the rule that asked for it, the policy version and an expiry. An approver (anyone the
tenant's Casbin policy grants ``approval:decide``) approves or denies it, naming the hash of
the arguments they saw: a decision binds to those arguments and no others. No decision before
the expiry means deny (``expire_approvals``, run by Celery beat).

Four eyes: the run's own end user may not approve its calls (``ApproverIsEndUser``; denying
them is fine), unless the tool file says ``"self_approval": true`` or the tenant's policy
grants the approver ``approval:decide_own``. Decision guards (``add_decision_guard``) let the
harness refuse decisions on runs that are no longer waiting (this app does not know runs).

Each decision sends ``approval_decided`` after its transaction commits; the harness listens to
resume the run (this app does not know about runs).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from policy.acl import decide, require_scope
from policy.errors import (
    ApprovalAlreadyDecided,
    ApprovalArgumentsMismatch,
    ApprovalEditRefused,
    ApprovalNotFound,
    ApproverIsEndUser,
)
from policy.models import ApprovalStatus, ToolApproval

APPROVER_SCOPE = "approval:decide"
# Lets an approver decide the held calls of runs that act for themselves.
SELF_APPROVAL_SCOPE = "approval:decide_own"

DecisionGuard = Callable[[ToolApproval], None]
_decision_guards: list[DecisionGuard] = []


def add_decision_guard(guard: DecisionGuard) -> None:
    """Call ``guard(approval)`` before any decision on a pending approval; it raises a
    ``PolicyError`` to refuse it (e.g. the run is no longer waiting). Idempotent."""
    if guard not in _decision_guards:
        _decision_guards.append(guard)


# Sent with ``approval_id`` once a decision (approve, deny or expiry) is committed.
approval_decided = Signal()


def hash_arguments(arguments: dict[str, Any]) -> str:
    """SHA-256 of the arguments in canonical JSON (sorted keys, no spaces, UTF-8)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def build_approval(
    *,
    tenant: str,
    run_id: str,
    call_id: str,
    tool: str,
    user_id: str,
    arguments: dict[str, Any],
    rule: str,
    reason: str,
    policy_version: int,
    display_arguments: dict[str, Any] | None = None,
    self_approval: bool = False,
    round: int = 1,
    sealed_arguments: str = "",
) -> ToolApproval:
    """A pending approval for this call, not saved yet: ``save_approvals`` stores it (the
    engine does so in the fenced transaction of the step that held the call).

    The row shows ``display_arguments`` (the caller's masked copy) when given; the decision
    binds to the SHA-256 of the exact ``arguments``. ``self_approval``: the tool file lets the
    run's own end user approve it. ``round`` > 1: the call held again for an approver's edited
    arguments, which the caller passes sealed (``sealed_arguments``).
    """
    return ToolApproval(
        run_id=run_id,
        call_id=call_id,
        tenant=tenant,
        tool=tool,
        user_id=user_id,
        arguments=arguments if display_arguments is None else display_arguments,
        arguments_sha256=hash_arguments(arguments),
        rule=rule,
        reason=reason,
        policy_version=policy_version,
        self_approval=self_approval,
        round=round,
        sealed_arguments=sealed_arguments,
        expires_at=timezone.now() + timedelta(seconds=settings.HARNESS_APPROVAL_TTL_S),
    )


def save_approvals(approvals: list[ToolApproval]) -> None:
    """Store pending approvals from ``build_approval`` (one multi-row INSERT). Idempotent: a
    call already held keeps its first row."""
    if approvals:
        ToolApproval.objects.bulk_create(approvals, ignore_conflicts=True)


@dataclass(frozen=True)
class EditedArguments:
    """An approver's version of a held call's arguments: as shown (masked), the SHA-256 of the
    clear ones, and the clear ones sealed by the caller."""

    shown: dict[str, Any]
    sha256: str
    sealed: str


def decide_approval(
    *,
    tenant: str,
    run_id: str,
    call_id: str,
    approver: str,
    approve: bool,
    arguments_sha256: str,
    comment: str = "",
    edit: Callable[[ToolApproval], EditedArguments] | None = None,
) -> ToolApproval:
    """Approve or deny a held call, for the exact arguments whose hash the approver names;
    ``edit``: approve it to run with the approver's arguments instead (recorded with both
    versions and who edited; the decision still binds to the held arguments' hash).

    Authorisation first, then the decision's own checks, and only then ``edit(approval)``
    (the caller's validation of the edit, which raises ``ApprovalEditRefused``): a caller
    who may not decide learns nothing about the arguments.

    Raises ``ActingUserRequired`` (no approver), ``PermissionDenied`` (no
    ``approval:decide``), ``ApprovalNotFound``,
    ``ApprovalAlreadyDecided`` (also when it just expired), a guard's error (e.g.
    ``RunNotAwaitingApproval``), ``ApproverIsEndUser`` (four eyes) or
    ``ApprovalArgumentsMismatch``.
    Side effect: ``approval_decided`` after commit.
    """
    require_scope(tenant, approver, APPROVER_SCOPE)
    if edit is not None and not approve:
        raise ApprovalEditRefused(
            "Only an approval can change a call's arguments; a denial runs nothing.", {}
        )
    return _decide(tenant, run_id, call_id, approver, approve, arguments_sha256, comment, edit)


def _decide(
    tenant: str,
    run_id: str,
    call_id: str,
    approver: str,
    approve: bool,
    arguments_sha256: str,
    comment: str,
    edit: Callable[[ToolApproval], EditedArguments] | None = None,
) -> ToolApproval:
    # The call's latest round is the one to decide (earlier ones are decided already).
    approval = (
        ToolApproval.objects.filter(tenant=tenant, run_id=run_id, call_id=call_id)
        .order_by("-round")
        .first()
    )
    if approval is None:
        raise ApprovalNotFound(
            f"No approval for call {call_id} in run {run_id}.",
            {"run_id": run_id, "call_id": call_id},
        )
    if approval.status == ApprovalStatus.PENDING and approval.expires_at <= timezone.now():
        expire_approvals()
        approval.refresh_from_db()
    if approval.status != ApprovalStatus.PENDING:
        raise ApprovalAlreadyDecided(
            f"The call was already {approval.status} by {approval.decided_by}.",
            {"status": approval.status, "decided_by": approval.decided_by},
        )
    for guard in _decision_guards:
        guard(approval)
    if approve:  # denying one's own call is always allowed
        _check_four_eyes(approval, approver)
    if arguments_sha256 != approval.arguments_sha256:
        raise ApprovalArgumentsMismatch(
            "The arguments you decided on are not the ones held for approval.",
            {"expected_sha256": approval.arguments_sha256, "received_sha256": arguments_sha256},
        )
    edited = edit(approval) if edit is not None else None
    status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
    if not _close(approval.pk, status, approver, comment, timezone.now(), edited):
        approval.refresh_from_db()
        raise ApprovalAlreadyDecided(
            f"The call was already {approval.status} by {approval.decided_by}.",
            {"status": approval.status, "decided_by": approval.decided_by},
        )
    approval.refresh_from_db()
    return approval


def _check_four_eyes(approval: ToolApproval, approver: str) -> None:
    """The run's own end user approves only where the tool file or the tenant allows it; so
    does the approver whose edit a later round holds (their edit is their own proposal)."""
    editor = _editor_of(approval)
    if approver not in (approval.user_id, editor) or approval.self_approval:
        return
    if decide(approval.tenant, approver, SELF_APPROVAL_SCOPE).allowed:
        return
    who = "the end user of this run" if approver == approval.user_id else "who edited them"
    raise ApproverIsEndUser(
        f"{approver} is {who}: another approver must decide this call "
        f"(or the tool file sets self_approval, or the tenant grants {SELF_APPROVAL_SCOPE}).",
        {
            "approver": approver,
            "end_user": approval.user_id,
            "edited_by": editor,
            "tool": approval.tool,
        },
    )


def _editor_of(approval: ToolApproval) -> str:
    """Who edited the arguments a later round holds ("" for the first round)."""
    if approval.round <= 1:
        return ""
    earlier = ToolApproval.objects.filter(
        run_id=approval.run_id, call_id=approval.call_id, round=approval.round - 1
    ).first()
    return earlier.decided_by if earlier is not None else ""


def expire_approvals() -> int:
    """Deny every pending approval past its expiry; returns how many. Idempotent."""
    now = timezone.now()
    expired = 0
    for pk in ToolApproval.objects.filter(
        status=ApprovalStatus.PENDING, expires_at__lte=now
    ).values_list("pk", flat=True):
        expired += _close(pk, ApprovalStatus.EXPIRED, "expiry", "no decision in time", now)
    return expired


def _close(
    pk: int,
    status: str,
    by: str,
    comment: str,
    now: datetime,
    edited: EditedArguments | None = None,
) -> int:
    """Conditional pending → decided; exactly one closer wins, and only it signals."""
    edits = (
        {
            "edited_arguments": edited.shown,
            "edited_arguments_sha256": edited.sha256,
            "sealed_edited_arguments": edited.sealed,
        }
        if edited is not None
        else {}
    )
    with transaction.atomic():
        closed = ToolApproval.objects.filter(pk=pk, status=ApprovalStatus.PENDING).update(
            status=status, decided_by=by, decided_at=now, comment=comment, **edits
        )
        if closed:
            transaction.on_commit(
                lambda: approval_decided.send(sender=ToolApproval, approval_id=pk)
            )
    return closed


def list_approvals(tenant: str, run_id: str) -> list[ToolApproval]:
    return list(
        ToolApproval.objects.filter(tenant=tenant, run_id=run_id).order_by("created_at", "round")
    )


def list_waiting_approvals(
    tenants: Collection[str] | None, now: datetime, limit: int
) -> list[ToolApproval]:
    """Calls still waiting for a decision in ``tenants`` (``None``: every tenant), the
    soonest to expire first."""
    waiting = ToolApproval.objects.filter(status=ApprovalStatus.PENDING, expires_at__gt=now)
    if tenants is not None:
        waiting = waiting.filter(tenant__in=sorted(tenants))
    return list(waiting.order_by("expires_at")[:limit])


def has_pending_approvals(run_id: str) -> bool:
    return ToolApproval.objects.filter(run_id=run_id, status=ApprovalStatus.PENDING).exists()


def get_approval(approval_id: int) -> ToolApproval:
    return ToolApproval.objects.get(pk=approval_id)
