"""Pausing for and resuming after human approvals, and an approver's edit of a held call.

A run whose calls are held for approval is paused (``awaiting_approval``); once none of its
approvals is pending, it is queued again (``state.resume``, exactly one caller wins) and the
run task continues it on any worker, from its last commit.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from django.db import IntegrityError, transaction

from harness.dispatch import enqueue_run
from harness.engine import state
from harness.engine.conversation import load_run_messages
from harness.engine.decisions import recheck_call_rules
from harness.models import Run
from policy import services as policy
from policy.errors import ApprovalEditRefused, ApprovalEditRefusedByPolicy
from tools.services import (
    ToolDefinition,
    find_violations,
    get_tool_registry,
    summarize_violations,
)
from traces.services import (
    SpanKind,
    SpanStatus,
    TraceRecorder,
    mask_for_storage,
    seal,
    unseal,
)
from traces.span_records import ApprovalDecision, PolicyCheck

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


def held_arguments(run: Run, approval: policy.ToolApproval) -> dict[str, Any] | None:
    """The clear arguments an approval round was asked about: the model's own for the first
    round (from the conversation), an earlier approver's edit, sealed with the round, for the
    next ones. None if they cannot be read back as held."""
    if approval.round > 1:
        arguments = unseal(approval.sealed_arguments, None)
    else:
        calls = (c for m in load_run_messages(run) if m.role == "assistant" for c in m.tool_calls)
        call = next((c for c in calls if c.id == approval.call_id), None)
        arguments = call.arguments if call is not None else None
    if not isinstance(arguments, dict):
        return None
    if approval.round > 1 and policy.hash_arguments(arguments) != approval.arguments_sha256:
        return None
    return arguments


def edit_held_arguments(
    run: Run, approval: policy.ToolApproval, patch: dict[str, Any], approver: str
) -> policy.EditedArguments:
    """The arguments a held call runs with once approved with ``patch`` (a JSON Merge Patch
    over the arguments held, so an approver who sees them masked changes only what they
    name). An edit is a decision like the model's proposal: it is validated against the
    tool's schema, then put to the tenant's policy as it stands — the run's end user's ACL,
    the chain rules over the run's labels, the call rules over the edited arguments. A
    refusal by the policy is recorded as a refused ``policy_check`` span in the run's trace.
    Raises ``ApprovalEditRefused`` (schema) or ``ApprovalEditRefusedByPolicy`` (a rule)."""
    call_id = approval.call_id
    tool = get_tool_registry().get(approval.tool)
    held = held_arguments(run, approval) if tool is not None else None
    if tool is None or held is None:
        raise ApprovalEditRefused(
            f"No held call {call_id} with readable arguments in this run.", {"call_id": call_id}
        )
    edited = merge_patch(held, patch)
    violations = find_violations(tool, edited)
    if violations:
        raise ApprovalEditRefused(
            summarize_violations(tool.name, violations),
            {"call_id": call_id, "violations": violations},
        )
    refusal = _policy_refusal(run, tool, held, edited)
    if refusal is not None:
        _record_refused_edit(run, approval, approver, refusal)
        what = (
            f"the ACL for {run.user_id}"
            if refusal.check == "acl"
            else f"policy rule {refusal.rule_name}"
        )
        raise ApprovalEditRefusedByPolicy(
            f"{tool.name} with the edited arguments is refused by {what}: {refusal.reason}. "
            "Nothing was decided: the call still waits for a decision (approve it as held, "
            "deny it, or edit it otherwise).",
            {
                "call_id": call_id,
                "check": refusal.check,
                "rule": refusal.rule,
                "reason": refusal.reason,
                "policy_version": refusal.policy_version,
            },
        )
    shown = mask_for_storage(
        run.request_id, run.tenant.slug, edited, tool.sensitive.get("arguments")
    )
    return policy.EditedArguments(
        shown=shown, sha256=policy.hash_arguments(edited), sealed=seal(edited)
    )


def _policy_refusal(
    run: Run, tool: ToolDefinition, held: dict[str, Any], edited: dict[str, Any]
) -> PolicyCheck | None:
    """The policy's refusal of the edited call, in the decision chain's order (ACL → chain
    rules → call rules), or None. A require_approval rule the held arguments did not match
    is no refusal: the engine holds the call again for it when the run resumes."""
    tenant = run.tenant.slug
    decision = policy.authorize_scopes(tenant, run.user_id, tool.access)
    if not decision.allowed:
        return PolicyCheck(
            "",
            tool.name,
            "acl",
            refused=True,
            allowed=False,
            rule=list(decision.rule),
            reason=decision.reason,
            policy_version=decision.version,
        )
    key = policy.current_version_key(tenant)
    rules = policy.rules_for(tenant, key)
    labels = {label.label: label for label in policy.list_labels(str(run.id))}
    chain = policy.evaluate_chain_rules(rules, key[0], tool.name, tool.carries, tool.sink, labels)
    if chain.effect == policy.RuleEffect.REFUSE:
        return _rule_check(tool, "chain", chain)
    verdicts = {
        name: policy.call_rule_verdicts(rules, key[0], tool.name, tool.approval, arguments)
        for name, arguments in (("held", held), ("edited", edited))
    }
    gate = recheck_call_rules(verdicts["held"], verdicts["edited"])
    if gate is not None and gate[0] == "refuse":
        return _rule_check(tool, "call_rule", gate[1])
    return None


def _rule_check(tool: ToolDefinition, check: str, verdict: policy.RuleVerdict) -> PolicyCheck:
    return PolicyCheck(
        "",
        tool.name,
        check,
        refused=True,
        allowed=False,
        rule=verdict.rule,
        reason=verdict.reason,
        policy_version=verdict.version,
    )


def _record_refused_edit(
    run: Run, approval: policy.ToolApproval, approver: str, refusal: PolicyCheck
) -> None:
    """The refused edit in the run's trace: a refused ``policy_check`` span naming the rule,
    the call, the approver and the edited arguments' round (written at once: the request
    that tried it fails, the record stays)."""
    check = replace(
        refusal,
        call_id=approval.call_id,
        extra={"edit_refused": True, "edited_by": approver, "round": approval.round},
    )
    name = f"{check.check} {approval.tool}"
    if not _write_span(run, SpanKind.POLICY_CHECK, name, check, SpanStatus.REFUSED):
        logger.warning("could not record the refused edit of %s", approval)


def _write_span(
    run: Run, kind: str, name: str, record: PolicyCheck | ApprovalDecision, status: str
) -> bool:
    """A span of ``run`` written at once, outside any drive (a decision arrives while the run
    waits); False if three tries lost the race for the next sequence number to another
    decision of the run."""
    for _attempt in range(3):
        try:
            tracer = TraceRecorder(run.request_id, run.tenant.slug)
            span = tracer.start(kind, name, **record.attributes())
            span.status = status
            tracer.end(span)
            return True
        except IntegrityError:
            continue
    return False


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
    decision = ApprovalDecision(
        call_id=approval.call_id,
        tool=approval.tool,
        decision=approval.status,
        decided_by=approval.decided_by,
        comment=approval.comment,
        rule=approval.rule,
        policy_version=approval.policy_version,
        arguments_sha256=approval.arguments_sha256,
        requested_at=approval.created_at.isoformat(),
        # Held again for an approver's edit: which round (the first says none).
        round=approval.round if approval.round > 1 else None,
    )
    approved = approval.status == policy.ApprovalStatus.APPROVED
    status = SpanStatus.OK if approved else SpanStatus.REFUSED
    name = f"{approval.status} {approval.tool}"
    if not _write_span(run, SpanKind.APPROVAL, name, decision, status):
        logger.warning("could not record the approval span of %s", approval)
