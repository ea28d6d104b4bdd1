"""Replay and what-if: a recorded run re-decided under today's code and policy, and a proposed
policy change previewed over a tenant's last runs — before it is saved.

Replay reads what the run recorded — the model's responses and the tool results, from the
run's sealed (clear) conversation, or from the masked audit records where there is none — and
puts every proposed tool call through the loop's own decision function
(``harness.engine.decisions.decide_call``) with dry ports (``_DryPorts``): an in-memory
``PolicySnapshot``, no approvals (a call today's rules hold counts as approved if the recorded
run executed it), and the labels the run holds (chain rules) and the tool calls it made
(limits) counted in memory. It never calls a model, never executes a tool and writes nothing:
no span, audit record, approval, label, ledger charge or limit counter.

Each call gets a verdict before (what the run recorded) and after (today): ``allowed``,
``refused`` (by which check and rule), ``needs_approval`` or ``not_executed`` (the loop's
repeated-call stop). A call diverges when its verdict, the refusing check or rule, its schema
violations, or its arguments (today's gateway re-reading the raw text the model sent) differ.
The final answer diverges when today's honesty guard, over the replayed tool results, would
give another one. The model's later responses are the recorded ones: after the first
divergence the model would have seen something else, which the report says (``first_divergence``).

What-if replays the tenant's last N runs twice, under today's policy and under today's policy
with the proposed change, and lists the calls whose verdict differs between the two.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from gateway.messages import Message, ToolCall
from gateway.services import parse_tool_arguments
from harness.agent_registry import AgentSpec, get_agent
from harness.engine.conversation import load_run_messages, run_start
from harness.engine.decisions import (
    Decision,
    LimitRefusal,
    Outcome,
    ToolCallCount,
    decide_call,
    tool_message,
)
from harness.engine.honesty import check_answer
from harness.errors import HarnessError, ReplayUnavailable
from harness.models import Run, RunStatus
from policy import services as policy
from tools.errors import ToolCallError, ToolErrorCode, ToolFilesInvalid
from tools.services import ToolDefinition, ToolRegistry, get_tool_registry
from traces.queries import get_trace
from traces.services import unseal
from traces.span_records import PolicyCheck, record_of

ALLOWED, REFUSED, NEEDS_APPROVAL, NOT_EXECUTED = (
    "allowed",
    "refused",
    "needs_approval",
    "not_executed",
)
# Tool errors the policy produces, and the check each comes from (when the trace has no span).
_REFUSAL_CODES = {
    ToolErrorCode.UNKNOWN_TOOL: "tool_enabled",
    ToolErrorCode.PERMISSION_DENIED: "acl",
    ToolErrorCode.INVALID_ARGUMENTS_JSON: "arguments_json",
    ToolErrorCode.INVALID_ARGUMENTS: "schema",
    ToolErrorCode.LIMIT_EXCEEDED: "limit",
}


@dataclass(frozen=True)
class Verdict:
    """What the decision chain made of one call."""

    verdict: str
    check: str = ""
    rule: str = ""
    reason: str = ""
    violations: tuple[dict[str, str], ...] = ()
    # An ACL refusal: the permission line that decided it ("bob, acme, ticket, write, deny"),
    # "" when no line grants the scope. Shown, not compared: the audit-only record of an old
    # run does not name it, and the verdict and check already say what changed.
    permission: str = ""

    def same_as(self, other: Verdict) -> bool:
        return (self.verdict, self.check, self.rule, self.violations) == (
            other.verdict,
            other.check,
            other.rule,
            other.violations,
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["violations"] = list(self.violations)
        return {key: value for key, value in data.items() if value not in ("", [])}


@dataclass
class CallReplay:
    step: int
    call_id: str
    tool: str
    before: Verdict
    after: Verdict
    arguments_changed: bool = False
    recorded_arguments: Any = None
    arguments: Any = None

    @property
    def divergence(self) -> str:
        """ "" when nothing changed, else what changed, in one word."""
        before, after = self.before.verdict, self.after.verdict
        if before != after:
            return {REFUSED: "now_refused", NEEDS_APPROVAL: "now_needs_approval"}.get(
                after, "now_allowed" if after == ALLOWED else f"now_{after}"
            )
        if self.before.violations != self.after.violations:
            return "validation_changed"
        if not self.before.same_as(self.after):
            return "refused_differently" if after == REFUSED else "rule_changed"
        if self.arguments_changed:
            return "arguments_changed"
        return ""

    def to_dict(self) -> dict[str, Any]:
        data = {
            "step": self.step,
            "call_id": self.call_id,
            "tool": self.tool,
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
            "divergence": self.divergence or None,
        }
        if self.arguments_changed:
            data |= {"recorded_arguments": self.recorded_arguments, "arguments": self.arguments}
        return data


@dataclass
class ReplayReport:
    run_id: str
    request_id: str
    source: str  # "sealed" (the clear conversation) or "audit" (masked records)
    policy_version: int
    proposed: list[dict[str, Any]]
    calls: list[CallReplay]
    recorded_answer: str | None
    replayed_answer: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def divergent_calls(self) -> list[CallReplay]:
        return [call for call in self.calls if call.divergence]

    @property
    def answer_changed(self) -> bool:
        return self.replayed_answer != self.recorded_answer

    def to_dict(self) -> dict[str, Any]:
        divergent = self.divergent_calls
        first = divergent[0] if divergent else None
        return {
            "run_id": self.run_id,
            "request_id": self.request_id,
            "source": self.source,
            "policy_version": self.policy_version,
            "proposed": self.proposed,
            "diverged": bool(divergent) or self.answer_changed,
            "first_divergence": (
                {"step": first.step, "call_id": first.call_id, "tool": first.tool}
                if first
                else None
            ),
            "divergences": [call.to_dict() for call in divergent],
            "calls": [call.to_dict() for call in self.calls],
            "answer": {
                "recorded": self.recorded_answer,
                "replayed": self.replayed_answer,
                "changed": self.answer_changed,
            },
            "notes": self.notes,
        }


# --- replay ----------------------------------------------------------------------------------


def replay_run(run: Run, snapshot: policy.PolicySnapshot | None = None) -> ReplayReport:
    """Re-decide every tool call of a recorded run under today's code and ``snapshot`` (by
    default the tenant's policy as it is now). Reads only; no model, no tool, no writes."""
    snapshot = snapshot or policy.policy_snapshot(run.tenant.slug)
    try:
        agent = get_agent(run.agent)
        registry = get_tool_registry()
    except (HarnessError, ToolFilesInvalid) as exc:
        raise ReplayUnavailable(
            f"The run's agent or tools cannot be loaded today: {exc}", {"run_id": str(run.id)}
        ) from exc
    recorded = _recorded_conversation(run)
    spans = _policy_spans(run.request_id)
    ports = _DryPorts(run, agent, registry, snapshot)
    calls: list[CallReplay] = []
    replayed: list[Message] = []
    results = {m.tool_call_id: m for m in recorded.messages if m.role == "tool"}
    step = 0
    for message in recorded.messages[recorded.start :]:
        if message.role == "tool":
            continue  # replaced by the replayed result of its call, below
        replayed.append(message)
        if message.role != "assistant" or not message.tool_calls:
            continue
        step += 1
        for call in sorted(message.tool_calls, key=lambda c: c.index):
            result = results.get(call.id)
            before = _recorded_verdict(call, result, spans.get(call.id, []))
            replay, shown = _replay_call(ports, call, before, result)
            replay.step = step
            calls.append(replay)
            if shown is not None:
                replayed.append(shown)
    return ReplayReport(
        run_id=str(run.id),
        request_id=run.request_id,
        source=recorded.source,
        policy_version=snapshot.version,
        proposed=[edit.describe() for edit in snapshot.edits],
        calls=calls,
        recorded_answer=recorded.answer,
        replayed_answer=_replayed_answer(run, recorded, replayed),
        notes=recorded.notes,
    )


