"""Tenants' custom masking patterns: checked, tried on a sample, saved with an audit record.

A pattern is a Python regular expression for an identifier of the tenant's own (an internal
customer number, a contract id). It is refused unless it compiles, cannot match the empty
string, has no nested unbounded repetition (``(a+)+``: the shape that makes a regular
expression take exponential time), and finds at least one value in the sample it is saved
with. Every add, update and removal is recorded (``MaskingPatternChange``: who, when, before,
after), as policy edits are; every process picks a change up within
``plugins.TENANT_PATTERNS_TTL_S`` seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from django.db import transaction

from traces.errors import MaskingPatternInvalid, MaskingPatternNotFound
from traces.masking.plugins import (
    BUILTIN_KINDS,
    KIND_PATTERN,
    PatternDetector,
    forget_tenant_patterns,
)

MAX_PATTERN_LENGTH = 500
MAX_SAMPLE_LENGTH = 10_000
_UNBOUNDED = sre_constants.MAXREPEAT
_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT)


@dataclass(frozen=True)
class PatternTrial:
    """What a pattern found in its sample, and the sample as it would be stored."""

    found: list[str]
    masked_sample: str


def try_pattern(kind: str, pattern: str, sample: str) -> PatternTrial:
    """Check a pattern and try it on ``sample``. Raises ``MaskingPatternInvalid``."""
    if not KIND_PATTERN.fullmatch(kind or ""):
        raise MaskingPatternInvalid(
            "kind", "The kind must be 2-40 characters: a-z, 0-9 and _, starting with a letter."
        )
    if kind in BUILTIN_KINDS:
        raise MaskingPatternInvalid("kind", f"{kind!r} is a built-in kind; choose another name.")
    if not pattern or len(pattern) > MAX_PATTERN_LENGTH:
        raise MaskingPatternInvalid(
            "pattern", f"The pattern must be 1-{MAX_PATTERN_LENGTH} characters."
        )
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise MaskingPatternInvalid(
            "pattern", f"Not a valid regular expression: {error}."
        ) from error
    if compiled.groups > 1:
        raise MaskingPatternInvalid(
            "pattern", "Use at most one capturing group (the value); (?:…) groups otherwise."
        )
    if compiled.fullmatch("") is not None or (compiled.groups and compiled.search("") is not None):
        raise MaskingPatternInvalid("pattern", "The pattern matches the empty string.")
    if _nested_unbounded(sre_parse.parse(pattern)):
        raise MaskingPatternInvalid(
            "pattern", "Nested unbounded repetition such as (a+)+ can take exponential time."
        )
    if not sample or len(sample) > MAX_SAMPLE_LENGTH:
        raise MaskingPatternInvalid(
            "sample", f"Give a sample text (up to {MAX_SAMPLE_LENGTH} characters) with a value."
        )
    detector = PatternDetector(kind, compiled)
    found = [sample[start:end] for start, end in detector.find(sample)]
    if not found:
        raise MaskingPatternInvalid("sample", "The pattern finds nothing in the sample.")
    from traces.masking.masker import Masker
    from traces.masking.plugins import register

    masker = Masker(b"pattern-trial", detectors=(register(detector),))
    return PatternTrial(found=found, masked_sample=masker.mask_text(sample))


def _nested_unbounded(parsed: Any, inside_unbounded: bool = False) -> bool:
    for op, value in parsed:
        if op in _REPEATS:
            _low, high, item = value
            unbounded = high == _UNBOUNDED
            if unbounded and inside_unbounded:
                return True
            if _nested_unbounded(item, inside_unbounded or unbounded):
                return True
        elif op == sre_constants.SUBPATTERN:
            if _nested_unbounded(value[-1], inside_unbounded):
                return True
        elif op == sre_constants.BRANCH and any(
            _nested_unbounded(branch, inside_unbounded) for branch in value[1]
        ):
            return True
    return False


def _snapshot(row: Any) -> dict[str, Any]:
    return {"kind": row.kind, "pattern": row.pattern, "sample": row.sample, "enabled": row.enabled}


def save_pattern(
    tenant: str, kind: str, pattern: str, sample: str, actor: str, enabled: bool = True
) -> PatternTrial:
    """Add or update ``tenant``'s pattern for ``kind`` after trying it on ``sample``; records
    the change. Raises ``MaskingPatternInvalid``. Saving the same values again records
    nothing."""
    from traces.models import MaskingPattern, MaskingPatternChange

    trial = try_pattern(kind, pattern, sample)
    with transaction.atomic():
        row = MaskingPattern.objects.select_for_update().filter(tenant=tenant, kind=kind).first()
        before = _snapshot(row) if row else None
        if row is None:
            row = MaskingPattern(tenant=tenant, kind=kind)
        row.pattern, row.sample, row.enabled = pattern, sample, enabled
        after = _snapshot(row)
        if before != after:
            row.save()
            MaskingPatternChange.objects.create(
                tenant=tenant,
                actor=actor,
                action="update" if before else "add",
                kind=kind,
                before=before,
                after=after,
            )
    forget_tenant_patterns(tenant)
    return trial


def remove_pattern(tenant: str, kind: str, actor: str) -> None:
    """Delete ``tenant``'s pattern for ``kind``; records the change. Raises
    ``MaskingPatternNotFound``."""
    from traces.models import MaskingPattern, MaskingPatternChange

    with transaction.atomic():
        row = MaskingPattern.objects.select_for_update().filter(tenant=tenant, kind=kind).first()
        if row is None:
            raise MaskingPatternNotFound(tenant, kind)
        MaskingPatternChange.objects.create(
            tenant=tenant, actor=actor, action="remove", kind=kind, before=_snapshot(row)
        )
        row.delete()
    forget_tenant_patterns(tenant)
