"""Deciding and executing the tool calls of a step, in the order DESIGN.md fixes:
the tool exists and is enabled for the agent → ACL → arguments parse → JSON Schema →
execution. Every refusal becomes a structured error for the model and a span; nothing raises.

Decisions are taken call by call, in the model's order; the allowed calls are then executed
as one batch (concurrency-safe ones in parallel) and their results put back in that order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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


def handle_tool_calls(calls: Sequence[ToolCall], scope: CallScope) -> list[tuple[Message, bool]]:
    """Decide each call, execute the allowed ones together; results in the order of ``calls``.

    Each result is the tool-result message and whether the call succeeded.
    """
    results: list[tuple[Message, bool] | None] = []
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


def handle_tool_call(call: ToolCall, scope: CallScope) -> tuple[Message, bool]:
    """Decide and run one call; return the tool-result message and whether the call succeeded."""
    return handle_tool_calls([call], scope)[0]


def _decide(call: ToolCall, scope: CallScope) -> tuple[Message, bool] | PlannedCall:
    """A refusal (message, False), or the call ready to execute."""
    tool = scope.registry.get(call.name)
    if tool is None or call.name not in scope.agent.tools or not tool.enabled:
        return _refuse(call, scope, _unknown_tool_error(call, scope), rule="tool_enabled")
    decision = policy.authorize_scopes(scope.tenant, scope.user_id, tool.access)
    with scope.tracer.span(
        SpanKind.POLICY_CHECK,
        f"acl {call.name}",
        scope.parent,
        call_id=call.id,
        tool=call.name,
        check="acl",
        scopes=list(tool.access),
        allowed=decision.allowed,
        reason=decision.reason,
        rule=list(decision.rule),
        policy_version=decision.version,
    ) as span:
        if not decision.allowed:
            span.fail(SpanStatus.REFUSED)
    if not decision.allowed:
        error = ToolCallError(
            ToolErrorCode.PERMISSION_DENIED,
            f"You may not call {call.name} for this user: {decision.reason}.",
            {"tool": call.name, "scope": decision.scope},
        )
        return _tool_message(call, error=error), False
    if call.arguments is None:
        error = ToolCallError(
            ToolErrorCode.INVALID_ARGUMENTS_JSON,
            f"The arguments for {call.name} could not be read: {call.parse_error}. "
            "Send them as one JSON object.",
            {"tool": call.name, "received": call.raw_arguments[:500]},
        )
        return _refuse(call, scope, error, rule="arguments_json")
    violations = find_violations(tool, call.arguments)
    if violations:
        error = ToolCallError(
            ToolErrorCode.INVALID_ARGUMENTS,
            summarize_violations(call.name, violations),
            {"tool": call.name, "violations": violations},
        )
        return _refuse(call, scope, error, rule="schema")
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


def _refuse(
    call: ToolCall, scope: CallScope, error: ToolCallError, rule: str
) -> tuple[Message, bool]:
    with scope.tracer.span(
        SpanKind.POLICY_CHECK,
        f"{rule} {call.name}",
        scope.parent,
        call_id=call.id,
        tool=call.name,
        check=rule,
        allowed=False,
        error=error.to_dict(),
    ) as span:
        span.fail(SpanStatus.REFUSED)
    return _tool_message(call, error=error), False


def _unknown_tool_error(call: ToolCall, scope: CallScope) -> ToolCallError:
    callable_now = [
        t.name for t in visible_tools(scope.agent, scope.registry, scope.tenant, scope.user_id)
    ]
    return ToolCallError(
        ToolErrorCode.UNKNOWN_TOOL,
        f"There is no tool {call.name!r} you can call. Tools you can call: "
        f"{', '.join(callable_now) or 'none'}.",
        {"tool": call.name, "available": callable_now},
    )


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
