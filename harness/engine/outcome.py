"""A run's outcome: what happened inside it, beside the status that says how it ended.

Every tool result the engine appends is sorted into a kind (or none, when the call did what
it was asked), and the honesty guard adds ``corrected`` when it changed the final answer. The
run's ``outcome`` is the worst kind seen (``clean`` when none), with a count per kind; both
are written with each step, in the step's own fenced UPDATE of the run row (no statement of
their own).

Severity, worst first (docs/api.md, "Run outcome"): ``corrected`` (the answer the model wrote
contradicted the record and had to be rewritten: the agent itself cannot be trusted on this
run, whatever else happened; the counts still show the failure behind it), ``tool_failed`` (a
tool ran and failed, or its effect is unknown: something broke), ``denied`` (a human stopped an
action the agent meant to take), ``refused`` (the policy stopped a call, as designed),
``clean``.
"""

from __future__ import annotations

import json

from gateway.messages import Message
from harness.models import RunOutcome as Outcome
from tools.errors import ToolErrorCode

# Worst first: a run's outcome is the first of these it has a count of.
SEVERITY = (Outcome.CORRECTED, Outcome.TOOL_FAILED, Outcome.DENIED, Outcome.REFUSED)

# Error codes by kind. Refusals are every "no" of the decision chain before a call runs (the
# tool, the ACL, chain and call rules, the arguments, the limits, a call the loop would not
# repeat); denials are a human's (or an approval that expired or no longer matches); every
# other error is the tool's own (it ran, or may have: ``outcome_unknown``, ``timeout``).
REFUSED_CODES = frozenset(
    {
        ToolErrorCode.UNKNOWN_TOOL,
        ToolErrorCode.PERMISSION_DENIED,
        ToolErrorCode.INVALID_ARGUMENTS_JSON,
        ToolErrorCode.INVALID_ARGUMENTS,
        ToolErrorCode.POLICY_REFUSED,
        ToolErrorCode.LIMIT_EXCEEDED,
        "not_executed",
    }
)
DENIED_CODES = frozenset({ToolErrorCode.APPROVAL_DENIED})


def error_code(message: Message) -> str:
    """The ``error.code`` of a failed tool result ("" if it carries none)."""
    try:
        error = json.loads(message.content).get("error") or {}
    except (ValueError, AttributeError):
        return ""
    return str(error.get("code", "")) if isinstance(error, dict) else ""


def kind_of(message: Message) -> Outcome | None:
    """The outcome kind of one conversation message: None unless a tool result that failed."""
    if message.role != "tool" or not message.is_error:
        return None
    code = error_code(message)
    if code in DENIED_CODES:
        return Outcome.DENIED
    if code in REFUSED_CODES:
        return Outcome.REFUSED
    return Outcome.TOOL_FAILED


def worst(counts: dict[str, int]) -> Outcome:
    for kind in SEVERITY:
        if counts.get(kind, 0) > 0:
            return kind
    return Outcome.CLEAN


def counted(messages: list[Message], corrected: bool = False) -> dict[str, int]:
    """The counts per kind of a whole conversation (a backfill, or a check of the engine's)."""
    counts: dict[str, int] = {}
    for message in messages:
        kind = kind_of(message)
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
    if corrected:
        counts[Outcome.CORRECTED] = counts.get(Outcome.CORRECTED, 0) + 1
    return counts


class OutcomeTally:
    """The run's counts as the engine goes: started from the row (a resumed run keeps what
    its earlier drives counted), added to as tool results are appended."""

    def __init__(self, counts: dict[str, int] | None = None) -> None:
        self.counts: dict[str, int] = dict(counts or {})

    def add(self, kind: Outcome | None) -> None:
        if kind is not None:
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def note(self, message: Message) -> None:
        self.add(kind_of(message))

    @property
    def outcome(self) -> Outcome:
        return worst(self.counts)

    def fields(self) -> dict[str, object]:
        """The run row's columns, as a step writes them."""
        return {"outcome": str(self.outcome), "outcome_counts": dict(self.counts)}
