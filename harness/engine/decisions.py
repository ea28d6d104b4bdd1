"""The decision chain for one proposed tool call, shared by the live engine and replay.

``decide_call`` follows one call down the chain in the order DESIGN.md fixes, and the first
check that refuses or holds it decides:

1. the tool exists and is enabled for the agent;
2. ACL (before the arguments are read);
3. chain rules, over the labels the run holds;
4. the arguments parse as JSON;
5. JSON Schema;
6. call rules and the call's approval state: held for a human, still pending, denied, or
   approved (re-decided then on the arguments it would run with);
7. the run's tool-call limits, charged when the call passes them;
8. labels: from now on the run holds what the tool's result carries.

It asks and charges only through its ``DecisionPorts``. Live (``harness.engine.tool_calls``):
the drive's cached policy and its ``RunGuard``; dry (``harness.replay.run``): a policy snapshot,
no approvals, and counters kept in memory. It writes nothing: it returns a ``Decision`` (what
happens to the call, which check decided, the error the model is shown, and the policy checks
made, as the trace records them), which the live engine turns into spans and a message and
replay into a verdict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Protocol

from gateway.messages import Message, ToolCall
from harness.agent_registry import AgentSpec
from policy import services as policy
from tools.errors import ToolCallError, ToolErrorCode
from tools.services import ToolDefinition, ToolRegistry, find_violations, summarize_violations
from traces.services import unseal
from traces.span_records import PolicyCheck


class Outcome(StrEnum):
    RUN = "run"  # execute it
    REFUSED = "refused"  # not run: ``error`` tells the model why
    HELD = "held"  # held now for a human's approval (a new approval round)
    WAITING = "waiting"  # held before, and its approval is still pending


@dataclass(frozen=True)
class Decision:
    """What the chain made of one call."""

    outcome: Outcome
    # The check that refused or held it: tool_enabled, acl, chain, arguments_json, schema,
    # call_rule, approval or limit ("" when it runs or waits).
    check: str = ""
    # The tool it runs or is held for.
    tool: ToolDefinition | None = None
    error: ToolCallError | None = None
    # The rule that refused or held it; for a call that runs, the rule that asks an approval
    # it already had (replay: a call the recorded run executed).
    verdict: policy.RuleVerdict | None = None
    limit: LimitRefusal | None = None
    violations: tuple[dict[str, str], ...] = ()
    # The arguments it runs with, or is held for.
    arguments: dict[str, Any] | None = None
    # The approver whose edit those arguments are (the model is told).
    edited_by: str = ""
    # The approval round it was decided in (held again: the round before).
    approval: policy.ToolApproval | None = None
    # The policy checks made, in order, as the trace records them.
    checks: tuple[PolicyCheck, ...] = ()


@dataclass(frozen=True)
class CallApproval:
    """A call's approval state: its latest round, and who last edited its arguments (in this
    round or an earlier one; "" if nobody)."""

    latest: policy.ToolApproval
    edited_by: str = ""


@dataclass(frozen=True)
class ToolCallCount:
    """A run's tool calls so far against its limits (``None``: no limit)."""

    of_tool: int
    total: int
    per_tool_limit: int | None
    total_limit: int | None


@dataclass(frozen=True)
class LimitRefusal:
    rule: str
    reason: str