def _replay_call(
    ports: _DryPorts, call: ToolCall, before: Verdict, result: Message | None
) -> tuple[CallReplay, Message | None]:
    """Today's verdict on ``call`` and the result the model would be shown (the recorded one
    where the call ran then and would run now; ``None`` while held)."""
    today = _reparsed(call)
    replay = CallReplay(0, call.id, call.name, before, before)
    if today.arguments != call.arguments:
        replay.arguments_changed = True
        replay.recorded_arguments = call.arguments
        replay.arguments = today.arguments
    if before.verdict == NOT_EXECUTED:
        return replay, result
    executed_then = before.verdict in (ALLOWED, NEEDS_APPROVAL) and _ran(result)
    if executed_then:
        ports.ran_then.add(call.id)
    decision = decide_call(today, ports)
    replay.after = _verdict(decision)
    if decision.outcome == Outcome.REFUSED:
        return replay, tool_message(today, error=decision.error)
    if executed_then or decision.outcome != Outcome.RUN:
        return replay, result  # ran then and now; or held now, with no result to show
    # Allowed now, not run then: no result was recorded. The guard is shown that the call
    # succeeded (it reads a success's name and call id, never its body).
    return replay, tool_message(today)


class _DryPorts:
    """``decide_call``'s ports in replay: the policy snapshot; no approvals (a call the rules
    hold today counts as approved if the recorded run executed it: ``ran_then``); the labels
    the run holds and its tool calls, counted here from none. The tenant's daily tool calls
    are not replayed: they belong to the day the run ran."""

    def __init__(
        self, run: Run, agent: AgentSpec, registry: ToolRegistry, snapshot: policy.PolicySnapshot
    ) -> None:
        self.agent = agent
        self.registry = registry
        self.snapshot = snapshot
        self.user = run.user_id
        self.labels: dict[str, policy.HeldLabelValue] = {}
        self.limits = policy.run_tool_limits(str(run.id))
        self.calls_total = 0
        self.calls_per_tool: dict[str, int] = {}
        self.ran_then: set[str] = set()

    @property
    def policy_version(self) -> int:
        return self.snapshot.version

    def acl(self, tool: ToolDefinition) -> policy.Decision:
        return self.snapshot.authorize_scopes(self.user, tool.access)

    def rules(self) -> tuple[policy.RuleSpec, ...]:
        return self.snapshot.rules

    def approval(self, call_id: str) -> None:
        return None

    def hold_granted(self, call: ToolCall) -> bool:
        return call.id in self.ran_then

    def tool_calls(self, tool: str) -> ToolCallCount:
        return ToolCallCount(
            self.calls_per_tool.get(tool, 0),
            self.calls_total,
            self.limits.calls_per_tool_limit,
            self.limits.tool_calls_limit,
        )

    def charge_tool_call(self, tool: str) -> LimitRefusal | None:
        self.calls_per_tool[tool] = self.calls_per_tool.get(tool, 0) + 1
        self.calls_total += 1
        return None

    def hold_labels(self, labels: list[policy.HeldLabelValue]) -> None:
        self.labels.update((held.label, held) for held in labels)


