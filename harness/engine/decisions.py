"""The decision chain for one proposed tool call, shared by the live engine and replay.

In the order DESIGN.md fixes: the tool exists and is enabled for the agent → ACL (before the
arguments are parsed) → chain rules → arguments parse → JSON Schema → call rules and approval.
The policy is asked only through ``PolicyQuestions``: live, a driver's per-drive cache of the
tenant's policy; in replay and what-if, an in-memory policy snapshot. Nothing here writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.messages import Message, ToolCall
from harness.agent_registry import AgentSpec
from policy import services as policy
from tools.errors import ToolCallError, ToolErrorCode
from tools.services import ToolDefinition, ToolRegistry, find_violations, summarize_violations


def callable_tools(
    agent: AgentSpec, registry: ToolRegistry, may_use: Callable[[ToolDefinition], bool]
) -> list[ToolDefinition]:
    """The agent's enabled tools that ``may_use`` allows (the user's ACL): the only tools
    the model is shown, and the ones an unknown-tool error lists."""
    tools = (registry.get(name) for name in agent.tools)
    return [tool for tool in tools if tool and tool.enabled and may_use(tool)]


def run_start(messages: list[Message], history_length: int) -> int:
    """Where a run's own messages begin in its conversation: after its session's earlier
    turns (``history_length`` messages)."""
    return min(history_length, len(messages))


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


def recheck_call_rules(
    held: list[policy.RuleVerdict], edited: list[policy.RuleVerdict]
) -> tuple[str, policy.RuleVerdict] | None:
    """An approved call re-decided on the arguments it would run with (``edited``: every call
    rule matching them; ``held``: every one matching the arguments the approver was asked
    about). ("refuse", rule) if any rule refuses them — refusal beats approval; ("hold", rule)
    for the first ``require_approval`` rule they match that the held ones did not — an edit
    is a new proposal, and the approval covered only what it was asked; None: it may run."""
    refused = next((v for v in edited if v.effect == policy.RuleEffect.REFUSE), None)
    if refused is not None:
        return "refuse", refused
    asked = {verdict.rule for verdict in held}
    new = next(
        (
            v
            for v in edited
            if v.effect == policy.RuleEffect.REQUIRE_APPROVAL and v.rule not in asked
        ),
        None,
    )
    return ("hold", new) if new is not None else None


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


def tool_message(
    call: ToolCall,
    result: Any = None,
    error: ToolCallError | None = None,
    edited: tuple[str, dict[str, Any]] | None = None,
) -> Message:
    """The message the model is shown for a call: its result or its error; ``edited`` (who,
    which arguments) when an approver changed the arguments it ran with."""
    body: dict[str, Any] = (
        {"ok": False, "error": error.to_dict()} if error else {"ok": True, "result": result}
    )
    if edited is not None:
        body["arguments_changed"] = {
            "by": edited[0],
            "arguments": edited[1],
            "note": "An approver changed this call's arguments before it ran; it ran with these.",
        }
    return Message(
        role="tool",
        content=json.dumps(body, ensure_ascii=False, default=str),
        tool_call_id=call.id,
        name=call.name,
        is_error=error is not None,
    )