class DecisionPorts(Protocol):
    """What the chain asks and charges, live or dry."""

    @property
    def agent(self) -> AgentSpec: ...

    @property
    def registry(self) -> ToolRegistry: ...

    @property
    def policy_version(self) -> int:
        """The policy version the decisions are made under."""

    @property
    def labels(self) -> Mapping[str, Any]:
        """The labels the run holds (each naming the call that brought it in)."""

    def acl(self, tool: ToolDefinition) -> policy.Decision:
        """May the run's end user call ``tool`` (every scope it declares)?"""

    def rules(self) -> Iterable[policy.RuleSpec]:
        """The chain and call rules in force (at ``policy_version``)."""

    def approval(self, call_id: str) -> CallApproval | None:
        """The call's approval state, if it was ever held (dry: never)."""

    def hold_granted(self, call: ToolCall) -> bool:
        """Whether a call the rules hold now was let through already: live never (a new hold
        waits for a human); dry, when the recorded run executed it."""

    def tool_calls(self, tool: str) -> ToolCallCount:
        """The run's tool calls so far, and its limits."""

    def charge_tool_call(self, tool: str) -> LimitRefusal | None:
        """Count one call of ``tool`` as made; live, the tenant's daily count too, whose
        refusal it returns (dry: the day is not replayed)."""

    def hold_labels(self, labels: list[policy.HeldLabelValue]) -> None:
        """The run holds these labels from now on."""


def decide_call(call: ToolCall, ports: DecisionPorts) -> Decision:
    """Put one proposed call through the chain; the first check that refuses or holds it
    decides. Charges a passed call to the run's limits and notes its labels (through
    ``ports``); nothing else changes."""
    agent, registry = ports.agent, ports.registry
    # 1. The tool exists and is enabled for the agent.
    tool = registry.get(call.name)
    if tool is None or call.name not in agent.tools or not tool.enabled:
        may_use = callable_tools(agent, registry, lambda candidate: ports.acl(candidate).allowed)
        callable_now = [candidate.name for candidate in may_use]
        return _refused(call, "tool_enabled", unknown_tool_error(call, callable_now))
    # 2. ACL: before the arguments are read. Its decision is recorded either way.
    allowed = ports.acl(tool)
    acl = PolicyCheck(
        call.id,
        call.name,
        "acl",
        refused=not allowed.allowed,
        allowed=allowed.allowed,
        rule=list(allowed.rule),
        reason=allowed.reason,
        policy_version=ports.policy_version,
        extra={"scopes": list(tool.access)},
    )
    if not allowed.allowed:
        decided = Decision(Outcome.REFUSED, "acl", error=acl_error(call, allowed))
    else:
        decided = _after_acl(call, tool, ports)
    return replace(decided, checks=(acl, *decided.checks))


def _after_acl(call: ToolCall, tool: ToolDefinition, ports: DecisionPorts) -> Decision:
    """Steps 3 to 8, for a call the ACL allows."""
    rules = ports.rules()
    # 3. Chain rules, over the labels the run holds.
    chain = policy.evaluate_chain_rules(
        rules, ports.policy_version, tool.name, tool.carries, tool.sink, ports.labels
    )
    if chain.effect == policy.RuleEffect.REFUSE:
        return _refused_by_rule(call, "chain", chain)
    # 4. The arguments parse.
    arguments = call.arguments
    if arguments is None:
        error = ToolCallError(
            ToolErrorCode.INVALID_ARGUMENTS_JSON,
            f"The arguments for {call.name} could not be read: {call.parse_error}. "
            "Send them as one JSON object.",
            {"tool": call.name, "received": call.raw_arguments[:500]},
        )
        return _refused(call, "arguments_json", error)
    # 5. JSON Schema.
    violations = find_violations(tool, arguments)
    if violations:
        error = _invalid_arguments(call, violations)
        return replace(_refused(call, "schema", error), violations=tuple(violations))
    # 6. Call rules and the call's approval state.
    passed = _call_rules_and_approval(call, tool, arguments, chain, rules, ports)
    if passed.outcome != Outcome.RUN:
        return passed
    # 7. The run's tool-call limits; only a call they let through is counted.
    refusal = limit_refusal(tool.name, ports.tool_calls(tool.name))
    if refusal is None:
        refusal = ports.charge_tool_call(tool.name)
    if refusal is not None:
        refused = _refused(call, "limit", limit_error(call, refusal.rule, refusal.reason))
        return replace(refused, limit=refusal, checks=(*passed.checks, *refused.checks))
    # 8. The run holds the labels from now on, even if the call then fails: it may have read.
    held = ports.labels
    new = {label: policy.HeldLabelValue(label, call.id, tool.name) for label in tool.carries}
    ports.hold_labels([value for label, value in new.items() if label not in held])
    return passed


