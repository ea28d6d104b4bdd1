"""Deciding and executing the tool calls of one step, live.

Each call goes through the shared decision chain (``harness.engine.decisions``), asking the
tenant's policy as this drive caches it (``DrivePolicy``), then approvals and the tool-call
limits; the allowed ones run together (in parallel where safe). Every refusal becomes a
structured error for the model and a span; nothing raises. A call held for a human's approval
has no result yet: its message is ``None`` and the driver pauses the run.

Spans and audit records go to the run's buffered recorder, and held approvals and new labels
to ``DrivePolicy``: all are written with the step, in its fenced transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gateway.messages import Message, ToolCall
from harness.agent_registry import AgentSpec
from harness.engine.decisions import (
    PolicyQuestions,
    callable_tools,
    limit_error,
    precheck_call,
    recheck_call_rules,
    rule_error,
    rule_gate,
    tool_message,
)
from harness.engine.guard import RunGuard
from harness.engine.span_records import PolicyCheck
from policy import services as policy
from tools.errors import ToolCallError, ToolErrorCode
from tools.services import (
    PlannedCall,
    ToolContext,
    ToolDefinition,
    ToolOutcome,
    ToolRegistry,
    execute_tool_calls,
    find_violations,
    result_for_model,
    store_outcome,
    summarize_violations,
)
from traces.services import (
    AuditKind,
    OpenSpan,
    SpanKind,
    SpanStatus,
    TraceRecorder,
    seal,
    under,
    unseal,
)


@dataclass
class DrivePolicy:
    """The tenant's policy as one drive of a run uses it: ACL decisions, visible tools and
    rules read once and again only when the policy version moves (checked once per step);
    the run's approvals and labels read once, new labels and held approvals noted in memory
    and written with the step."""

    tenant: str
    user_id: str
    run_id: str
    version_key: tuple[int, str] = (-1, "")
    _acl: dict[tuple[str, ...], policy.Decision] = field(default_factory=dict)
    approvals: dict[str, policy.ToolApproval] = field(default_factory=dict)
    held: dict[str, Any] = field(default_factory=dict)
    new_labels: list[policy.HeldLabelValue] = field(default_factory=list)
    new_approvals: list[policy.ToolApproval] = field(default_factory=list)
    # Calls approved with edits: who edited, and the arguments the call runs with.
    edits: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    # Who last edited each call's arguments in an earlier approval round (a call held again
    # for its edited arguments runs with them, and the model is told whose they are).
    editors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, tenant: str, user_id: str, run_id: str, new: bool = False) -> DrivePolicy:
        """``new``: the run's first drive, which has no approvals or labels to read."""
        loaded = cls(tenant, user_id, run_id)
        if not new:
            approvals = sorted(policy.list_approvals(tenant, run_id), key=lambda a: a.round)
            # A call's latest round is the one that counts.
            loaded.approvals = {a.call_id: a for a in approvals}
            loaded.editors = {
                a.call_id: a.decided_by for a in approvals if a.edited_arguments_sha256
            }
            loaded.held = {label.label: label for label in policy.list_labels(run_id)}
        loaded.moved_to(policy.current_version_key(tenant))
        return loaded

    def moved_to(self, key: tuple[int, str]) -> None:
        """The tenant's policy version as last read (each step's commit reads it in passing):
        the decisions cached under another version are forgotten."""
        if key != self.version_key:
            self._acl.clear()
            self.version_key = key

    @property
    def version(self) -> int:
        return self.version_key[0]

    def authorize(self, tool: ToolDefinition) -> policy.Decision:
        scopes = tuple(tool.access)
        decision = self._acl.get(scopes)
        if decision is None:
            decision = policy.authorize_scopes(self.tenant, self.user_id, scopes)
            self._acl[scopes] = decision
        return decision

    def visible_tools(self, agent: AgentSpec, registry: ToolRegistry) -> list[ToolDefinition]:
        return callable_tools(agent, registry, lambda tool: self.authorize(tool).allowed)

    def chain(self, tool: ToolDefinition) -> policy.RuleVerdict:
        rules = policy.rules_for(self.tenant, self.version_key)
        return policy.evaluate_chain_rules(
            rules, self.version, tool.name, tool.carries, tool.sink, self.held
        )

    def call_rules(self, tool: ToolDefinition, arguments: dict[str, Any]) -> policy.RuleVerdict:
        rules = policy.rules_for(self.tenant, self.version_key)
        return policy.evaluate_call_rules(rules, self.version, tool.name, tool.approval, arguments)

    def call_rule_verdicts(
        self, tool: ToolDefinition, arguments: dict[str, Any]
    ) -> list[policy.RuleVerdict]:
        rules = policy.rules_for(self.tenant, self.version_key)
        return policy.call_rule_verdicts(rules, self.version, tool.name, tool.approval, arguments)

    def note_labels(self, call_id: str, tool: ToolDefinition) -> None:
        for label in tool.carries:
            if label not in self.held:
                held = policy.HeldLabelValue(label, call_id, tool.name)
                self.held[label] = held
                self.new_labels.append(held)

    def hold(self, approval: policy.ToolApproval) -> None:
        """A call held for approval: the approval counts from now on in this drive, and is
        written with the step (fenced: a driver that lost the run leaves none)."""
        self.approvals[approval.call_id] = approval
        self.new_approvals.append(approval)

    def waiting(self) -> list[policy.ToolApproval]:
        """The run's approvals still pending, as this drive knows them (held ones included,
        written or not)."""
        return [a for a in self.approvals.values() if a.status == policy.ApprovalStatus.PENDING]

    def write_noted(self) -> None:
        """Inside the step's transaction: the labels and held approvals noted since."""
        labels, self.new_labels = self.new_labels, []
        approvals, self.new_approvals = self.new_approvals, []
        policy.record_labels(self.run_id, labels)
        policy.save_approvals(approvals)


