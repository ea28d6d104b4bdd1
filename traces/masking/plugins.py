"""Detectors beyond the built-in ones: from configuration, and tenants' custom patterns.

The interface (what ``HARNESS_MASKING_DETECTORS`` names: a detector object, a class or a
zero-argument factory returning one)::

    kind: str                                   # e.g. "customer_number"
    find(text) -> iterable of (start, end)      # spans of the values in text
    check(value) -> bool                        # optional: a checksum; False = leave it
    mask(value, digest) -> str                  # optional: the stored form
    normalize(value) -> str | None              # optional: what is fingerprinted
    fingerprinted: bool                         # optional, default True

A detector of a built-in kind (``phone``, ``email``, ``card``, ``iban``, ``national_id``…)
masks and fingerprints like that kind. A new kind is stored as ``[<kind>:1a2b3c4d]`` (the
fingerprint's first 8 hex digits) unless the detector says otherwise, and is fingerprinted
as ``HMAC(key, "<kind>:<normalize(value)>")`` so auditors can search by it.

Tenants' patterns (``TenantPattern``) run on RE2, not on Python's ``re``: a tenant is not
trusted with a backtracking engine that holds the GIL for as long as a pattern likes (a
pattern such as ``(?:a|a)+b`` took every tenant's runs and ``/healthz`` from 0.02 s to 9 s).
RE2 takes time linear in the text for one search, and releases the GIL while it searches;
finding every value is one search per value, so a pattern whose searches each read far ahead
(``a(?:a*b)?`` on a long run of ``a``) is still quadratic. Each text's scan therefore has a
budget; a pattern that spends it is disabled and reported (``_disable``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import re2
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

BUILTIN_KINDS = frozenset(
    {"phone", "email", "national_id", "card", "iban", "name", "address"}
    | {"private_key", "jwt", "bearer_token", "api_key", "secret"}
)
KIND_PATTERN = re.compile(r"[a-z][a-z0-9_]{1,39}")
# How long a process keeps a tenant's custom patterns before reading them again.
TENANT_PATTERNS_TTL_S = 5.0
# The time one text's scan by a tenant's patterns may take, all patterns together: a fixed
# part and a part per character (RE2 reads well over 100 characters a microsecond, so a sound
# pattern uses a small fraction of it). A scan stops at the first value found past it.
TENANT_SCAN_BUDGET_S = 0.25
TENANT_SCAN_BUDGET_PER_CHAR_S = 1e-6
# Who ``_disable`` records as the actor of a pattern it disables.
SCAN_BUDGET_ACTOR = "harness:scan-budget"


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # refusals are reported to the author, not logged by RE2
    return options


# RE2 compiles counted repetitions out, in time that grows faster than their sum
# (``a{1,1000}`` fifty times: 20 s); a pattern is refused past this many positions.
MAX_EXPANDED_POSITIONS = 2000


def compile_tenant_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (the engine tenants' patterns run on). Raises
    ``re2.error``, also for a pattern over ``MAX_EXPANDED_POSITIONS``."""
    positions = expanded_positions(pattern)
    if positions > MAX_EXPANDED_POSITIONS:
        raise re2.error(
            f"pattern too large: {positions} positions once its repetitions are counted out "
            f"(at most {MAX_EXPANDED_POSITIONS})"
        )
    return re2.compile(pattern, _re2_options())


def expanded_positions(pattern: str) -> int:
    """How many characters ``pattern`` spells out once counted repetitions are expanded (an
    unbounded one counts its minimum plus one); from Python's parse, or, for syntax only RE2
    reads, from the counts written in it."""
    from re import _constants as sre_constants  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]

    def size(seq: Any) -> int:
        total = 0
        for op, value in seq:
            if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
                low, high, body = value
                count = low + 1 if high == sre_constants.MAXREPEAT else high
                total += max(count, 1) * size(body)
            elif op == sre_constants.SUBPATTERN:
                total += size(value[-1])
            elif op == sre_constants.BRANCH:
                total += sum(size(branch) for branch in value[1])
            else:
                total += 1
        return total

    try:
        return size(sre_parse.parse(pattern))
    except (re.error, OverflowError, RecursionError):
        counts = re.findall(r"\{(\d+)(?:,(\d*))?\}", pattern)
        return len(pattern) + sum(int(high or low) for low, high in counts)


