"""Deciding and executing the tool calls of one step, in the order DESIGN.md fixes:
the tool exists and is enabled for the agent → ACL (before the arguments are parsed) → chain
rules → arguments parse → JSON Schema → call rules and approval → tool-call limits →
execution (allowed calls together, in parallel where safe). Every refusal becomes a structured
error for the model and a span; nothing raises. A call held for a human's approval has no
result yet: its message is ``None`` and the loop pauses the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.messages import Message, ToolCall
from harness.agent_registry import AgentSpec
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
    summarize_violations,
)
from traces.services import AuditKind, OpenSpan, SpanKind, SpanStatus, TraceRecorder, under


@dataclass(frozen=True)
class CallScope:
    """Who the calls of one run act for, and where they are recorded."""

    tenant: str
    user_id: str
    run_id: str
    agent: AgentSpec
    registry: ToolRegistry
    tracer: TraceRecorder
    parent: OpenSpan


def visible_tools(
    agent: AgentSpec, registry: ToolRegistry, tenant: str, user: str
) -> list[ToolDefinition]:
    """The agent's enabled tools that this user may call: the only ones the model is shown."""
    tools = []
    for name in agent.tools:
        tool = registry.get(name)
        if tool and tool.enabled and policy.authorize_scopes(tenant, user, tool.access).allowed:
            tools.append(tool)
    return tools


def declared_argument_pointers(calls: list[ToolCall], registry: ToolRegistry) -> dict[str, str]:
    """The tool files' sensitive argument fields, as pointers into a model response's calls."""
    pointers: dict[str, str] = {}
    for position, call in enumerate(calls):
        tool = registry.get(call.name)
        if tool is not None:
            pointers |= under(f"/tool_calls/{position}/arguments", tool.sensitive.get("arguments"))
    return pointers


def handle_tool_calls(
    calls: Sequence[ToolCall], scope: CallScope
) -> list[tuple[Message | None, bool]]:
    """Decide each call, execute the allowed ones together; results in the order of ``calls``.

    Each result is the tool-result message and whether the call succeeded; a call held for a
    human's approval has no message yet (``None``) and the loop pauses the run.
    """
    results: list[tuple[Message | None, bool] | None] = []
    allowed: list[tuple[int, ToolCall, PlannedCall]] = []
    for call in calls:
        decided = _decide(call, scope)
        if isinstance(decided, PlannedCall):
            allowed.append((len(results), call, decided))
            results.append(None)
        else:
            results.append(decided)
    executed = _execute([(call, planned) for _, call, planned in allowed], scope)
    for (position, _, _), result in zip(allowed, executed, strict=True):
        results[position] = result
    return [result for result in results if result is not None]


def handle_tool_call(call: ToolCall, scope: CallScope) -> tuple[Message | None, bool]:
    """Decide and run one call; the tool-result message (``None`` while held for approval)
    and whether the call succeeded."""
    return handle_tool_calls([call], scope)[0]


@dataclass(frozen=True)
class PolicyQuestions:
    """How a call's decision asks the policy: live (the engine and the run's labels in the
    database, recording a span per ACL decision) or dry (a policy snapshot and labels kept in
    memory, for replay and what-if)."""

    acl: Callable[[ToolCall, ToolDefinition], policy.Decision]
    chain: Callable[[ToolDefinition], policy.RuleVerdict]
    callable_tools: Callable[[], list[str]]


@dataclass(frozen=True)
class Precheck:
    """The checks before the call rules, in order: tool enabled → ACL → chain rules →
    arguments parse → JSON Schema. ``check`` names the one that refused ("" if none)."""

    tool: ToolDefinition | None = None
    check: str = ""
    error: ToolCallError | None = None
    chain: policy.RuleVerdict | None = None
    violations: tuple[dict[str, str], ...] = ()


def precheck_call(
    call: ToolCall, agent: AgentSpec, registry: ToolRegistry, ask: PolicyQuestions
) -> Precheck:
    """Run the checks before the call rules; asks the policy only through ``ask``."""
    tool = registry.get(call.name)
    if tool is None or call.name not in agent.tools or not tool.enabled:
        return Precheck(tool, "tool_enabled", unknown_tool_error(call, ask.callable_tools()))
    decision = ask.acl(call, tool)
    if not decision.allowed:
        return Precheck(tool, "acl", acl_error(call, decision))
    chain = ask.chain(tool)
    if chain.effect == policy.RuleEffect.REFUSE:
        return Precheck(tool, "chain", rule_error(call, chain), chain)
    if call.arguments is None:
        error = ToolCallError(
            ToolErrorCode.INVALID_ARGUMENTS_JSON,
            f"The arguments for {call.name} could not be read: {call.parse_error}. "
            "Send them as one JSON object.",
            {"tool": call.name, "received": call.raw_arguments[:500]},
        )
        return Precheck(tool, "arguments_json", error, chain)
    violations = find_violations(tool, call.arguments)
    if violations:
        error = ToolCallError(
            ToolErrorCode.INVALID_ARGUMENTS,
            summarize_violations(call.name, violations),
            {"tool": call.name, "violations": violations},
        )
        return Precheck(tool, "schema", error, chain, tuple(violations))
    return Precheck(tool, "", None, chain)


