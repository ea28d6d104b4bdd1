"""The attributes of a ``policy_check`` span, as a typed record.

The live engine writes them, and replay and the console read them back: one definition of the
keys, so a renamed attribute cannot silently turn a recorded refusal into "allowed".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