def scan_budget_s(length: int, patterns: int = 1) -> float:
    """One pattern's share of the budget for scanning a text of ``length`` characters."""
    return (TENANT_SCAN_BUDGET_S + TENANT_SCAN_BUDGET_PER_CHAR_S * length) / max(patterns, 1)


@dataclass(frozen=True)
class PatternDetector:
    """A regular expression (group 1 if it has groups) with an optional check."""

    kind: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        group = 1 if self.pattern.groups else 0
        for match in self.pattern.finditer(text):
            start, end = match.span(group)
            if end > start and (self.check is None or self.check(text[start:end])):
                yield start, end


class TenantPattern:
    """A tenant's pattern, on RE2, within a budget per text.

    Past its budget a scan stops and what it did not read is returned as one value of the kind
    (masked, so that nothing it should have masked is stored in clear). The first time, with
    ``report``, the row is disabled and the change recorded (``_disable``): maskers made from
    then on do not load the pattern, and those that hold it (runs under way) go on scanning
    each text within its budget, failing closed the same way."""

    engine = "re2"

    def __init__(
        self,
        kind: str,
        pattern: str,
        tenant: str | None = None,
        patterns: int = 1,
        report: bool = True,
    ) -> None:
        self.kind, self.source, self.tenant = kind, pattern, tenant
        self.regex = compile_tenant_pattern(pattern)
        self._group = 1 if self.regex.groups else 0
        self._patterns, self._report = patterns, report
        self.exceeded: str | None = None  # why a scan last stopped, once one has

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        started = time.monotonic()
        budget = scan_budget_s(len(text), self._patterns)
        group, read = self._group, 0
        # One RE2 search per value: the clock is read between searches, each linear in the text.
        for match in self.regex.finditer(text):
            start, end = match.span(group)
            read = match.end()
            if end > start:
                yield start, end
            elapsed = time.monotonic() - started
            if elapsed > budget and read < len(text):
                self.exceeded = (
                    f"scan budget exceeded: {elapsed:.3f} s (budget {budget:.3f} s) on a text of "
                    f"{len(text)} characters, stopped at character {read}"
                )
                if self._report:
                    self._report = False  # once: the row is disabled for every process
                    _disable(self.tenant, self.kind, self.source, self.exceeded)
                yield read, len(text)  # unread: masked whole rather than stored in clear
                return


def _disable(tenant: str | None, kind: str, pattern: str, reason: str) -> None:
    """Disable ``tenant``'s pattern for ``kind`` (if it is still ``pattern``), record the
    change (``MaskingPatternChange``, action ``disable``) and log it. Runs in a savepoint: a
    failure is logged and leaves the caller's transaction usable."""
    logger.warning(
        "tenant masking pattern disabled: tenant=%s kind=%s pattern=%r: %s",
        tenant,
        kind,
        pattern,
        reason,
    )
    forget_tenant_patterns(tenant or "")
    if not tenant:
        return
    from traces.models import MaskingPattern, MaskingPatternChange

    try:
        with transaction.atomic():
            row = (
                MaskingPattern.objects.select_for_update()
                .filter(tenant=tenant, kind=kind, pattern=pattern, enabled=True)
                .first()
            )
            if row is None:
                return  # changed or disabled meanwhile
            before = {"kind": kind, "pattern": pattern, "sample": row.sample, "enabled": True}
            row.enabled = False
            row.save(update_fields=["enabled", "updated_at"])
            MaskingPatternChange.objects.create(
                tenant=tenant,
                actor=SCAN_BUDGET_ACTOR,
                action="disable",
                kind=kind,
                before=before,
                after={**before, "enabled": False, "reason": reason},
            )
    except Exception:  # reporting must never stop the masking (no database in this context…)
        logger.exception("could not disable tenant=%s kind=%s", tenant, kind)


