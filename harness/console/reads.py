"""Reads for the admin console: which tenants a staff user may see, a run as a timeline, and
the runs that touched an identifier. Plain functions over users and runs, no requests."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from harness.models import Run, RunOutcome, RunStatus, StaffTenantGrant, Tenant
from policy import services as policy
from traces.queries import find_runs_by_identifier, get_trace
from traces.span_records import (
    ActionResponse,
    AgentSession,
    ApprovalDecision,
    HonestyCheck,
    ModelCall,
    PolicyCheck,
    ToolCallSpan,
    record_of,
)

User = AbstractBaseUser | AnonymousUser


def granted_tenant_slugs(user: User) -> frozenset[str] | None:
    """The tenants ``user`` may see in the console: ``None`` means every tenant (superusers);
    a staff user sees the tenants granted to them (``StaffTenantGrant``), and nobody else
    sees any."""
    if not (user.is_active and getattr(user, "is_staff", False)):
        return frozenset()
    if getattr(user, "is_superuser", False):
        return None
    return frozenset(
        StaffTenantGrant.objects.filter(user_id=user.pk).values_list("tenant__slug", flat=True)
    )


def tenant_filter(user: User, lookup: str) -> Q:
    """A ``Q`` keeping rows whose ``lookup`` (a tenant slug) is granted to ``user``."""
    slugs = granted_tenant_slugs(user)
    return Q() if slugs is None else Q(**{f"{lookup}__in": sorted(slugs)})


def find_runs_touching(user: User, value: str) -> list[str]:
    """Request ids of the runs that touched ``value`` (a phone number, e-mail, national ID…)
    in the tenants ``user`` may see, newest first per tenant. Compares keyed fingerprints:
    the value itself is stored nowhere."""
    value = value.strip()
    if not value:
        return []
    slugs = granted_tenant_slugs(user)
    tenants = Tenant.objects.values_list("slug", flat=True) if slugs is None else sorted(slugs)
    found: list[str] = []
    for slug in tenants:
        found.extend(find_runs_by_identifier(slug, value))
    return found


@dataclass
class Step:
    """One step of a run: the model call and what followed it until the next model call."""

    number: int
    model: dict[str, Any] | None = None
    call: ModelCall = field(default_factory=ModelCall)  # what its span says
    # Plan, then act: a planning call is shown as the plan it wrote (``None``: a usual step).
    plan: list[str] | None = None
    revised: bool = False
    seen: list[dict[str, Any]] = field(default_factory=list)
    new_messages: int = 0
    tools_offered: list[str] = field(default_factory=list)
    answer: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    # The step holds the run's first problem (its page opens on it, unfolded).
    has_problem: bool = False


@dataclass
class Timeline:
    request_id: str
    sessions: list[dict[str, Any]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    outcome: dict[str, Any] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: Decimal = Decimal(0)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def run_timeline(run: Run, trace: dict[str, Any] | None = None) -> Timeline:
    """The run's trace as steps a person can read: per model call what the model saw (the
    masked messages, and how many were new), what it answered, then the policy decisions,
    approvals and tool calls (with their masked I/O) up to the next model call; tokens and
    cost per step and in total. ``trace``: the run's trace if already read."""
    timeline = Timeline(request_id=run.request_id)
    step: Step | None = None
    seen_before = 0
    trace = trace if trace is not None else get_trace(run.request_id)
    for span in trace["spans"]:
        audit = {record["kind"]: record["payload"] for record in span["audit"]}
        record = record_of(span["kind"], span["attributes"])
        if isinstance(record, AgentSession):
            timeline.sessions.append(span | {"record": record})
            continue
        if isinstance(record, ActionResponse):
            timeline.outcome = span | {"record": record}
            continue
        if isinstance(record, ModelCall):
            call = record
            step = Step(number=call.step or len(timeline.steps) + 1, model=span, call=call)
            if call.plan:
                step.plan = list(call.plan_steps or [])
                step.revised = bool(call.revision)
            request = audit.get("model_request") or {}
            step.seen = [_message_view(m) for m in request.get("messages", [])]
            step.new_messages = max(len(step.seen) - seen_before, 0)
            seen_before = len(step.seen) + 1  # the answer joins the conversation
            step.tools_offered = [t.get("name", "") for t in request.get("tools", [])]
            step.answer = _answer_view(audit.get("model_response"))
            step.prompt_tokens = int(call.prompt_tokens or 0)
            step.completion_tokens = int(call.completion_tokens or 0)
            step.cost_usd = call.cost
            timeline.steps.append(step)
            timeline.prompt_tokens += step.prompt_tokens
            timeline.completion_tokens += step.completion_tokens
            timeline.cost_usd += step.cost_usd
            continue
        event = _event_view(span, audit.get("tool_io"))
        if step is None:
            step = Step(number=0)
            timeline.steps.append(step)
        step.events.append(event)
    return timeline


