"""The attributes of a span, as one typed record per kind.

A span's attributes are a JSON object stored with it (``Span.attributes``). Every writer (the
engine, approvals) builds them from a record here, and every reader (the console, replay, the
OpenTelemetry export, the SIEM feed, reports) reads them back through the same record: one
definition of the keys, so a renamed attribute cannot silently turn a recorded refusal into
"allowed" (or a step's tokens into none). The stored names are the records' field names and
never change: rows written before a record existed still read (``from_attributes`` takes what
it knows, and missing keys read as "not said").

=================  ===================================================================
kind               record
=================  ===================================================================
agent_session      ``AgentSession``: the run's root span, one per drive
model_call         ``ModelCall``: a step's (or a plan's) call of the model
tool_call          ``ToolCallSpan``: one execution of a tool
policy_check       ``PolicyCheck`` (a decision about one tool call), or ``HonestyCheck``
                   (the final answer corrected), told apart by ``check``
approval           ``ApprovalDecision``: a human's decision on a held call
action_response    ``ActionResponse``: how the run ended, and its answer
callback           none: declared in ``SpanKind``, never written (webhook deliveries are
                   rows of their own)
=================  ===================================================================

Records written in parts as the work goes (session, model call, tool call) use ``None`` for
"not said": a part writes only the fields it sets. The others are written whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from decimal import Decimal
from functools import cache
from typing import Any, ClassVar

from traces.models import SpanKind


class _Record:
    """``attributes()`` / ``from_attributes()`` for a dataclass whose field names are the
    stored keys. ``None`` is not written, except for the fields in ``_said_when_none``."""

    _said_when_none: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    @cache
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]

    def attributes(self) -> dict[str, Any]:
        """The span's attributes: the fields this record says."""
        said = {name: getattr(self, name) for name in self._names()}
        keep = self._said_when_none
        return {name: value for name, value in said.items() if value is not None or name in keep}

    @classmethod
    def from_attributes(cls, attributes: dict[str, Any]) -> Any:
        """The record of stored ``attributes`` (keys it does not know are left out)."""
        return cls(**{name: attributes[name] for name in cls._names() if name in attributes})


# Keys the record owns; anything else a check adds (scopes, approval id, hashes…) is ``extra``.
_FIELDS = (
    "call_id",
    "tool",
    "check",
    "refused",
    "allowed",
    "held",
    "rule",
    "reason",
    "policy_version",
    "error",
    "decision",
    "decided_by",
)


@dataclass(frozen=True)
class PolicyCheck:
    """One decision of the policy about one tool call."""

    call_id: str
    tool: str
    # tool_enabled, acl, chain, arguments_json, schema, call_rule, approval, limit, honesty
    check: str
    refused: bool = False
    allowed: bool | None = None
    held: bool = False
    # A Casbin decision names its rule as a list of the line's fields; the others a name.
    rule: str | list[str] = ""
    reason: str = ""
    policy_version: int | None = None
    error: dict[str, Any] | None = None
    # A human's decision on a held call (approval checks on resume).
    decision: str = ""
    decided_by: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def attributes(self) -> dict[str, Any]:
        """The span's attributes (and the audit record's payload)."""
        values = {name: getattr(self, name) for name in _FIELDS}
        kept = {k: v for k, v in values.items() if v not in ("", None) or k == "refused"}
        if not self.held:
            kept.pop("held", None)
        return kept | self.extra

    @classmethod
    def from_attributes(cls, attributes: dict[str, Any]) -> PolicyCheck:
        known = {name: attributes[name] for name in _FIELDS if name in attributes}
        extra = {k: v for k, v in attributes.items() if k not in _FIELDS}
        if "decision" not in known and isinstance(extra.get("approval"), str):
            known["decision"] = extra.pop("approval")  # spans recorded before this record
        known.setdefault("call_id", "")
        known.setdefault("tool", "")
        known.setdefault("check", "")
        return cls(**known, extra=extra)

    @property
    def rule_name(self) -> str:
        """The rule as one string (a Casbin line's fields joined)."""
        return ", ".join(self.rule) if isinstance(self.rule, list) else self.rule


@dataclass(frozen=True)
class ModelCall(_Record):
    """What a ``model_call`` span says: a step's (or a plan's) call of the model.

    Written in parts as the call goes — each part a record with only its fields set, since
    ``None`` means "not said" and is not written — and read back whole."""

    step: int | None = None
    # A plan's call (plan, then act) rather than a step's; a revision after a failure.
    plan: bool | None = None
    revision: bool | None = None
    plan_steps: list[Any] | None = None
    plan_truncated: bool | None = None
    # The context sent: its tokens, what it would have been untrimmed, how it was trimmed.
    context_tokens: int | None = None
    context_full_tokens: int | None = None
    context_saved_tokens: int | None = None
    context_method: str | None = None
    # The answer.
    route: str | None = None
    model: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_calls: list[str] | None = None
    attempts: list[dict[str, Any]] | None = None
    cost_usd: float | None = None
    # What the gateway replaced in the answer (NUL, lone surrogates, NaN, …).
    normalised: list[str] | None = None
    # What the run's budget was charged for it.
    charged_usd: float | None = None
    # No answer: the gateway's error code (when it gave one) and the error as text.
    error_code: str | None = None
    error: str | None = None

    def attributes(self) -> dict[str, Any]:
        """The fields this part says, as span attributes. The answer's part says its cost
        even when unknown (``None``: the route has no price)."""
        kept = super().attributes()
        if self.route is not None:
            kept["cost_usd"] = self.cost_usd
        return kept

    @property
    def cost(self) -> Decimal:
        return Decimal(str(self.cost_usd or 0))