class KindRules:
    """How values of a kind that is not built in are stored and fingerprinted."""

    def __init__(self, detector: Any) -> None:
        self.kind = detector.kind
        self._mask = getattr(detector, "mask", None)
        self._normalize = getattr(detector, "normalize", None)
        self.fingerprinted = bool(getattr(detector, "fingerprinted", True))

    def normalize(self, value: str) -> str:
        if self._normalize is not None:
            return self._normalize(value) or value.strip()
        return re.sub(r"[\s-]+", "", value).upper()

    def mask_value(self, masker: Any, value: str) -> str:
        digest = masker.fingerprint(self.kind, self.normalize(value)) if self.fingerprinted else ""
        if self._mask is not None:
            return self._mask(value, digest)
        return f"[{self.kind}:{digest[:8]}]" if digest else f"[{self.kind} removed]"


_KINDS: dict[str, KindRules] = {}


def registered_kind(kind: str) -> KindRules | None:
    return _KINDS.get(kind)


def searchable_kinds() -> list[KindRules]:
    return [rules for rules in _KINDS.values() if rules.fingerprinted]


def register(detector: Any) -> Any:
    """Check ``detector`` has the interface and register its kind's rules."""
    kind = getattr(detector, "kind", None)
    if not isinstance(kind, str) or not KIND_PATTERN.fullmatch(kind):
        raise ImproperlyConfigured(f"masking detector {detector!r}: kind must match [a-z_0-9]")
    if not callable(getattr(detector, "find", None)):
        raise ImproperlyConfigured(f"masking detector {kind!r} has no find(text)")
    if kind not in BUILTIN_KINDS:
        _KINDS[kind] = KindRules(detector)
    check = getattr(detector, "check", None)
    if check is not None and not isinstance(detector, PatternDetector):
        detector = _Checked(detector, check)
    return detector


class _Checked:
    def __init__(self, detector: Any, check: Callable[[str], bool]) -> None:
        self.kind, self._detector, self._check = detector.kind, detector, check

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        for start, end in self._detector.find(text):
            if self._check(text[start:end]):
                yield start, end


_CONFIGURED: dict[tuple[str, ...], tuple[Any, ...]] = {}


def configured_detectors(paths: Iterable[str]) -> tuple[Any, ...]:
    """The detectors ``HARNESS_MASKING_DETECTORS`` names, imported once per process."""
    key = tuple(paths)
    if key not in _CONFIGURED:
        detectors = []
        for path in key:
            try:
                target = import_string(path)
            except ImportError as error:
                raise ImproperlyConfigured(f"HARNESS_MASKING_DETECTORS: {error}") from error
            is_factory = isinstance(target, type) or (
                callable(target) and not hasattr(target, "find")
            )
            detector = target() if is_factory else target
            detectors.append(register(detector))
        _CONFIGURED[key] = tuple(detectors)
    return _CONFIGURED[key]


_TENANT_CACHE: dict[str, tuple[float, tuple[Any, ...]]] = {}


def tenant_detectors(tenant: str | None) -> tuple[Any, ...]:
    """A tenant's enabled custom patterns on RE2, sharing one scan budget per text (cached per
    process for a few seconds). A stored pattern RE2 refuses (saved before patterns ran on
    it) is disabled and reported rather than run."""
    if not tenant:
        return ()
    now = time.monotonic()
    cached = _TENANT_CACHE.get(tenant)
    if cached is not None and now - cached[0] < TENANT_PATTERNS_TTL_S:
        return cached[1]
    from traces.models import MaskingPattern

    rows = list(MaskingPattern.objects.filter(tenant=tenant, enabled=True).order_by("id"))
    detectors = []
    for row in rows:
        try:
            detectors.append(register(TenantPattern(row.kind, row.pattern, tenant, len(rows))))
        except re2.error as error:
            _disable(tenant, row.kind, row.pattern, f"RE2 refuses it: {re2_message(error)}")
    _TENANT_CACHE[tenant] = (now, tuple(detectors))
    return _TENANT_CACHE[tenant][1]


def re2_message(error: Exception) -> str:
    """RE2's own words for a refusal (its binding hands them over as bytes)."""
    text = error.args[0] if error.args else error
    return text.decode(errors="replace") if isinstance(text, bytes) else str(text)


def forget_tenant_patterns(tenant: str) -> None:
    _TENANT_CACHE.pop(tenant, None)