def _verdict(decision: Decision) -> Verdict:
    """Today's decision as a verdict."""
    rule = decision.verdict
    if decision.limit is not None:
        return Verdict(REFUSED, "limit", decision.limit.rule, decision.limit.reason)
    if decision.outcome == Outcome.REFUSED and decision.check == "call_rule":
        refusing = cast(policy.RuleVerdict, rule)
        return Verdict(REFUSED, "call_rule", refusing.rule, refusing.reason)
    if decision.outcome == Outcome.REFUSED:
        message = cast(ToolCallError, decision.error).message
        named = rule.rule if rule else ""  # the chain rule that refused it, if one did
        line = _acl_line([c for c in decision.checks if c.check == "acl" and c.refused])
        return Verdict(REFUSED, decision.check, named, message, decision.violations, line)
    if rule is not None:  # held now, or let through by the approval the run had then
        return Verdict(NEEDS_APPROVAL, "approval", rule.rule, rule.reason)
    return Verdict(ALLOWED)


def _acl_line(checks: list[PolicyCheck]) -> str:
    """The permission line an ACL check names (a Casbin line is recorded as its fields)."""
    return next((c.rule_name for c in checks if isinstance(c.rule, list)), "")


def _reparsed(call: ToolCall) -> ToolCall:
    """The call as today's gateway would read the raw arguments the model sent."""
    if not call.raw_arguments:
        return call
    arguments, error = parse_tool_arguments(call.raw_arguments)
    return ToolCall(
        id=call.id,
        name=call.name,
        arguments=arguments,
        index=call.index,
        raw_arguments=call.raw_arguments,
        parse_error=error,
    )


def _ran(result: Message | None) -> bool:
    """The recorded result is the tool's own (it ran), not a refusal by the harness."""
    if result is None:
        return False
    body = _body(result)
    if body.get("ok"):
        return True
    code = (body.get("error") or {}).get("code")
    return code not in {*_REFUSAL_CODES, ToolErrorCode.POLICY_REFUSED} | {
        ToolErrorCode.APPROVAL_DENIED,
        "not_executed",
    }


def _body(message: Message) -> dict[str, Any]:
    try:
        body = json.loads(message.content)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _recorded_verdict(call: ToolCall, result: Message | None, spans: list[dict]) -> Verdict:
    """What the run decided for ``call``: from its policy-check spans where the trace has
    them, else from the tool error the model was shown."""
    checks = [(span["status"], PolicyCheck.from_attributes(span["attributes"])) for span in spans]
    for _, check in checks:
        if check.check == "approval" and check.held:
            return Verdict(NEEDS_APPROVAL, "approval", check.rule_name, check.reason)
    body = _body(result) if result is not None else {}
    error = body.get("error") or {}
    for status, check in checks:
        if status == "refused" and check.check not in ("approval", "honesty"):
            rule = check.rule if isinstance(check.rule, str) else ""
            if check.check == "limit":
                rule = (error.get("details") or {}).get("limit", "")
            violations = tuple((error.get("details") or {}).get("violations") or ())
            message = str(error.get("message", ""))
            line = _acl_line([check]) if check.check == "acl" else ""
            return Verdict(REFUSED, check.check, rule, message, violations, line)
    if result is None:
        return Verdict(NEEDS_APPROVAL, "approval") if spans else Verdict(NOT_EXECUTED)
    if body.get("ok"):
        return Verdict(ALLOWED)
    code = error.get("code")
    details = error.get("details") or {}
    message = str(error.get("message", ""))
    if code == "not_executed":
        return Verdict(NOT_EXECUTED, reason=message)
    if code == ToolErrorCode.APPROVAL_DENIED:
        return Verdict(NEEDS_APPROVAL, "approval", str(details.get("rule", "")))
    if code == ToolErrorCode.POLICY_REFUSED:
        check = "chain" if details.get("label") else "call_rule"
        return Verdict(REFUSED, check, str(details.get("rule", "")), message)
    if code in _REFUSAL_CODES:
        rule = str(details.get("limit", "")) if code == ToolErrorCode.LIMIT_EXCEEDED else ""
        violations = tuple(details.get("violations") or ())
        return Verdict(REFUSED, _REFUSAL_CODES[code], rule, message, violations)
    return Verdict(ALLOWED)  # it ran, and failed


