"""Deciding and executing the tool calls of one step, live.

Each call is decided by the shared decision chain (``decide_call``), through its live ports
(``LivePorts``): the tenant's policy as this drive caches it (``DrivePolicy``) and the run's
guard, which counts the tool-call limits. Here a decision becomes what the engine does: its
policy checks recorded as spans and audit records, a held call's approval noted, a refusal's
structured error for the model; the allowed calls run together (in parallel where safe).
Nothing raises. A call held for a human's approval has no result yet: its message is ``None``
and the driver pauses the run.

Spans and audit records go to the run's buffered recorder, and held approvals and new labels
to ``DrivePolicy``: all are written with the step, in its fenced transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from gateway.messages import Message, ToolCall
from harness.agent_registry import AgentSpec
from harness.engine.decisions import (
    CallApproval,
    Decision,
    LimitRefusal,
    Outcome,
    ToolCallCount,
    callable_tools,
    decide_call,
    tool_message,
)
from harness.engine.guard import RunGuard
from policy import services as policy
from tools.services import (
    PlannedCall,
    ToolContext,
    ToolDefinition,
    ToolOutcome,
    ToolRegistry,
    execute_tool_calls,
    result_for_model,
    store_outcome,
)
from traces.services import (
    AuditKind,
    OpenSpan,
    SpanKind,
    SpanStatus,
    TraceRecorder,
    seal,
    under,
)
from traces.span_records import PolicyCheck, ToolCallSpan


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

    def rules(self) -> tuple[policy.RuleSpec, ...]:
        return policy.rules_for(self.tenant, self.version_key)

    def approval_state(self, call_id: str) -> CallApproval | None:
        """The call's latest approval round, and who last edited its arguments (in that round
        or, for a call held again for an edit, an earlier one)."""
        latest = self.approvals.get(call_id)
        if latest is None:
            return None
        if latest.edited_arguments_sha256:
            return CallApproval(latest, latest.decided_by)
        return CallApproval(latest, self.editors.get(call_id, ""))

    def hold_labels(self, labels: list[policy.HeldLabelValue]) -> None:
        for held in labels:
            self.held[held.label] = held
        self.new_labels += labels

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
    """Put each call through the decision chain and act on its decision; nothing runs yet."""
    decided = Decided()
    ports = LivePorts(scope.agent, scope.registry, scope.policy, scope.guard)
    for call in calls:
        outcome = _act_on(call, decide_call(call, ports), scope)
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
        opened = ToolCallSpan(call_id=call.id, tool=call.name)
        spans[index] = scope.tracer.start(
            SpanKind.TOOL_CALL, call.name, scope.parent, **opened.attributes()
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


@dataclass(frozen=True)
class LivePorts:
    """``decide_call``'s ports, live: the drive's policy (ACL decisions and rules cached per
    policy version, the run's approvals and labels) and the run's guard (its tool-call
    limits, counted in memory; the tenant's daily count, charged where it is kept)."""

    agent: AgentSpec
    registry: ToolRegistry
    drive: DrivePolicy
    guard: RunGuard

    @property
    def policy_version(self) -> int:
        return self.drive.version

    @property
    def labels(self) -> dict[str, Any]:
        return self.drive.held

    def acl(self, tool: ToolDefinition) -> policy.Decision:
        return self.drive.authorize(tool)

    def rules(self) -> tuple[policy.RuleSpec, ...]:
        return self.drive.rules()

    def approval(self, call_id: str) -> CallApproval | None:
        return self.drive.approval_state(call_id)

    def hold_granted(self, call: ToolCall) -> bool:
        return False  # a call held now waits for a human

    def tool_calls(self, tool: str) -> ToolCallCount:
        return self.guard.tool_calls(tool)

    def charge_tool_call(self, tool: str) -> LimitRefusal | None:
        return self.guard.charge_tool_call(tool)

    def hold_labels(self, labels: list[policy.HeldLabelValue]) -> None:
        self.drive.hold_labels(labels)


def _act_on(
    call: ToolCall, decision: Decision, scope: CallScope
) -> tuple[Message | None, bool] | PlannedCall:
    """A decision as the engine acts on it: its policy checks recorded (spans and audit
    records), a held call's approval noted; returns a refusal (message, False), a hold
    (None, False), or the call ready to execute."""
    checks = decision.checks
    if decision.outcome == Outcome.HELD:
        checks = (*checks[:-1], _hold(call, decision, scope))
    for check in checks:
        _record_check(scope, call, check)
    edited = (decision.edited_by, decision.arguments or {}) if decision.edited_by else None
    if decision.outcome == Outcome.REFUSED:
        return tool_message(call, error=decision.error, edited=edited), False
    if decision.outcome != Outcome.RUN:
        return None, False
    if edited is not None:
        scope.policy.edits[call.id] = edited
    context = ToolContext(
        tenant=scope.tenant,
        user_id=scope.user_id,
        run_id=scope.run_id,
        call_id=call.id,
        idempotency_key=f"{scope.run_id}:{call.id}",
    )
    # A call that runs has its tool and its arguments.
    tool, arguments = cast(ToolDefinition, decision.tool), cast(dict, decision.arguments)
    return PlannedCall(tool=tool, arguments=arguments, context=context)


def _hold(call: ToolCall, decision: Decision, scope: CallScope) -> PolicyCheck:
    """A held call's approval round, built and noted (written with the step: fenced, a
    driver that lost the run leaves none); returns the hold's policy check with what names
    the approval, which has no row id until the step commits it."""
    # A held call has its tool, the rule that holds it, and its arguments.
    tool, verdict = cast(ToolDefinition, decision.tool), cast(policy.RuleVerdict, decision.verdict)
    arguments, earlier = cast(dict, decision.arguments), decision.approval
    # Held again for an approver's edit: the next round, for the edited arguments (sealed
    # with it: they are not in the conversation).
    again = (
        {} if earlier is None else {"round": earlier.round + 1, "sealed_arguments": seal(arguments)}
    )
    approval = policy.build_approval(
        tenant=scope.tenant,
        run_id=scope.run_id,
        call_id=call.id,
        tool=call.name,
        user_id=scope.user_id,
        arguments=arguments,
        # Approvers see the arguments masked; the decision binds to the clear ones' hash.
        display_arguments=scope.tracer.mask(arguments, tool.sensitive.get("arguments") or {}),
        rule=verdict.rule,
        reason=verdict.reason,
        policy_version=verdict.version,
        self_approval=tool.self_approval,  # four eyes unless the tool file says otherwise
        **again,
    )
    scope.policy.hold(approval)
    extra = {
        "arguments_sha256": approval.arguments_sha256,
        "expires_at": approval.expires_at.isoformat(),
    }
    if earlier is not None:
        extra |= {"round": approval.round, "edited_by": decision.edited_by}
    held = decision.checks[-1]
    return replace(held, extra=held.extra | extra)


def _record_outcome(
    call: ToolCall, planned: PlannedCall, outcome: ToolOutcome, span: OpenSpan, scope: CallScope
) -> tuple[Message, bool]:
    key = planned.context.idempotency_key
    shown, digested = (
        result_for_model(planned.tool, outcome.result) if outcome.ok else (None, False)
    )
    ended = ToolCallSpan(
        duration_ms=outcome.duration_ms,
        idempotency_key=key,
        attempts=outcome.attempts,
        replayed=outcome.replayed,
        result_digest=digested,
        error_code=str(outcome.error.code) if outcome.error else None,
        # What the executor replaced in the tool's answer is said where the answer is kept.
        normalised=outcome.normalised or None,
    )
    span.set(**ended.attributes())
    if outcome.error:
        span.fail(SpanStatus.ERROR)
    normalised = {"normalised": outcome.normalised} if outcome.normalised else {}
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
