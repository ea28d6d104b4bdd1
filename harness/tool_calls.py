"""Deciding and executing one proposed tool call, in the order DESIGN.md fixes:
the tool exists and is enabled for the agent → ACL → arguments parse → JSON Schema →
execution. Every refusal becomes a structured error for the model and a span; nothing raises.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.messages import Message, ToolCall
from harness.agent_registry import AgentSpec
from policy import services as policy
from tools.errors import ToolCallError, ToolErrorCode
from tools.services import (
    ToolContext,
    ToolDefinition,
    ToolRegistry,
    execute_tool,
    find_violations,
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


def handle_tool_call(call: ToolCall, scope: CallScope) -> tuple[Message, bool]:
    """Decide and run one call; return the tool-result message and whether the call succeeded."""
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
    return _execute(call, tool, scope)


def _execute(call: ToolCall, tool: ToolDefinition, scope: CallScope) -> tuple[Message, bool]:
    context = ToolContext(
        tenant=scope.tenant,
        user_id=scope.user_id,
        run_id=scope.run_id,
        call_id=call.id,
        idempotency_key=f"{scope.run_id}:{call.id}",
    )
    with scope.tracer.span(
        SpanKind.TOOL_CALL, call.name, scope.parent, call_id=call.id, tool=call.name
    ) as span:
        outcome = execute_tool(tool, call.arguments or {}, context)
        span.set(duration_ms=outcome.duration_ms, idempotency_key=context.idempotency_key)
        if not outcome.ok:
            span.fail(error_code=str(outcome.error.code))
        scope.tracer.audit(
            span,
            AuditKind.TOOL_IO,
            {
                "tool": call.name,
                "call_id": call.id,
                "proposed_arguments": call.raw_arguments,
                "arguments": call.arguments,
                "result": outcome.result,
                "error": outcome.error.to_dict() if outcome.error else None,
                "traceback": outcome.traceback or None,
                "duration_ms": outcome.duration_ms,
                "idempotency_key": context.idempotency_key,
            },
            sensitive=under("/arguments", tool.sensitive.get("arguments"))
            | under("/result", tool.sensitive.get("result")),
        )
    if outcome.error:
        return _tool_message(call, error=outcome.error), False
    return _tool_message(call, result=outcome.result), True


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