def rule_gate(
    verdict: policy.RuleVerdict, chain: policy.RuleVerdict
) -> tuple[str, policy.RuleVerdict] | None:
    """After the call rules: ("refuse", rule), ("hold", rule) for approval, or None."""
    if verdict.effect == policy.RuleEffect.REFUSE:
        return "refuse", verdict
    if not verdict.allowed or chain.effect == policy.RuleEffect.REQUIRE_APPROVAL:
        return "hold", verdict if not verdict.allowed else chain
    return None


def unknown_tool_error(call: ToolCall, callable_now: list[str]) -> ToolCallError:
    return ToolCallError(
        ToolErrorCode.UNKNOWN_TOOL,
        f"There is no tool {call.name!r} you can call. Tools you can call: "
        f"{', '.join(callable_now) or 'none'}.",
        {"tool": call.name, "available": callable_now},
    )


def acl_error(call: ToolCall, decision: policy.Decision) -> ToolCallError:
    return ToolCallError(
        ToolErrorCode.PERMISSION_DENIED,
        f"You may not call {call.name} for this user: {decision.reason}.",
        {"tool": call.name, "scope": decision.scope},
    )


def rule_error(call: ToolCall, verdict: policy.RuleVerdict) -> ToolCallError:
    return ToolCallError(
        ToolErrorCode.POLICY_REFUSED,
        f"{call.name} was refused by policy rule {verdict.rule}: {verdict.reason}.",
        {"tool": call.name} | verdict.attributes(),
    )


def limit_error(call: ToolCall, rule: str, reason: str) -> ToolCallError:
    return ToolCallError(
        ToolErrorCode.LIMIT_EXCEEDED,
        f"{call.name} was not run: {reason}. Answer with what you have.",
        {"tool": call.name, "limit": rule},
    )


def _live_questions(scope: CallScope) -> PolicyQuestions:
    def acl(call: ToolCall, tool: ToolDefinition) -> policy.Decision:
        decision = policy.authorize_scopes(scope.tenant, scope.user_id, tool.access)
        _record_check(
            scope,
            call,
            "acl",
            refused=not decision.allowed,
            scopes=list(tool.access),
            allowed=decision.allowed,
            reason=decision.reason,
            rule=list(decision.rule),
            policy_version=decision.version,
        )
        return decision

    return PolicyQuestions(
        acl=acl,
        chain=lambda tool: policy.check_chain_rules(
            scope.tenant, scope.run_id, tool.name, tool.carries, tool.sink
        ),
        callable_tools=lambda: [
            t.name for t in visible_tools(scope.agent, scope.registry, scope.tenant, scope.user_id)
        ],
    )


def _decide(call: ToolCall, scope: CallScope) -> tuple[Message | None, bool] | PlannedCall:
    """A refusal (message, False), a hold for approval (None, False), or the call ready to
    execute."""
    pre = precheck_call(call, scope.agent, scope.registry, _live_questions(scope))
    if pre.check == "acl":
        return _tool_message(call, error=pre.error), False
    if pre.check == "chain":
        return _refuse_by_rule(call, scope, pre.chain, "chain")
    if pre.check:
        return _refuse(call, scope, pre.error, rule=pre.check)
    tool = pre.tool
    gated = _approval_and_limits(call, tool, scope, pre.chain)
    if gated is not None:
        return gated
    context = ToolContext(
        tenant=scope.tenant,
        user_id=scope.user_id,
        run_id=scope.run_id,
        call_id=call.id,
        idempotency_key=f"{scope.run_id}:{call.id}",
    )
    return PlannedCall(tool=tool, arguments=call.arguments, context=context)


def _execute(
    batch: list[tuple[ToolCall, PlannedCall]], scope: CallScope
) -> list[tuple[Message, bool]]:
    """Execute allowed calls; each gets a tool_call span and a tool_io audit record."""
    spans: dict[int, OpenSpan] = {}
    messages: dict[int, tuple[Message, bool]] = {}

    def on_start(index: int) -> None:
        call = batch[index][0]
        spans[index] = scope.tracer.start(
            SpanKind.TOOL_CALL, call.name, scope.parent, call_id=call.id, tool=call.name
        )

    def on_finish(index: int, outcome: ToolOutcome) -> None:
        call, planned = batch[index]
        messages[index] = _record_outcome(call, planned, outcome, spans[index], scope)

    execute_tool_calls([planned for _, planned in batch], on_start=on_start, on_finish=on_finish)
    return [messages[index] for index in range(len(batch))]


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
        },
        sensitive=under("/arguments", planned.tool.sensitive.get("arguments"))
        | under("/result", planned.tool.sensitive.get("result")),
    )
    scope.tracer.end(span)
    if outcome.error:
        return _tool_message(call, error=outcome.error), False
    return _tool_message(call, result=shown), True