@dataclass(frozen=True)
class AgentSession(_Record):
    """What an ``agent_session`` span says: one drive of a run (the run's root span, one per
    drive: a resumed run has one per resumption). Opened with who runs what, closed with the
    drive's end: the status it left the run in, and the run's counts so far."""

    agent: str | None = None
    user_id: str | None = None
    tenant: str | None = None
    run_id: str | None = None
    resumed: bool | None = None
    driver: str | None = None  # which driver (worker, thread) drove it
    # How the drive ended.
    # (In the order the engine has always written them: stored JSON keeps its key order.)
    status: str | None = None
    handed_off: bool | None = None  # given back to the queue (the sync deadline passed)
    outcome: str | None = None
    outcome_counts: dict[str, int] | None = None
    steps: int | None = None
    waiting_for: list[str] | None = None  # the held calls' ids, when paused for approval
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    stop_reason: str | None = None
    last_resort: bool | None = None  # ended without its last step's rows
    error: str | None = None  # the internal error that failed the run


@dataclass(frozen=True)
class ToolCallSpan(_Record):
    """What a ``tool_call`` span says: one execution of a tool (its arguments and result are
    in the span's ``tool_io`` audit record, not here). Opened with the call, closed with how
    it went."""

    call_id: str | None = None
    tool: str | None = None
    duration_ms: float | None = None
    idempotency_key: str | None = None
    attempts: int | None = None
    replayed: bool | None = None  # the result came from the idempotency store
    result_digest: bool | None = None  # the model was shown a digest of a long result
    error_code: str | None = None
    # What the executor replaced in the tool's answer.
    normalised: list[str] | None = None
    # Recorded after the step that ran it could not be written (no I/O kept).
    last_resort: bool | None = None


@dataclass(frozen=True)
class HonestyCheck(_Record):
    """A ``policy_check`` span of the honesty guard (``check == "honesty"``): the final answer
    contradicted what the tools did, and was replaced."""

    check: ClassVar[str] = "honesty"  # stored, as every policy check names its check
    original_answer: str | None = None
    replaced_answer: str | None = None
    failures: list[dict[str, Any]] = field(default_factory=list)
    contradictions: list[dict[str, Any]] = field(default_factory=list)

    _said_when_none = frozenset({"original_answer", "replaced_answer"})

    def attributes(self) -> dict[str, Any]:
        return {"check": self.check} | super().attributes()


@dataclass(frozen=True)
class ApprovalDecision(_Record):
    """What an ``approval`` span says: a human decided a held call (approved, denied, or it
    expired)."""

    call_id: str = ""
    tool: str = ""
    decision: str = ""  # the approval's status
    decided_by: str = ""
    comment: str = ""
    rule: str = ""
    policy_version: int | None = None
    arguments_sha256: str = ""
    requested_at: str = ""  # ISO 8601
    # Held again after an approver's edit: which round of it (absent for the first).
    round: int | None = None

    _said_when_none = frozenset({"policy_version"})


@dataclass(frozen=True)
class ActionResponse(_Record):
    """What an ``action_response`` span says: how the run ended and the answer it gave."""

    status: str = ""
    answer: str | None = None
    detail: str | None = None
    stop_reason: str | None = None

    _said_when_none = frozenset({"answer", "detail", "stop_reason"})


SpanRecord = (
    AgentSession
    | ModelCall
    | ToolCallSpan
    | PolicyCheck
    | HonestyCheck
    | ApprovalDecision
    | ActionResponse
)

_BY_KIND: dict[str, type[Any]] = {
    SpanKind.AGENT_SESSION: AgentSession,
    SpanKind.MODEL_CALL: ModelCall,
    SpanKind.TOOL_CALL: ToolCallSpan,
    SpanKind.POLICY_CHECK: PolicyCheck,
    SpanKind.APPROVAL: ApprovalDecision,
    SpanKind.ACTION_RESPONSE: ActionResponse,
}


def record_of(kind: str, attributes: dict[str, Any]) -> SpanRecord | None:
    """The typed record of a stored span of ``kind`` (``None`` for a kind no record
    describes)."""
    if kind == SpanKind.POLICY_CHECK and attributes.get("check") == HonestyCheck.check:
        return HonestyCheck.from_attributes(attributes)
    record = _BY_KIND.get(kind)
    return None if record is None else record.from_attributes(attributes)