def _policy_spans(request_id: str) -> dict[str, list[dict]]:
    spans: dict[str, list[dict]] = {}
    for span in get_trace(request_id)["spans"]:
        record = record_of(span["kind"], span["attributes"])
        if isinstance(record, PolicyCheck) and record.call_id:
            spans.setdefault(record.call_id, []).append(span)
    return spans


def _replayed_answer(run: Run, recorded: _Recorded, replayed: list[Message]) -> str | None:
    """Today's honesty guard on the model's final text, over the replayed tool results."""
    last = recorded.messages[-1] if recorded.messages else None
    if run.status != RunStatus.SUCCEEDED or last is None or last.role != "assistant":
        return recorded.answer  # the run stopped for another reason: nothing to re-derive
    if last.tool_calls:
        return recorded.answer
    return check_answer(last.content, replayed).answer


# --- what the run recorded -------------------------------------------------------------------


@dataclass
class _Recorded:
    source: str
    messages: list[Message]
    start: int
    answer: str | None
    notes: list[str] = field(default_factory=list)


def _recorded_conversation(run: Run) -> _Recorded:
    sealed = unseal(run.sealed, None) or {}
    stored = load_run_messages(run)
    if stored:
        return _Recorded("sealed", stored, 0, sealed.get("answer"))
    if sealed.get("messages"):  # a run checkpointed whole, before conversations were appended
        messages = [Message.from_dict(m) for m in sealed["messages"]]
        return _Recorded("sealed", messages, run_start(messages), sealed.get("answer"))
    return _from_audit(run)


def _from_audit(run: Run) -> _Recorded:
    """The conversation rebuilt from the masked audit records: responses from
    ``model_response``, results from ``tool_io`` or the refusal's span."""
    messages: list[Message] = [Message(role="user", content=run.input)]
    refusals: dict[str, dict] = {}
    results: dict[str, Message] = {}
    responses: list[dict] = []
    for span in get_trace(run.request_id)["spans"]:
        check = record_of(span["kind"], span["attributes"])
        if isinstance(check, PolicyCheck) and check.error:
            refusals[check.call_id] = check.error
        for record in span["audit"]:
            payload = record["payload"]
            if record["kind"] == "model_response":
                responses.append(payload)
            elif record["kind"] == "tool_io":
                # A call from a step the database refused is audited with its status only
                # (driver._unkept_call): a failure there has no ``error`` member.
                ok = payload.get("error") is None and payload.get("status") != "error"
                body = (
                    {"ok": ok, "result": payload.get("result")}
                    if ok
                    else {
                        "ok": False,
                        "error": payload.get("error") or payload.get("detail"),
                    }
                )
                results[payload.get("call_id", "")] = Message(
                    role="tool",
                    content=json.dumps(body),  # the payload was read from a JSON column
                    tool_call_id=payload.get("call_id"),
                    name=payload.get("tool"),
                    is_error=not ok,
                )
    for payload in responses:
        calls = tuple(ToolCall.from_dict(c) for c in payload.get("tool_calls") or ())
        messages.append(
            Message(role="assistant", content=payload.get("text") or "", tool_calls=calls)
        )
        for call in calls:
            if call.id in results:
                messages.append(results[call.id])
            elif call.id in refusals:
                body = {"ok": False, "error": refusals[call.id]}
                messages.append(
                    Message(
                        role="tool",
                        content=json.dumps(body),
                        tool_call_id=call.id,
                        name=call.name,
                        is_error=True,
                    )
                )
    notes = [
        "No clear copy of this run's conversation: it was rebuilt from the masked audit "
        "records, so masked arguments may fail validation that the clear ones passed."
    ]
    return _Recorded("audit", messages, 0, run.answer or None, notes)