def _call_rules_and_approval(
    call: ToolCall,
    tool: ToolDefinition,
    arguments: dict[str, Any],
    chain: policy.RuleVerdict,
    rules: Iterable[policy.RuleSpec],
    ports: DecisionPorts,
) -> Decision:
    """A call never held is put to the call rules (and a chain rule's demand for approval);
    a held one is decided by its approval. Outcome RUN: on to the limits."""
    state = ports.approval(call.id)
    if state is None:
        verdict = policy.evaluate_call_rules(
            rules, ports.policy_version, tool.name, tool.approval, arguments
        )
        gate = rule_gate(verdict, chain)
        if gate is not None and gate[0] == "refuse":
            return _refused_by_rule(call, "call_rule", gate[1])
        if gate is not None and not ports.hold_granted(call):
            held = _verdict_check(call, "approval", gate[1], held=True)
            return Decision(
                Outcome.HELD, "approval", tool, verdict=gate[1], arguments=arguments, checks=(held,)
            )
        needed = gate[1] if gate is not None else None
        return Decision(Outcome.RUN, tool=tool, verdict=needed, arguments=arguments)
    approval = state.latest
    if approval.status == policy.ApprovalStatus.PENDING:
        return Decision(Outcome.WAITING, tool=tool, approval=approval)
    if approval.status != policy.ApprovalStatus.APPROVED:
        return _refused_unapproved(call, approval)
    return _redecide_approved(call, tool, state, rules, ports)


def rule_gate(
    verdict: policy.RuleVerdict, chain: policy.RuleVerdict
) -> tuple[str, policy.RuleVerdict] | None:
    """After the call rules: ("refuse", rule), ("hold", rule) for approval, or None."""
    if verdict.effect == policy.RuleEffect.REFUSE:
        return "refuse", verdict
    if not verdict.allowed or chain.effect == policy.RuleEffect.REQUIRE_APPROVAL:
        return "hold", verdict if not verdict.allowed else chain
    return None


def _redecide_approved(
    call: ToolCall,
    tool: ToolDefinition,
    state: CallApproval,
    rules: Iterable[policy.RuleSpec],
    ports: DecisionPorts,
) -> Decision:
    """An approved call, re-decided before it runs: the arguments held must be the approved
    ones; an approver's edit is read back (``_read_edits``); then today's call rules decide
    the arguments it would run with against the ones the approver was asked about
    (``recheck_call_rules``): a refusal refuses it (refusal beats approval), a
    require_approval rule only the edited arguments match holds it again for a new round."""
    approval, editor = state.latest, state.edited_by
    held = _held_arguments(call, approval)
    if held is None:
        return _refused_unapproved(call, approval)
    runs_with = held
    if approval.edited_arguments_sha256:
        edited = _read_edits(call, tool, approval)
        if isinstance(edited, Decision):
            return edited
        runs_with = edited

    def verdicts(arguments: dict[str, Any]) -> list[policy.RuleVerdict]:
        return policy.call_rule_verdicts(
            rules, ports.policy_version, tool.name, tool.approval, arguments
        )

    gate = recheck_call_rules(verdicts(held), verdicts(runs_with))
    decided = Decision(
        Outcome.RUN, tool=tool, arguments=runs_with, edited_by=editor, approval=approval
    )
    if gate is not None and gate[0] == "refuse":
        check = _verdict_check(call, "call_rule", gate[1], refused=True, allowed=False)
        changed = {"edited_by": editor, "round": approval.round} if editor else {}
        return replace(
            decided,
            outcome=Outcome.REFUSED,
            check="call_rule",
            error=rule_error(call, gate[1]),
            verdict=gate[1],
            checks=(replace(check, extra=check.extra | changed),),
        )
    if gate is not None:
        held_again = _verdict_check(call, "approval", gate[1], held=True)
        return replace(
            decided, outcome=Outcome.HELD, check="approval", verdict=gate[1], checks=(held_again,)
        )
    if not editor:
        return decided
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
    return replace(decided, checks=(check,))


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