@dataclass(frozen=True)
class CallScope:
    """Who the calls of one run act for, what limits them, and where they are recorded."""

    tenant: str
    user_id: str
    run_id: str
    agent: AgentSpec
    registry: ToolRegistry
    tracer: TraceRecorder
    parent: OpenSpan
    policy: DrivePolicy
    guard: RunGuard
    # The run's first drive: none of its calls was executed before (``Lease.first``).
    first_drive: bool = False


def declared_argument_pointers(calls: list[ToolCall], registry: ToolRegistry) -> dict[str, str]:
    """The tool files' sensitive argument fields, as pointers into a model response's calls."""
    pointers: dict[str, str] = {}
    for position, call in enumerate(calls):
        tool = registry.get(call.name)
        if tool is not None:
            pointers |= under(f"/tool_calls/{position}/arguments", tool.sensitive.get("arguments"))
    return pointers


@dataclass
class Decided:
    """The calls of a step after the policy: results (refusals) and holds in the model's
    order, and the calls ready to execute."""

    results: dict[str, tuple[Message, bool]] = field(default_factory=dict)
    held: list[ToolCall] = field(default_factory=list)
    allowed: list[tuple[ToolCall, PlannedCall]] = field(default_factory=list)
    # How each execution ended, to store under its key with the step that records it.
    outcomes: list[tuple[PlannedCall, int, ToolOutcome]] = field(default_factory=list)

    def store_outcomes(self) -> None:
        """Inside the step's transaction; reads nothing back (``StepWrites.inside_blind``)."""
        outcomes, self.outcomes = self.outcomes, []
        for planned, record_id, outcome in outcomes:
            store_outcome(planned, record_id, outcome)


def decide_tool_calls(calls: Sequence[ToolCall], scope: CallScope) -> Decided:
    """Put each call through the policy; nothing runs yet."""
    decided = Decided()
    for call in calls:
        outcome = _decide(call, scope)
        if isinstance(outcome, PlannedCall):
            decided.allowed.append((call, outcome))
        elif outcome[0] is None:
            decided.held.append(call)
        else:
            decided.results[call.id] = (outcome[0], outcome[1])
    return decided


def execute_decided(decided: Decided, scope: CallScope) -> None:
    """Execute the allowed calls; each gets a tool_call span and a tool_io audit record, and
    its result joins ``decided.results``."""
    batch = decided.allowed
    spans: dict[int, OpenSpan] = {}

    def on_start(index: int) -> None:
        call = batch[index][0]
        spans[index] = scope.tracer.start(
            SpanKind.TOOL_CALL, call.name, scope.parent, call_id=call.id, tool=call.name
        )

    def on_finish(index: int, outcome: ToolOutcome) -> None:
        call, planned = batch[index]
        decided.results[call.id] = _record_outcome(call, planned, outcome, spans[index], scope)

    execute_tool_calls(
        [planned for _, planned in batch],
        on_start=on_start,
        on_finish=on_finish,
        store=lambda planned, record_id, outcome: decided.outcomes.append(
            (planned, record_id, outcome)
        ),
        first_execution=scope.first_drive,
    )