# Outcome kinds by how they read in the console (a badge's colour, as the statuses').
OUTCOME_TONES = {
    RunOutcome.CLEAN: "ok",
    RunOutcome.CORRECTED: "corrected",
    RunOutcome.REFUSED: "refused",
    RunOutcome.DENIED: "held",
    RunOutcome.TOOL_FAILED: "failed",
}


def outcome_tone(outcome: str) -> str:
    return OUTCOME_TONES.get(outcome, "waiting")


@dataclass(frozen=True)
class FirstProblem:
    """The first call of a run that was refused, denied or failed (or the honesty guard's
    correction, when that came first), as the top of its page names it."""

    kind: str  # an outcome kind: refused, denied, tool_failed, corrected
    tool: str
    call_id: str
    check: str
    rule: str
    reason: str
    anchor: str  # the event's id in the timeline

    @property
    def tone(self) -> str:
        return outcome_tone(self.kind)


def first_problem(timeline: Timeline) -> FirstProblem | None:
    """The timeline's first problem, in the order it happened; marks its event and its step
    (which then opens unfolded). Read from the spans the timeline already holds."""
    for step in timeline.steps:
        for event in step.events:
            found = _problem_of(event)
            if found is not None:
                event["first_problem"] = True
                step.has_problem = True
                return found
    return None


def _problem_of(event: dict[str, Any]) -> FirstProblem | None:
    anchor = f"span-{event['span_id']}"
    if event["kind"] == "policy_check" and event["check"] == "honesty":
        reason = "The final answer contradicted what the tools did; the guard corrected it."
        return FirstProblem("corrected", "", "", "honesty", "", reason, anchor)
    if event["kind"] == "policy_check" and event["status"] == "refused" and not event["held"]:
        kind = "denied" if event["check"] == "approval" else "refused"
        reason = event["reason"]
        if not reason and kind == "denied":
            reason = f"{event['decision'] or 'denied'} by {event['decided_by'] or 'nobody'}"
        reason = reason or event["error"]
        return FirstProblem(
            kind, event["tool"], event["call_id"], event["check"], event["rule"], reason, anchor
        )
    if event["kind"] == "tool_call" and event["status"] not in ("ok", ""):
        io = event["io"] or {}
        return FirstProblem(
            "tool_failed",
            event["tool"] or event["name"],
            event["call_id"],
            "",
            "",
            io.get("error", ""),
            anchor,
        )
    return None


# A JSON value this short (in characters) is shown on one line, longer ones one member a line.
COMPACT_JSON_CHARS = 80


def _pretty(value: Any) -> str:
    """JSON for people: on one line when short, else indented; strings as they are."""
    if isinstance(value, str):
        return value
    flat = json.dumps(value, ensure_ascii=False, default=str)
    if len(flat) <= COMPACT_JSON_CHARS:
        return flat
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def _message_view(message: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {"id": c.get("id"), "name": c.get("name"), "arguments": _pretty(c.get("arguments"))}
        for c in message.get("tool_calls") or []
    ]
    content = message.get("content")
    return {
        "role": message.get("role", ""),
        "name": message.get("name") or "",
        "tool_call_id": message.get("tool_call_id") or "",
        "content": _pretty(content) if content not in (None, "") else "",
        "tool_calls": calls,
    }


