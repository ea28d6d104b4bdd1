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
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

BUILTIN_KINDS = frozenset(
    {"phone", "email", "national_id", "card", "iban", "name", "address"}
    | {"private_key", "jwt", "bearer_token", "api_key", "secret"}
)
KIND_PATTERN = re.compile(r"[a-z][a-z0-9_]{1,39}")
# How long a process keeps a tenant's custom patterns before reading them again.
TENANT_PATTERNS_TTL_S = 5.0


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
    """A tenant's enabled custom patterns (cached per process for a few seconds)."""
    if not tenant:
        return ()
    now = time.monotonic()
    cached = _TENANT_CACHE.get(tenant)
    if cached is not None and now - cached[0] < TENANT_PATTERNS_TTL_S:
        return cached[1]
    from traces.models import MaskingPattern

    detectors = tuple(
        register(PatternDetector(row.kind, re.compile(row.pattern)))
        for row in MaskingPattern.objects.filter(tenant=tenant, enabled=True).order_by("id")
    )
    _TENANT_CACHE[tenant] = (now, detectors)
    return detectors


def forget_tenant_patterns(tenant: str) -> None:
    _TENANT_CACHE.pop(tenant, None)