def _questions(scope: CallScope) -> PolicyQuestions:
    def acl(call: ToolCall, tool: ToolDefinition) -> policy.Decision:
        decision = scope.policy.authorize(tool)
        check = PolicyCheck(
            call.id,
            call.name,
            "acl",
            refused=not decision.allowed,
            allowed=decision.allowed,
            rule=list(decision.rule),
            reason=decision.reason,
            policy_version=scope.policy.version,
            extra={"scopes": list(tool.access)},
        )
        _record_check(scope, call, check)
        return decision

    return PolicyQuestions(
        acl=acl,
        chain=scope.policy.chain,
        callable_tools=lambda: [
            t.name for t in scope.policy.visible_tools(scope.agent, scope.registry)
        ],
    )


def _decide(call: ToolCall, scope: CallScope) -> tuple[Message | None, bool] | PlannedCall:
    """A refusal (message, False), a hold for approval (None, False), or the call ready to
    execute."""
    pre = precheck_call(call, scope.agent, scope.registry, _questions(scope))
    if pre.check == "acl":
        return tool_message(call, error=pre.error), False
    if pre.check == "chain":
        return _refuse_by_rule(call, scope, pre.chain, "chain")
    if pre.check:
        return _refuse(call, scope, pre.error, rule=pre.check)
    tool = pre.tool
    gated = _approval_and_limits(call, tool, scope, pre.chain)
    if gated is not None:
        return gated
    arguments = scope.policy.edits.get(call.id, ("", call.arguments))[1]
    context = ToolContext(
        tenant=scope.tenant,
        user_id=scope.user_id,
        run_id=scope.run_id,
        call_id=call.id,
        idempotency_key=f"{scope.run_id}:{call.id}",
    )
    return PlannedCall(tool=tool, arguments=arguments, context=context)


def _record_outcome(
    call: ToolCall, planned: PlannedCall, outcome: ToolOutcome, span: OpenSpan, scope: CallScope
) -> tuple[Message, bool]:
    key = planned.context.idempotency_key
    shown, digested = (
        result_for_model(planned.tool, outcome.result) if outcome.ok else (None, False)
    )
    span.set(
        duration_ms=outcome.duration_ms,
        idempotency_key=key,
        attempts=outcome.attempts,
        replayed=outcome.replayed,
        result_digest=digested,
    )
    if outcome.error:
        span.fail(error_code=str(outcome.error.code))
    # What the executor replaced in the tool's answer is said where the answer is kept.
    normalised = {"normalised": outcome.normalised} if outcome.normalised else {}
    span.set(**normalised)
    # The audit keeps the whole result, even when the model is shown a digest.
    scope.tracer.audit(
        span,
        AuditKind.TOOL_IO,
        {
            "tool": call.name,
            "call_id": call.id,
            "status": "ok" if outcome.ok else "error",
            "proposed_arguments": call.raw_arguments,
            "arguments": planned.arguments,
            "result": outcome.result,
            "error": outcome.error.to_dict() if outcome.error else None,
            "traceback": outcome.traceback or None,
            "duration_ms": outcome.duration_ms,
            "idempotency_key": key,
            "attempts": outcome.attempts,
            "replayed": outcome.replayed,
            **normalised,
        },
        sensitive=under("/arguments", planned.tool.sensitive.get("arguments"))
        | under("/result", planned.tool.sensitive.get("result")),
    )
    scope.tracer.end(span)
    edited = scope.policy.edits.get(call.id)
    if outcome.error:
        return tool_message(call, error=outcome.error, edited=edited), False
    return tool_message(call, result=shown, edited=edited), True


def _record_check(scope: CallScope, call: ToolCall, check: PolicyCheck) -> None:
    """A ``policy_check`` span for one decision about ``call``, and the same decision as a
    chained audit record: which rule allowed or refused what is tamper-evident too."""
    attributes = check.attributes()
    with scope.tracer.span(
        SpanKind.POLICY_CHECK, f"{check.check} {call.name}", scope.parent, **attributes
    ) as span:
        if check.refused:
            span.fail(SpanStatus.REFUSED)
        scope.tracer.audit(span, AuditKind.POLICY_DECISION, attributes)


def _verdict_check(
    call: ToolCall, check: str, verdict: policy.RuleVerdict, **fields: Any
) -> PolicyCheck:
    """A rule's verdict on ``call`` as a policy check (the rule's label and source, if any,
    go along)."""
    attributes = verdict.attributes()
    known = {"rule": attributes.pop("rule"), "reason": attributes.pop("reason")}
    known["policy_version"] = attributes.pop("policy_version")
    return PolicyCheck(call.id, call.name, check, **known, **fields, extra=attributes)


def _refuse(
    call: ToolCall, scope: CallScope, error: ToolCallError, rule: str
) -> tuple[Message, bool]:
    check = PolicyCheck(
        call.id, call.name, rule, refused=True, allowed=False, error=error.to_dict()
    )
    _record_check(scope, call, check)
    return tool_message(call, error=error), False