def _answer_view(response: dict[str, Any] | None) -> dict[str, Any] | None:
    if response is None:
        return None
    return {
        "text": response.get("text") or "",
        "reasoning": response.get("reasoning") or "",
        "finish_reason": response.get("finish_reason") or "",
        "tool_calls": [
            {"id": c.get("id"), "name": c.get("name"), "arguments": _pretty(c.get("arguments"))}
            for c in response.get("tool_calls") or []
        ],
    }


def _event_view(span: dict[str, Any], tool_io: dict[str, Any] | None) -> dict[str, Any]:
    """A policy decision, an approval or a tool call, with what matters about it on top."""
    attributes = span["attributes"]
    record = record_of(span["kind"], attributes)
    view: dict[str, Any] = {
        "kind": span["kind"],
        "name": span["name"],
        "status": span["status"],
        "duration_ms": span["duration_ms"],
        "call_id": "",
        "tool": "",
        "check": "",
        "allowed": None,
        "reason": "",
        "rule": "",
        "policy_version": None,
        "decision": "",
        "decided_by": "",
        "held": False,
        "span_id": span.get("span_id") or "",
        "error": "",
        "attributes": _pretty(attributes),
        "io": None,
    }
    if isinstance(record, PolicyCheck):
        error = record.error if isinstance(record.error, dict) else {}
        view |= {
            "call_id": record.call_id,
            "tool": record.tool,
            "check": record.check,
            "allowed": record.allowed,
            "reason": record.reason,
            "rule": record.rule_name,
            "policy_version": record.policy_version,
            "decision": record.decision,
            "decided_by": record.decided_by,
            "held": record.held,
            "error": str(error.get("message", "")),
        }
    elif isinstance(record, ApprovalDecision):
        view |= {
            "call_id": record.call_id,
            "tool": record.tool,
            "rule": record.rule,
            "policy_version": record.policy_version,
            "decision": record.decision,
            "decided_by": record.decided_by,
        }
    elif isinstance(record, ToolCallSpan):
        view |= {"call_id": record.call_id or "", "tool": record.tool or ""}
    elif isinstance(record, HonestyCheck):
        view["check"] = record.check
    if tool_io is not None:
        view["io"] = {
            "arguments": _pretty(tool_io.get("arguments")),
            "result": _pretty(tool_io.get("result")) if tool_io.get("result") is not None else "",
            "error": _pretty(tool_io.get("error")) if tool_io.get("error") else "",
            "idempotency_key": tool_io.get("idempotency_key") or "",
            "replayed": bool(tool_io.get("replayed")),
        }
    return view


# What the masker leaves in place of a value (docs/audit-and-masking.md, "What is masked"):
# partial forms keep some characters and star the rest (``138****5678``, ``z***@example.com``,
# ``Z**** W**``); fingerprint-only kinds and secrets become a bracketed tag
# (``[national_id:1a2b3c4d]``, ``[api_key removed]``).
MASKED_VALUE = re.compile(
    r"\[[a-z_]+(?::[0-9a-f]{8}| removed)\]"
    r"|[+\w.@-]*\*{2,}[\w.@-]*(?: [^\s*]\*+)*"
)


def mark_masked(text: Any) -> SafeString:
    """``text`` escaped for HTML, each masked value wrapped in ``<mark class="masked">`` so a
    reader sees at once what was masked (and does not take ``138****5678`` for data)."""
    escaped = escape("" if text is None else str(text))
    return mark_safe(  # noqa: S308 -- escaped above; only our own tags are added
        MASKED_VALUE.sub(
            lambda m: f'<mark class="masked" title="masked value">{m.group(0)}</mark>', escaped
        )
    )


def format_money(value: Decimal | float | int | None) -> str:
    """USD for people: cents when a run costs cents, else four decimals (``$0.0090``), and
    ``$0`` for nothing (an unpriced route)."""
    amount = Decimal(str(value or 0))
    if amount == 0:
        return "$0"
    places = Decimal("0.01") if amount >= 1 else Decimal("0.0001")
    rounded = amount.quantize(places, rounding=ROUND_HALF_UP)
    return f"${rounded}" if rounded else "<$0.0001"


