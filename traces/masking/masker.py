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
from collections.abc import Mapping
from typing import Any

from traces.masking.detectors import (
    IBAN,
    IBAN_GATE,
    NUMBER_CANDIDATE,
    NUMBER_DETECTORS,
    SECRET_KINDS,
    TEXT_DETECTORS,
)
from traces.masking.kinds import FINGERPRINTED_KINDS, fingerprint, mask, normalize
from traces.masking.pointers import locate

# Object members whose value is a credential, whatever it looks like.
_SECRET_MEMBER = re.compile(
    r"(?i)^(?:password|passwd|pwd|secret|client_?secret|api_?key|apikey|access_?token|"
    r"refresh_?token|id_?token|session_?token|auth_?token|token|authorization|private_?key)$"
)
# Known values shorter than this are not searched for in free text (too many false hits).
MIN_KNOWN_LENGTH = 2
# Texts at least this long are memoised (per masker, so per run).
MEMO_MIN_LENGTH = 200


class Masker:
    def __init__(self, key: bytes) -> None:
        self._key = key
        self._known: dict[str, str] = {}
        self._known_pattern: re.Pattern[str] | None = None
        self._memo: dict[str, str] = {}
        self._found: dict[tuple[str, str], None] = {}
        self._drained = 0

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
        if len(text) >= MEMO_MIN_LENGTH:
            # A run's conversation is masked again at every step: mask each long text once.
            masked = self._memo.get(text)
            if masked is None:
                masked = self._memo[text] = self._mask_text(text)
            return masked
        return self._mask_text(text)

    def _mask_text(self, text: str) -> str:
        if self._known_pattern is not None and any(v in text for v in self._known):
            text = self._known_pattern.sub(lambda m: self._known[m.group(0)], text)
        lowered = None
        for detector in TEXT_DETECTORS:
            haystack = text
            if detector.lower:
                lowered = lowered if lowered is not None else text.lower()
                haystack = lowered
            if any(needle in haystack for needle in detector.needles):
                text = detector.pattern.sub(lambda m, d=detector: self._replace(d, m), text)
                lowered = None
        if IBAN_GATE.search(text):
            text = IBAN.pattern.sub(lambda m: self._replace(IBAN, m), text)
        return NUMBER_CANDIDATE.sub(self._mask_number_window, text)

    def _mask_number_window(self, candidate: re.Match[str]) -> str:
        """Run the number detectors on a candidate, with one character of context either side
        so that their boundary checks see what really surrounds it."""
        number = candidate.group(0)
        digits = len(number) - number.count(" ") - number.count("-")
        if digits < 11 and number[0] != "+":
            return number  # too short for anything but an E.164 number, which has its "+"
        text, start, end = candidate.string, candidate.start(), candidate.end()
        left, right = text[start - 1 : start], text[end : end + 1]
        window = left + number + right
        for detector in NUMBER_DETECTORS:
            window = detector.pattern.sub(lambda m, d=detector: self._replace(d, m), window)
        return window[len(left) : len(window) - len(right)]

    def drain(self) -> list[tuple[str, str]]:
        """Fingerprints ``(kind, digest)`` found since the last call, in order of discovery."""
        found = list(self._found)[self._drained :]
        self._drained += len(found)
        return found

    # --- internals ----------------------------------------------------------------------

    def _replace(self, detector: Any, match: re.Match[str]) -> str:
        value = match.group(detector.group)
        if detector.validate is not None and not detector.validate(value):
            return match.group(0)
        masked = self._mask_one(detector.kind, value)
        if detector.group == 0:
            return masked
        start, end = match.span(detector.group)
        whole_start = match.start(0)
        whole = match.group(0)
        return whole[: start - whole_start] + masked + whole[end - whole_start :]

    def _mask_one(self, kind: str, value: str) -> str:
        digest = ""
        if kind in FINGERPRINTED_KINDS:
            normalized = normalize(kind, value) or value.strip()
            digest = fingerprint(self._key, kind, normalized)
            self._found.setdefault((kind, digest), None)
        return mask(kind, value, digest)

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
        if kind == "secret" or kind in SECRET_KINDS:
            return "[secret removed]"
        if isinstance(current, dict | list):
            return self._mask_declared(current, {"/*": kind}) if current else current
        clear = str(current)
        masked = self._mask_one(kind, clear)
        self._remember(clear, masked)
        return masked

    def _remember(self, clear: str, masked: str) -> None:
        forms = {clear, json.dumps(clear)[1:-1]}  # also as it appears JSON-escaped
        added = False
        for form in forms:
            if len(form) >= MIN_KNOWN_LENGTH and form != masked and form not in self._known:
                self._known[form] = masked
                added = True
        if added:
            self._memo.clear()  # texts masked before may hold the new value
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
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, dict):
            return {
                key: self._secret_member(value_)
                if isinstance(key, str) and _SECRET_MEMBER.match(key)
                else self._walk(value_)
                for key, value_ in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._walk(item) for item in value]
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**10:
            # A phone or card number sent as a JSON number.
            text = str(value)
            masked = self.mask_text(text)
            return value if masked == text else masked
        return value

    def _secret_member(self, value: Any) -> Any:
        if isinstance(value, str) and value and not value.endswith(" removed]"):
            return "[secret removed]"
        if isinstance(value, dict | list):
            return self._walk(value)
        return value


def _json_copy(value: Any) -> Any:
    """A deep copy in plain JSON types (tuples become lists), so declared fields can be set."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))