def _approval_and_limits(
    call: ToolCall, tool: ToolDefinition, scope: CallScope, chain: policy.RuleVerdict
) -> tuple[Message | None, bool] | None:
    """Call rules and approvals, then the tool-call limits; ``None`` means "execute it"."""
    arguments = call.arguments or {}
    approval = scope.policy.approvals.get(call.id)
    if approval is None:
        verdict = scope.policy.call_rules(tool, arguments)
        gate = rule_gate(verdict, chain)
        if gate is not None:
            if gate[0] == "refuse":
                return _refuse_by_rule(call, scope, gate[1], "call_rule")
            return _hold(call, tool, scope, gate[1])
    elif approval.status == policy.ApprovalStatus.PENDING:
        return None, False
    elif approval.status != policy.ApprovalStatus.APPROVED:
        return _refuse_unapproved(call, scope, approval)
    else:
        decided = _redecide_approved(call, tool, scope, approval)
        if decided is not None:
            return decided
    refusal = scope.guard.admit_tool_call(tool.name)
    if refusal is not None:
        return _refuse(call, scope, limit_error(call, refusal.rule, refusal.reason), rule="limit")
    # The run holds the labels from now on, even if the call then fails: it may have read.
    scope.policy.note_labels(call.id, tool)
    return None


def _redecide_approved(
    call: ToolCall, tool: ToolDefinition, scope: CallScope, approval: policy.ToolApproval
) -> tuple[Message | None, bool] | None:
    """An approved call, re-decided before it runs: the arguments held must be the approved
    ones; an approver's edit is read back (``_read_edits``); then the call rules of today
    decide the arguments it would run with against the ones the approver was asked about
    (``recheck_call_rules``): a refusal refuses it (refusal beats approval), a require_approval
    rule only the edited arguments match holds it again for a new round. ``None``: run it."""
    held = _held_arguments(call, approval)
    if held is None:
        return _refuse_unapproved(call, scope, approval)
    runs_with = held
    if approval.edited_arguments_sha256:
        edited = _read_edits(call, tool, scope, approval)
        if not isinstance(edited, dict):
            return edited
        runs_with = edited
    editor = (
        approval.decided_by
        if approval.edited_arguments_sha256
        else scope.policy.editors.get(call.id, "")
    )
    gate = recheck_call_rules(
        scope.policy.call_rule_verdicts(tool, held),
        scope.policy.call_rule_verdicts(tool, runs_with),
    )
    changed = {"edited_by": editor, "round": approval.round} if editor else {}
    if gate is not None and gate[0] == "refuse":
        check = _verdict_check(call, "call_rule", gate[1], refused=True, allowed=False)
        _record_check(scope, call, replace(check, extra=check.extra | changed))
        edited_info = (editor, runs_with) if editor else None
        return tool_message(call, error=rule_error(call, gate[1]), edited=edited_info), False
    if gate is not None:
        return _hold_again(call, tool, scope, approval, runs_with, gate[1], editor)
    if not editor:
        return None
    check = PolicyCheck(
        call.id,
        call.name,
        "approval",
        allowed=True,
        rule=approval.rule,
        policy_version=approval.policy_version,
        decision=approval.status,
        decided_by=approval.decided_by,
        extra={
            "edited": True,
            "edited_by": editor,
            "round": approval.round,
            "arguments_sha256": approval.arguments_sha256,
            "edited_arguments_sha256": policy.hash_arguments(runs_with),
        },
    )
    _record_check(scope, call, check)
    scope.policy.edits[call.id] = (editor, runs_with)
    return None


def _held_arguments(call: ToolCall, approval: policy.ToolApproval) -> dict[str, Any] | None:
    """The arguments the approval round was asked about, if they are the ones it names: the
    model's own for the first round, an earlier approver's edit (sealed with the round) for
    the next ones."""
    held = call.arguments if approval.round == 1 else unseal(approval.sealed_arguments, None)
    if not isinstance(held, dict) or policy.hash_arguments(held) != approval.arguments_sha256:
        return None
    return held