def _held_arguments(call: ToolCall, approval: policy.ToolApproval) -> dict[str, Any] | None:
    """The arguments the approval round was asked about, if they are the ones it names: the
    model's own for the first round, an earlier approver's edit (sealed with the round) for
    the next ones."""
    held = call.arguments if approval.round == 1 else unseal(approval.sealed_arguments, None)
    if not isinstance(held, dict) or policy.hash_arguments(held) != approval.arguments_sha256:
        return None
    return held


def _read_edits(
    call: ToolCall, tool: ToolDefinition, approval: policy.ToolApproval
) -> dict[str, Any] | Decision:
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
        return _refused(call, "approval", error)
    violations = find_violations(tool, edited)
    if violations:
        error = _invalid_arguments(call, violations, {"edited_by": approval.decided_by})
        return _refused(call, "schema", error)
    return edited


def limit_refusal(tool: str, count: ToolCallCount) -> LimitRefusal | None:
    """The run's limit one more call of ``tool`` would pass, if any: per tool, then per run.
    A refused call is not counted."""
    if count.per_tool_limit is not None and count.of_tool >= count.per_tool_limit:
        return LimitRefusal(
            "max_calls_per_tool", f"this run may call {tool} at most {count.per_tool_limit} times"
        )
    if count.total_limit is not None and count.total >= count.total_limit:
        return LimitRefusal(
            "max_tool_calls_per_run", f"this run may make {count.total_limit} tool calls"
        )
    return None


# --- the records and errors of a refusal -----------------------------------------------------


def _refused(call: ToolCall, check: str, error: ToolCallError) -> Decision:
    record = PolicyCheck(
        call.id, call.name, check, refused=True, allowed=False, error=error.to_dict()
    )
    return Decision(Outcome.REFUSED, check, error=error, checks=(record,))


def _refused_by_rule(call: ToolCall, check: str, verdict: policy.RuleVerdict) -> Decision:
    record = _verdict_check(call, check, verdict, refused=True, allowed=False)
    return Decision(
        Outcome.REFUSED, check, error=rule_error(call, verdict), verdict=verdict, checks=(record,)
    )


def _refused_unapproved(call: ToolCall, approval: policy.ToolApproval) -> Decision:
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
    record = PolicyCheck(
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
    return Decision(Outcome.REFUSED, "approval", error=error, approval=approval, checks=(record,))


def _verdict_check(
    call: ToolCall, check: str, verdict: policy.RuleVerdict, **fields: Any
) -> PolicyCheck:
    """A rule's verdict on ``call`` as a policy check (the rule's label and source, if any,
    go along)."""
    attributes = verdict.attributes()
    known = {"rule": attributes.pop("rule"), "reason": attributes.pop("reason")}
    known["policy_version"] = attributes.pop("policy_version")
    return PolicyCheck(call.id, call.name, check, **known, **fields, extra=attributes)


def callable_tools(
    agent: AgentSpec, registry: ToolRegistry, may_use: Callable[[ToolDefinition], bool]
) -> list[ToolDefinition]:
    """The agent's enabled tools that ``may_use`` allows (the user's ACL): the only tools
    the model is shown, and the ones an unknown-tool error lists."""
    tools = (registry.get(name) for name in agent.tools)
    return [tool for tool in tools if tool and tool.enabled and may_use(tool)]


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


def _invalid_arguments(
    call: ToolCall, violations: list[dict[str, str]], more: dict[str, str] | None = None
) -> ToolCallError:
    return ToolCallError(
        ToolErrorCode.INVALID_ARGUMENTS,
        summarize_violations(call.name, violations),
        {"tool": call.name, "violations": violations} | (more or {}),
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
