"""The attributes of a span, as one typed record per kind: ``policy_check`` and
``model_call``.

The live engine writes them, and replay and the console read them back: one definition of the
keys, so a renamed attribute cannot silently turn a recorded refusal into "allowed" (or a
step's tokens into none).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any

from gateway.messages import ModelResponse

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
class ModelCall:
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

    @classmethod
    def answered(cls, response: ModelResponse) -> ModelCall:
        usage = response.usage
        return cls(
            route=response.route,
            model=response.model,
            finish_reason=response.finish_reason,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            tool_calls=[c.name for c in response.tool_calls],
            attempts=response.attempts,
            cost_usd=response.cost_usd,
            normalised=response.normalised or None,
        )

    def attributes(self) -> dict[str, Any]:
        """The fields this part says, as span attributes. The answer's part says its cost
        even when unknown (``None``: the route has no price)."""
        said = {f.name: getattr(self, f.name) for f in _MODEL_CALL_FIELDS}
        kept = {name: value for name, value in said.items() if value is not None}
        if self.route is not None:
            kept["cost_usd"] = self.cost_usd
        return kept

    @classmethod
    def from_attributes(cls, attributes: dict[str, Any]) -> ModelCall:
        return cls(
            **{f.name: attributes[f.name] for f in _MODEL_CALL_FIELDS if f.name in attributes}
        )

    @property
    def cost(self) -> Decimal:
        return Decimal(str(self.cost_usd or 0))


_MODEL_CALL_FIELDS = fields(ModelCall)