def _read_edits(
    call: ToolCall, tool: ToolDefinition, scope: CallScope, approval: policy.ToolApproval
) -> dict[str, Any] | tuple[Message, bool]:
    """An approval with edits: the approver's arguments — read back from their sealed copy,
    checked against the hash the approval recorded and against the tool's schema of today —
    or the refusal if they cannot be."""
    edited = unseal(approval.sealed_edited_arguments, None)
    if not isinstance(edited, dict) or policy.hash_arguments(edited) != (
        approval.edited_arguments_sha256
    ):
        error = ToolCallError(
            ToolErrorCode.APPROVAL_DENIED,
            f"{call.name} was not run: the approver's changed arguments could not be read "
            "back as approved. Do not retry it; tell the user.",
            {"tool": call.name, "approval": approval.status, "rule": approval.rule},
        )
        return _refuse(call, scope, error, rule="approval")
    violations = find_violations(tool, edited)
    if violations:
        error = ToolCallError(
            ToolErrorCode.INVALID_ARGUMENTS,
            summarize_violations(call.name, violations),
            {"tool": call.name, "violations": violations, "edited_by": approval.decided_by},
        )
        return _refuse(call, scope, error, rule="schema")
    return edited


def _hold_again(
    call: ToolCall,
    tool: ToolDefinition,
    scope: CallScope,
    approval: policy.ToolApproval,
    arguments: dict[str, Any],
    verdict: policy.RuleVerdict,
    editor: str,
) -> tuple[Message | None, bool]:
    """The edited call matches a require_approval rule the held one did not: held again, as
    the next round, for the edited arguments (sealed with it: they are not in the
    conversation)."""
    again = policy.build_approval(
        tenant=scope.tenant,
        run_id=scope.run_id,
        call_id=call.id,
        tool=call.name,
        user_id=scope.user_id,
        arguments=arguments,
        display_arguments=scope.tracer.mask(arguments, tool.sensitive.get("arguments") or {}),
        rule=verdict.rule,
        reason=verdict.reason,
        policy_version=verdict.version,
        self_approval=tool.self_approval,
        round=approval.round + 1,
        sealed_arguments=seal(arguments),
    )
    scope.policy.hold(again)
    held = _verdict_check(call, "approval", verdict, held=True)
    extra = {
        "arguments_sha256": again.arguments_sha256,
        "expires_at": again.expires_at.isoformat(),
        "round": again.round,
        "edited_by": editor,
    }
    _record_check(scope, call, replace(held, extra=held.extra | extra))
    return None, False


def _hold(
    call: ToolCall, tool: ToolDefinition, scope: CallScope, verdict: policy.RuleVerdict
) -> tuple[Message | None, bool]:
    approval = policy.build_approval(
        tenant=scope.tenant,
        run_id=scope.run_id,
        call_id=call.id,
        tool=call.name,
        user_id=scope.user_id,
        arguments=call.arguments or {},
        # Approvers see the arguments masked; the decision binds to the clear ones' hash.
        display_arguments=scope.tracer.mask(
            call.arguments or {}, tool.sensitive.get("arguments") or {}
        ),
        rule=verdict.rule,
        reason=verdict.reason,
        policy_version=verdict.version,
        self_approval=tool.self_approval,  # four eyes unless the tool file says otherwise
    )
    scope.policy.hold(approval)
    # The approval is named by the run and the call id (it has no row id until the step
    # commits it).
    held = _verdict_check(call, "approval", verdict, held=True)
    extra = {
        "arguments_sha256": approval.arguments_sha256,
        "expires_at": approval.expires_at.isoformat(),
    }
    _record_check(scope, call, replace(held, extra=held.extra | extra))
    return None, False


def _refuse_by_rule(
    call: ToolCall, scope: CallScope, verdict: policy.RuleVerdict, check: str
) -> tuple[Message, bool]:
    error = rule_error(call, verdict)
    _record_check(scope, call, _verdict_check(call, check, verdict, refused=True, allowed=False))
    return tool_message(call, error=error), False


def _refuse_unapproved(
    call: ToolCall, scope: CallScope, approval: policy.ToolApproval
) -> tuple[Message, bool]:
    if approval.status == policy.ApprovalStatus.APPROVED:
        why = "its arguments differ from the approved ones"
    elif approval.status == policy.ApprovalStatus.EXPIRED:
        why = "nobody approved it before the approval expired"
    else:
        why = f"{approval.decided_by} denied it" + (
            f" ({approval.comment})" if approval.comment else ""
        )
    error = ToolCallError(
        ToolErrorCode.APPROVAL_DENIED,
        f"{call.name} was not run: {why}. Do not retry it; tell the user.",
        {"tool": call.name, "approval": approval.status, "rule": approval.rule},
    )
    check = PolicyCheck(
        call.id,
        call.name,
        "approval",
        refused=True,
        allowed=False,
        rule=approval.rule,
        policy_version=approval.policy_version,
        decision=approval.status,
        decided_by=approval.decided_by,
    )
    _record_check(scope, call, check)
    return tool_message(call, error=error), False