def _record_check(
    scope: CallScope, call: ToolCall, check: str, refused: bool, **attributes: Any
) -> None:
    """A ``policy_check`` span for one decision about ``call``, and the same decision as a
    chained audit record: which rule allowed or refused what is tamper-evident too."""
    with scope.tracer.span(
        SpanKind.POLICY_CHECK,
        f"{check} {call.name}",
        scope.parent,
        call_id=call.id,
        tool=call.name,
        check=check,
        **attributes,
    ) as span:
        if refused:
            span.fail(SpanStatus.REFUSED)
        scope.tracer.audit(
            span,
            AuditKind.POLICY_DECISION,
            {"call_id": call.id, "tool": call.name, "check": check, "refused": refused}
            | attributes,
        )


def _refuse(
    call: ToolCall, scope: CallScope, error: ToolCallError, rule: str
) -> tuple[Message, bool]:
    _record_check(scope, call, rule, refused=True, allowed=False, error=error.to_dict())
    return _tool_message(call, error=error), False


def _tool_message(
    call: ToolCall, result: Any = None, error: ToolCallError | None = None
) -> Message:
    body = {"ok": False, "error": error.to_dict()} if error else {"ok": True, "result": result}
    return Message(
        role="tool",
        content=json.dumps(body, ensure_ascii=False, default=str),
        tool_call_id=call.id,
        name=call.name,
        is_error=error is not None,
    )


# The message the model is shown for a call: replay builds the same ones.
tool_message = _tool_message


# --- Policy checks after the ACL: chain and call rules, approvals, limits (issue 5) ----------


def _approval_and_limits(
    call: ToolCall, tool: ToolDefinition, scope: CallScope, chain: policy.RuleVerdict
) -> tuple[Message | None, bool] | None:
    """Call rules and approvals, then the tool-call limits; ``None`` means "execute it"."""
    arguments = call.arguments or {}
    approval = policy.find_approval(scope.run_id, call.id)
    if approval is None:
        verdict = policy.check_call_rules(scope.tenant, tool.name, tool.approval, arguments)
        gate = rule_gate(verdict, chain)
        if gate is not None:
            if gate[0] == "refuse":
                return _refuse_by_rule(call, scope, gate[1], "call_rule")
            return _hold(call, tool, scope, gate[1])
    elif approval.status == policy.ApprovalStatus.PENDING:
        return None, False
    elif (
        approval.status != policy.ApprovalStatus.APPROVED
        or policy.hash_arguments(arguments) != approval.arguments_sha256
    ):
        return _refuse_unapproved(call, scope, approval)
    refusal = policy.admit_tool_call(scope.tenant, scope.run_id, tool.name)
    if refusal is not None:
        return _refuse(call, scope, limit_error(call, refusal.rule, refusal.reason), rule="limit")
    # The run holds the labels from now on, even if the call then fails: it may have read.
    policy.note_labels(scope.run_id, call.id, tool.name, tool.carries)
    return None


def declared_arguments(tool: ToolDefinition) -> dict[str, str]:
    return tool.sensitive.get("arguments") or {}


def _hold(
    call: ToolCall, tool: ToolDefinition, scope: CallScope, verdict: policy.RuleVerdict
) -> tuple[Message | None, bool]:
    approval = policy.hold_for_approval(
        tenant=scope.tenant,
        run_id=scope.run_id,
        call_id=call.id,
        tool=call.name,
        user_id=scope.user_id,
        arguments=call.arguments or {},
        # Approvers see the arguments masked; the decision binds to the clear ones' hash.
        display_arguments=scope.tracer.mask(call.arguments or {}, declared_arguments(tool)),
        rule=verdict.rule,
        reason=verdict.reason,
        policy_version=verdict.version,
        self_approval=tool.self_approval,  # four eyes unless the tool file says otherwise
    )
    _record_check(
        scope,
        call,
        "approval",
        refused=False,
        held=True,
        approval_id=approval.pk,
        arguments_sha256=approval.arguments_sha256,
        expires_at=approval.expires_at.isoformat(),
        **verdict.attributes(),
    )
    return None, False


def _refuse_by_rule(
    call: ToolCall, scope: CallScope, verdict: policy.RuleVerdict, check: str
) -> tuple[Message, bool]:
    error = rule_error(call, verdict)
    _record_check(scope, call, check, refused=True, allowed=False, **verdict.attributes())
    return _tool_message(call, error=error), False


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
    _record_check(
        scope,
        call,
        "approval",
        refused=True,
        allowed=False,
        approval=approval.status,
        decided_by=approval.decided_by,
        rule=approval.rule,
        policy_version=approval.policy_version,
    )
    return _tool_message(call, error=error), False