def format_cost(cost: Decimal | float | int | None, unpriced_calls: int) -> str:
    """A cost for people: money, "no price" when none of the calls behind it had a price (an
    unknown cost is not $0), and a note when only some had."""
    if unpriced_calls and not cost:
        return "no price"
    money = format_money(cost)
    return f"{money} (+{unpriced_calls} calls without a price)" if unpriced_calls else money


def shorten(text: str, limit: int = 60) -> str:
    """One line of at most ``limit`` characters, an ellipsis marking a cut."""
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def run_duration(run: Run, now: datetime | None = None) -> timedelta | None:
    """Wall time from start to end (or to now while it goes on); None if it never started."""
    if run.started_at is None:
        return None
    end = run.finished_at or (now or timezone.now())
    return max(end - run.started_at, timedelta(0))


def format_duration(duration: timedelta | None) -> str:
    if duration is None:
        return "—"
    seconds = duration.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


# Statuses by how they read in the console: a badge's colour.
STATUS_TONES = {
    RunStatus.SUCCEEDED: "ok",
    RunStatus.QUEUED: "waiting",
    RunStatus.RUNNING: "busy",
    RunStatus.AWAITING_APPROVAL: "held",
    RunStatus.CANCELLED: "stopped",
    RunStatus.FAILED: "failed",
    RunStatus.BUDGET_EXCEEDED: "failed",
    RunStatus.STEP_LIMIT: "failed",
    RunStatus.DEADLINE_EXCEEDED: "failed",
}


def status_tone(status: str) -> str:
    return STATUS_TONES.get(status, "waiting")


@dataclass(frozen=True)
class RunProblem:
    """Why a run did not succeed, for the top of its page."""

    status: str
    label: str
    stop_reason: str
    detail: str
    tone: str


def run_problem(run: Run) -> RunProblem | None:
    """What an operator must read first on a failed, stopped or held run; None otherwise."""
    if run.status not in (
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.BUDGET_EXCEEDED,
        RunStatus.STEP_LIMIT,
        RunStatus.DEADLINE_EXCEEDED,
        RunStatus.AWAITING_APPROVAL,
    ):
        return None
    return RunProblem(
        status=run.status,
        label=run.get_status_display(),
        stop_reason=run.stop_reason,
        detail=run.status_detail,
        tone=status_tone(run.status),
    )


@dataclass(frozen=True)
class HeldCall:
    """A call of a run waiting for a human decision, as the approver must see it."""

    call_id: str
    tool: str
    user_id: str
    arguments: str  # masked, as held
    arguments_sha256: str
    rule: str
    reason: str
    policy_version: int
    expires_at: datetime
    seconds_left: int
    # > 1: held again because an approver's edit matched another approval rule.
    round: int = 1

    @property
    def time_left(self) -> str:
        if self.seconds_left <= 0:
            return "expired (denied at the next sweep)"
        return format_duration(timedelta(seconds=self.seconds_left)) + " left"


def held_calls(run: Run, now: datetime | None = None) -> list[HeldCall]:
    """The run's calls still pending approval, oldest first. Their arguments are the masked
    copy the approval keeps; a decision binds to the hash of the exact ones."""
    now = now or timezone.now()
    return [
        HeldCall(
            call_id=approval.call_id,
            tool=approval.tool,
            user_id=approval.user_id,
            arguments=json.dumps(approval.arguments, ensure_ascii=False, indent=1, default=str),
            arguments_sha256=approval.arguments_sha256,
            rule=approval.rule,
            reason=approval.reason,
            policy_version=approval.policy_version,
            expires_at=approval.expires_at,
            seconds_left=int((approval.expires_at - now).total_seconds()),
            round=approval.round,
        )
        for approval in policy.list_approvals(run.tenant.slug, str(run.id))
        if approval.status == policy.ApprovalStatus.PENDING
    ]
