"""Masking values before they are stored: declared fields first, then detectors everywhere.

A ``Masker`` lives as long as the run it masks for. What it learns from declared fields (a
customer's name in a tool result, say) it remembers as a *known value*, and replaces wherever
that value shows up again in the run: in the tool message the model is shown next, in the
model's answer that repeats it, in a span attribute. Detectors alone could not find a name.

Every identifier masked (declared or detected) is fingerprinted; ``drain()`` hands the new
fingerprints to whoever stores them. Masking is idempotent: masked text masks to itself, so a
conversation resumed from a masked checkpoint can be masked again safely.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from traces.masking.detectors import SECRET_KINDS, TEXT_DETECTORS
from traces.masking.emails import find_emails
from traces.masking.gate import NeedleGate
from traces.masking.kinds import FINGERPRINTED_KINDS, hmac_states, mask, normalize
from traces.masking.memo import SHORT_MEMO_SIZE, TextMemo
from traces.masking.numbers import NumberFinder, Span
from traces.masking.phone_validator import phone_regions, validator_for
from traces.masking.plugins import configured_detectors, registered_kind, tenant_detectors
from traces.masking.pointers import locate

_FINGERPRINTED = frozenset(FINGERPRINTED_KINDS)
# Object members whose value is a credential, whatever it looks like.
_SECRET_MEMBER = re.compile(
    r"(?i)^(?:password|passwd|pwd|secret|client_?secret|api_?key|apikey|access_?token|"
    r"refresh_?token|id_?token|session_?token|auth_?token|token|authorization|private_?key)$"
)
# The JSON escapes a number's span may start with (NumberFinder.find), and what they stand for.
_ESCAPED_NUMBER_START = {"\\u002b": "+", "\\u0028": "("}
# What ``Masker._member`` answers for a member name that names a credential.
_CREDENTIAL = object()
# Known values shorter than this are not searched for in free text (too many false hits).
MIN_KNOWN_LENGTH = 2
# How many values' stored forms a masker remembers (then it starts again).
MASK_MEMO_SIZE = 512


_GATE: NeedleGate | None = None


def _gate() -> NeedleGate:
    global _GATE
    if _GATE is None:
        _GATE = NeedleGate(TEXT_DETECTORS)
    return _GATE


class Masker:
    """Masks what one run stores.

    ``regions``: where phone numbers written nationally are looked up (default: the setting
    ``HARNESS_PHONE_REGIONS``). ``detectors``: extra detectors (``plugins``; default: those
    ``HARNESS_MASKING_DETECTORS`` names). ``tenant``: adds that tenant's custom patterns. Extra
    detectors are found before e-mail and numbers, so that a tenant's customer number is not
    taken for a phone number.
    """

    def __init__(
        self,
        key: bytes,
        *,
        regions: tuple[str, ...] | None = None,
        detectors: Sequence[Any] | None = None,
        tenant: str | None = None,
    ) -> None:
        self._key = key
        self._inner, self._outer = hmac_states(key)
        self._known: dict[str, str] = {}
        self._known_pattern: re.Pattern[str] | None = None
        self._memo = TextMemo()
        self._members: dict[Any, Any] = {}
        self._found: dict[tuple[str, str], None] = {}
        self._drained = 0
        self._masks: dict[tuple[str, str, str | None], str] = {}
        self._numbers = NumberFinder(validator_for(tuple(regions) if regions else phone_regions()))
        if detectors is None:
            detectors = (*configured_detectors(_setting("HARNESS_MASKING_DETECTORS", ())),)
        self._extra = (*tenant_detectors(tenant), *detectors)

    # --- public -------------------------------------------------------------------------

    def mask(self, value: Any, sensitive: Mapping[str, str] | None = None) -> Any:
        """A masked deep copy of a JSON-like ``value``.

        ``sensitive`` maps JSON pointers (RFC 6901, plus ``*`` for every member or element)
        into ``value`` to a declared kind; those are masked by kind and remembered.
        """
        if sensitive:
            value = self._mask_declared(_json_copy(value), sensitive)
        return self._walk(value)

    def mask_text(self, text: str) -> str:
        # A run masks each text once (until a declared value is learnt: see _remember).
        masked = self._memo.get(text)
        if masked is None:
            masked = self._memo.put(text, self._mask_text(text))
        return masked

    def find(self, text: str) -> list[Span]:
        """Every value the detectors find in ``text``: ``(start, end, kind, normalised or
        None)``, in order, without overlaps (secrets first, then extra detectors, e-mail,
        numbers)."""
        secrets = _gate().candidates(text)
        if not secrets and not self._extra and "@" not in text:
            return self._numbers_in(text)  # most texts
        spans: list[Span] = []
        for detector in secrets:
            spans.extend((s, e, detector.kind, None) for s, e in detector.find(text))
        for detector in self._extra:
            kind = detector.kind
            spans.extend((s, e, kind, None) for s, e in detector.find(text))
        if "@" in text:
            spans.extend([(s, e, "email", None) for s, e in find_emails(text)])
        if not spans:
            return self._numbers_in(text)
        spans.extend(self._numbers_in(text))
        return _without_overlaps(spans)

    def _numbers_in(self, text: str) -> list[Span]:
        """The number finder's spans; one that starts on the last character of an escaped "+"
        or "(" (``"\\u002b44 20 …"``: the finder reads escapes as what they stand for, where
        they end) starts at the escape."""
        spans = self._numbers.find(text)
        if "\\" not in text:
            return spans
        return [
            (span[0] - 5, *span[1:])
            if text[span[0] - 5 : span[0] + 1].lower() in _ESCAPED_NUMBER_START
            else span
            for span in spans
        ]

    def _mask_text(self, text: str) -> str:
        if self._known_pattern is not None and any(v in text for v in self._known):
            text = self._known_pattern.sub(lambda m: self._known[m.group(0)], text)
        spans = self.find(text)
        if not spans:
            return text
        parts, position = [], 0
        for start, end, kind, normalized in spans:
            parts.append(text[position:start])
            value = text[start:end]
            # A number found from an escaped "+" or "(" ("\u002b44 …", NumberFinder.find) is
            # masked as written unescaped.
            escaped = _ESCAPED_NUMBER_START.get(value[:6].lower()) if value[0] == "\\" else None
            if escaped:
                value = escaped + value[6:]
            parts.append(self._mask_one(kind, value, normalized))
            position = end
        parts.append(text[position:])
        return "".join(parts)

    def drain(self) -> list[tuple[str, str]]:
        """Fingerprints ``(kind, digest)`` found since the last call, in order of discovery."""
        found = list(self._found)[self._drained :]
        self._drained += len(found)
        return found

    # --- internals ----------------------------------------------------------------------

    def _mask_one(self, kind: str, value: str, normalized: str | None = None) -> str:
        # A run masks the same values again and again: a built-in kind's stored form is a
        # function of these arguments (and the key), and its fingerprint is recorded already.
        key = (kind, value, normalized)
        masked = self._masks.get(key)
        if masked is not None:
            return masked
        digest = ""
        if kind in _FINGERPRINTED:
            if not normalized:
                normalized = normalize(kind, value) or value.strip()
            digest = self.fingerprint(kind, normalized)
        elif kind not in SECRET_KINDS:
            plugin = registered_kind(kind)  # may change: not remembered
            return plugin.mask_value(self, value) if plugin else mask(kind, value, digest)
        masked = mask(kind, value, digest)
        if len(self._masks) >= MASK_MEMO_SIZE:
            self._masks.clear()
        self._masks[key] = masked
        return masked

    def fingerprint(self, kind: str, normalized: str) -> str:
        """Record and return the fingerprint of a value of ``kind`` (for extra detectors)."""
        # kinds.fingerprint, from the key's states this masker holds.
        inner = self._inner.copy()
        inner.update(f"{kind}:{normalized}".encode("utf-8", "surrogatepass"))
        outer = self._outer.copy()
        outer.update(inner.digest())
        digest = outer.hexdigest()
        self._found[kind, digest] = None  # a key already there keeps its place
        return digest

    def _mask_declared(self, value: Any, sensitive: Mapping[str, str]) -> Any:
        for pointer, kind in sensitive.items():
            for container, key, current in locate(value, pointer):
                masked = self._mask_declared_value(kind, current)
                if container is None:
                    value = masked
                else:
                    container[key] = masked
        return value

    def _mask_declared_value(self, kind: str, current: Any) -> Any:
        if current is None or isinstance(current, bool):
            return current
        if kind in SECRET_KINDS:  # "secret" is one
            return "[secret removed]"
        if isinstance(current, dict | list):
            return self._mask_declared(current, {"/*": kind}) if current else current
        clear = str(current)
        masked = self._mask_one(kind, clear)
        self._remember(clear, masked)
        return masked

    def _remember(self, clear: str, masked: str) -> None:
        # Also as it appears JSON-escaped, both ways: ASCII-escaped (json.dumps' default) and
        # with non-ASCII kept as is (the loop's tool messages are ensure_ascii=False).
        forms = {
            clear,
            json.dumps(clear)[1:-1],
            json.dumps(clear, ensure_ascii=False)[1:-1],
        }
        added = False
        for form in forms:
            if len(form) >= MIN_KNOWN_LENGTH and form != masked and form not in self._known:
                self._known[form] = masked
                added = True
        if added:
            self._memo.clear()  # texts masked before may hold the new value
            self._members.clear()
            alternatives = sorted(self._known, key=len, reverse=True)
            self._known_pattern = re.compile(
                "|".join(
                    # Whole words only for ASCII values: "Li" must not eat "agent-li"'s "li".
                    rf"(?<![A-Za-z0-9]){re.escape(v)}(?![A-Za-z0-9])"
                    if v.isascii()
                    else re.escape(v)
                    for v in alternatives
                )
            )

    def _walk(self, value: Any) -> Any:
        # A payload is mostly dicts, lists and strings: a string member is masked without a
        # call of _walk of its own.
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, dict):
            masked = {}
            members = self._members
            for key, item in value.items():
                name = members.get(key)
                if name is None:
                    name = self._member(key)
                if name is _CREDENTIAL:
                    masked[key] = self._secret_member(item)
                elif type(item) is str:
                    masked[name] = self.mask_text(item)
                else:
                    masked[name] = self._walk(item)
            if len(masked) != len(value):
                return self._walk_renaming(value)  # two names masked alike (rare)
            return masked
        if isinstance(value, list | tuple):
            return [
                self.mask_text(item) if type(item) is str else self._walk(item) for item in value
            ]
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**10:
            # A phone or card number sent as a JSON number.
            text = str(value)
            masked_text = self.mask_text(text)
            return value if masked_text == text else masked_text
        return value

    def _member(self, key: Any) -> Any:
        """``key`` as stored: masked like any value (a payload keyed by e-mail address or phone
        number), or ``_CREDENTIAL`` if it names a credential (``password``, ``api_key``, …).
        Remembered for the run, whose payloads' keys are few and recur at every step (bounded
        like the text memo, and forgotten with it when a declared value is learnt)."""
        if isinstance(key, str):
            name = _CREDENTIAL if _SECRET_MEMBER.match(key) else self.mask_text(key)
        else:
            name = self._walk(key) if type(key) is int else key
        if len(self._members) >= SHORT_MEMO_SIZE:
            self._members.clear()
        self._members[key] = name
        return name

    def _walk_renaming(self, value: dict[Any, Any]) -> dict[Any, Any]:
        """``_walk`` of an object two of whose member names are masked alike (``z***@…`` for
        ``zoe@…`` and ``zhang@…``): both kept, the second as ``<name> (2)``."""
        masked: dict[Any, Any] = {}
        for key, item in value.items():
            name = self._members.get(key)
            if name is None:
                name = self._member(key)
            if name is _CREDENTIAL:
                name, item = key, self._secret_member(item)
            else:
                item = self._walk(item)
            if name in masked:
                name = _another_name(masked, name)
            masked[name] = item
        return masked

    def _secret_member(self, value: Any) -> Any:
        """The value of a member named like a credential, its shape kept: every string and
        number in it removed (a numeric PIN, a list of keys, ``{"value": "…"}``), but a value
        removed already (``[<kind> removed]``): masking is idempotent."""
        if isinstance(value, str):
            return "[secret removed]" if value and not value.endswith(" removed]") else value
        if isinstance(value, dict):
            return {
                self.mask_text(key) if isinstance(key, str) else key: self._secret_member(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._secret_member(item) for item in value]
        if isinstance(value, int | float) and not isinstance(value, bool):
            return "[secret removed]"
        return value


def _another_name(masked: dict[Any, Any], name: str) -> str:
    """``name`` followed by the first `` (2)``, `` (3)``… that no member of ``masked`` has: two
    keys of one object masked alike (``z***@example.com`` for ``zoe@…`` and ``zhang@…``)."""
    number = 2
    while f"{name} ({number})" in masked:
        number += 1
    return f"{name} ({number})"


def _without_overlaps(spans: list[Span]) -> list[Span]:
    """The spans in text order, without overlaps: of two that overlap, the one listed first
    (``spans`` is in priority order: secrets, extra detectors, e-mail, numbers) is kept."""
    # Most often nothing overlaps (e-mail addresses and numbers side by side): then every span
    # is kept, in text order (a stable sort by start keeps the priority order of equal starts).
    in_order = sorted(spans, key=_start_of)
    end = -1
    for span in in_order:
        if span[0] < end:
            break
        end = span[1]
    else:
        return in_order
    ordered = sorted((span[0], priority, span) for priority, span in enumerate(spans))
    kept: list[Span] = []
    priorities: list[int] = []
    for start, priority, span in ordered:
        if kept and start < kept[-1][1]:
            if priority < priorities[-1] and (len(kept) < 2 or kept[-2][1] <= start):
                kept[-1], priorities[-1] = span, priority
            continue
        kept.append(span)
        priorities.append(priority)
    return kept


_start_of = itemgetter(0)


def _setting(name: str, default: Any) -> Any:
    from django.conf import settings

    return getattr(settings, name, default) if settings.configured else default


def _json_copy(value: Any) -> Any:
    """A deep copy in plain JSON types (tuples become lists), so declared fields can be set."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))
