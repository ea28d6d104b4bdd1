r"""Tenants' custom masking patterns: checked, tried on a sample, saved with an audit record.

A pattern is a regular expression for an identifier of the tenant's own (an internal customer
number, a contract id). It runs on RE2 (``plugins.TenantPattern``), so RE2's parser decides
what is accepted: lookarounds, backreferences, conditionals, atomic groups and possessive
quantifiers are refused, the refusal naming the construct. It must also read the same under
Python's parser (patterns stay portable), have at most one capturing group, not match the
empty string, have none of the shapes that take a backtracking engine exponential or
high-polynomial time (``_backtracking_hazard``: ``(a+)+``, ``(?:a|a)+``, ``(?:a|aa)+``,
``\d+\d+``), and find at least one value in the sample it is saved with (a sample of at most
``MAX_SAMPLE_LENGTH`` characters, scanned within the same budget as a run's texts). RE2 bounds
the time anyway; the shape check tells the author early and keeps patterns portable.

Every add, update and removal is recorded (``MaskingPatternChange``: who, when, before,
after), as policy edits are; every process picks a change up within
``plugins.TENANT_PATTERNS_TTL_S`` seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from re import _compiler as sre_compile  # type: ignore[attr-defined]
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import re2
from django.db import transaction

from traces.errors import MaskingPatternInvalid, MaskingPatternNotFound
from traces.masking.plugins import (
    BUILTIN_KINDS,
    KIND_PATTERN,
    TenantPattern,
    forget_tenant_patterns,
    re2_message,
)

MAX_PATTERN_LENGTH = 500
MAX_SAMPLE_LENGTH = 10_000
_UNBOUNDED = sre_constants.MAXREPEAT
_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT)
# A repetition that can iterate this often multiplies an ambiguity past what a backtracking
# engine survives (2**10 paths per start position and up).
_MANY = 10


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
    parsed = _parse(pattern)
    hazard = _backtracking_hazard(parsed)
    if hazard:
        raise MaskingPatternInvalid(
            "pattern",
            f"{hazard} (a backtracking engine can take exponential time, or polynomial time, "
            "on such a pattern; RE2 would not, but the pattern is refused so that it stays "
            "safe wherever it is used).",
        )
    if not sample or len(sample) > MAX_SAMPLE_LENGTH:
        raise MaskingPatternInvalid(
            "sample", f"Give a sample text (up to {MAX_SAMPLE_LENGTH} characters) with a value."
        )
    detector = TenantPattern(kind, pattern, report=False)
    found = [sample[start:end] for start, end in detector.find(sample)]
    if detector.exceeded:
        raise MaskingPatternInvalid("pattern", f"On the sample: {detector.exceeded}.")
    if not found:
        raise MaskingPatternInvalid("sample", "The pattern finds nothing in the sample.")
    from traces.masking.masker import Masker
    from traces.masking.plugins import register

    masker = Masker(b"pattern-trial", detectors=(register(detector),))
    return PatternTrial(found=found, masked_sample=masker.mask_text(sample))


# What RE2 refuses and a backtracking engine would accept, by the node Python's parser makes.
_UNSUPPORTED = {
    sre_constants.GROUPREF: r"a backreference (\1, (?P=name))",
    sre_constants.GROUPREF_EXISTS: "a conditional group (?(1)…|…)",
    sre_constants.ATOMIC_GROUP: "an atomic group (?>…)",
    sre_constants.POSSESSIVE_REPEAT: "a possessive quantifier (a*+, a++)",
}


def _parse(pattern: str) -> Any:
    """Python's parse of ``pattern`` once RE2 (the engine it runs on) has accepted it, with at
    most one capturing group and no empty match. Raises ``MaskingPatternInvalid``."""
    try:
        compiled = TenantPattern("trial", pattern, report=False).regex
    except re2.error as error:
        construct = _unsupported_construct(pattern)
        if construct:
            raise MaskingPatternInvalid(
                "pattern",
                f"Uses {construct}, which tenant patterns do not support: they run on RE2, "
                "which matches in linear time and has no lookarounds or backreferences "
                f"(RE2: {re2_message(error)}).",
            ) from error
        raise MaskingPatternInvalid(
            "pattern", f"Not a valid regular expression for RE2: {re2_message(error)}."
        ) from error
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError) as error:
        raise MaskingPatternInvalid(
            "pattern",
            f"Use syntax that Python's re reads too (patterns stay portable): {error}.",
        ) from error
    if compiled.groups > 1:
        raise MaskingPatternInvalid(
            "pattern", "Use at most one capturing group (the value); (?:…) groups otherwise."
        )
    if compiled.fullmatch("") is not None or (compiled.groups and compiled.search("") is not None):
        raise MaskingPatternInvalid("pattern", "The pattern matches the empty string.")
    return parsed


def _unsupported_construct(pattern: str) -> str | None:
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        # Python refuses a conditional on a group that does not exist: still name it.
        return _UNSUPPORTED[sre_constants.GROUPREF_EXISTS] if "(?(" in pattern else None
    for op, value in _nodes(parsed):
        if op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            behind, negative = value[0] < 0, op == sre_constants.ASSERT_NOT
            return "a {}{} ({})".format(
                "negative " if negative else "",
                "lookbehind" if behind else "lookahead",
                ("(?<!…)" if negative else "(?<=…)")
                if behind
                else ("(?!…)" if negative else "(?=…)"),
            )
        if op in _UNSUPPORTED:
            return _UNSUPPORTED[op]
    return None


def _nodes(parsed: Any) -> Any:
    """Every node of a parse, depth first."""
    for op, value in parsed:
        yield op, value
        if op in _REPEATS:
            yield from _nodes(value[2])
        elif op in (sre_constants.SUBPATTERN, sre_constants.ATOMIC_GROUP):
            yield from _nodes(value[-1] if op == sre_constants.SUBPATTERN else value)
        elif op == sre_constants.BRANCH:
            for branch in value[1]:
                yield from _nodes(branch)
        elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            yield from _nodes(value[1])
        elif op == sre_constants.GROUPREF_EXISTS:
            for branch in value[1:]:
                if branch is not None:
                    yield from _nodes(branch)


def _backtracking_hazard(parsed: Any) -> str | None:
    """The first shape in ``parsed`` that makes a backtracking engine take exponential or
    high-polynomial time, named for the author, or None. An approximation that errs towards
    refusing (``(?:ab|a)+`` is refused though only ``(?:a|aa)+`` is ambiguous); character sets
    are compared on a probe alphabet (ASCII, the pattern's own literals, a few others)."""
    return _Shapes(parsed).hazard(parsed, unbounded=False, many=False)


def _named_characters(parsed: Any) -> set[str]:
    """The characters ``parsed`` names: its literals, in a set or not, and the bounds of its
    sets' ranges. Two ranges that share a character share the lower bound of one of them, so
    with these in the probe alphabet ``[\u0400-\u04ff]+[\u0410-\u0420]+`` is seen to overlap."""
    named = set()
    for op, value in _nodes(parsed):
        if op in (sre_constants.LITERAL, sre_constants.NOT_LITERAL):
            named.add(chr(value))
        elif op == sre_constants.IN:
            for item, argument in value:
                if item == sre_constants.LITERAL:
                    named.add(chr(argument))
                elif item == sre_constants.RANGE:
                    named.update((chr(argument[0]), chr(argument[1])))
    return named


class _Shapes:
    _PROBES = "éß中٣\u00a0\u2028\u3000\uff21\uff11"  # …, fullwidth A and 1

    def __init__(self, parsed: Any) -> None:
        self._state = parsed.state
        self._alphabet = "".join(
            sorted({chr(c) for c in range(128)} | set(self._PROBES) | _named_characters(parsed))
        )
        self._sets: dict[int, frozenset[str]] = {}

    def hazard(self, seq: Any, unbounded: bool, many: bool) -> str | None:
        for index, (op, value) in enumerate(seq):
            if op in _REPEATS:
                _low, high, body = value
                its_unbounded, its_many = high == _UNBOUNDED, high == _UNBOUNDED or high >= _MANY
                if its_unbounded and unbounded:
                    return "Nested unbounded repetition such as (a+)+: repeat the inner item once"
                if its_many and self._ambiguous(body, self._first(body)):
                    return (
                        "A repetition whose item can stop or go on at the same character, "
                        r"such as (a+)+, (?:a|aa)+, (?:a?a)+ or (?:\d{1,2})+: make where "
                        r"each item ends unambiguous, e.g. (?:\d{3}-?)+ or \d(?:\d-)*"
                    )
                found = self.hazard(body, unbounded or its_unbounded, many or its_many)
            elif op == sre_constants.SUBPATTERN:
                found = self.hazard(value[-1], unbounded, many)
            elif op == sre_constants.BRANCH:
                if many and self._overlap(value[1]):
                    return (
                        "Alternatives that can start alike inside a repetition, such as "
                        r"(?:a|a)+ or (?:ab|a.)+: factor the common start out, e.g. a(?:b|.)"
                    )
                found = next((f for b in value[1] if (f := self.hazard(b, unbounded, many))), None)
            else:
                found = None
            if found:
                return found
            if self._adjacent_overlap(seq, index):
                return (
                    "Unbounded repetitions in a row that can match the same characters, such as "
                    r"\d+\d+ or \s*#?\s*: keep one of them, e.g. \d+ or \s*(?:#\s*)?"
                )
        return None

    # --- shapes ---------------------------------------------------------------------------

    def _ambiguous(self, seq: Any, follow: frozenset[str]) -> bool:
        """Whether a part of ``seq`` that can stop or go on (``a?``, ``a{1,2}``, ``(?:|a)``)
        can go on with a character that could also come next (``follow``: what follows
        ``seq``). Repeated, each such point doubles the ways a backtracking engine tries."""
        for index, (op, value) in enumerate(seq):
            rest = seq[index + 1 :]
            after = self._first(rest) | (follow if self._nullable(rest) else frozenset())
            if op in _REPEATS:
                low, high, body = value
                if low != high and self._first(body) & after:
                    return True
                if self._ambiguous(body, self._first(body) | after):
                    return True
            elif op == sre_constants.SUBPATTERN:
                if self._ambiguous(value[-1], after):
                    return True
            elif op == sre_constants.BRANCH:
                branches = value[1]
                if any(self._nullable(b) for b in branches) and after & frozenset().union(
                    *(self._first(b) for b in branches)
                ):
                    return True
                if any(self._ambiguous(b, after) for b in branches):
                    return True
        return False

    def _adjacent_overlap(self, seq: Any, index: int) -> bool:
        first = _unwrap(seq[index])
        if first is None:
            return False
        chars = self._all(first[2])
        for item in seq[index + 1 :]:
            other = _unwrap(item)
            if other is not None and chars & self._all(other[2]):
                return True
            if not self._nullable([item]):
                return False
        return False

    def _overlap(self, branches: Any) -> bool:
        seen: frozenset[str] = frozenset()
        empty = 0
        for branch in branches:
            if self._nullable(branch):
                empty += 1
            first = self._first(branch)
            if empty > 1 or seen & first:
                return True
            seen |= first
        return False

    # --- character sets -------------------------------------------------------------------

    def _nullable(self, seq: Any) -> bool:
        return sre_parse.SubPattern(self._state, list(seq)).getwidth()[0] == 0

    def _first(self, seq: Any) -> frozenset[str]:
        found: frozenset[str] = frozenset()
        for item in seq:
            found |= self._item(item, self._first)
            if not self._nullable([item]):
                break
        return found

    def _all(self, seq: Any) -> frozenset[str]:
        found: frozenset[str] = frozenset()
        for item in seq:
            found |= self._item(item, self._all)
        return found

    def _item(self, item: Any, inner: Any) -> frozenset[str]:
        op, value = item
        if op in _REPEATS:
            return inner(value[2])
        if op == sre_constants.SUBPATTERN:
            return inner(value[-1])
        if op == sre_constants.BRANCH:
            found: frozenset[str] = frozenset()
            for branch in value[1]:
                found |= inner(branch)
            return found
        if op in (
            sre_constants.LITERAL,
            sre_constants.NOT_LITERAL,
            sre_constants.IN,
            sre_constants.ANY,
        ):
            return self._chars(item)
        return frozenset()  # anchors: no character

    def _chars(self, item: Any) -> frozenset[str]:
        key = id(item)
        if key not in self._sets:
            one = sre_parse.SubPattern(self._state, [item])
            compiled = sre_compile.compile(one, self._state.flags)
            self._sets[key] = frozenset(m.group() for m in compiled.finditer(self._alphabet))
        return self._sets[key]


def _unwrap(item: Any) -> Any:
    """The unbounded repetition ``item`` is (through groups of one item), or None."""
    op, value = item
    while op == sre_constants.SUBPATTERN and len(value[-1]) == 1:
        op, value = value[-1][0]
    if op in _REPEATS and value[1] == _UNBOUNDED:
        return value
    return None


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
