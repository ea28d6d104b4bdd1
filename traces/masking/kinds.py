"""What each kind of sensitive value becomes when stored, and how it is fingerprinted.

| kind        | stored as                        | fingerprinted |
|-------------|----------------------------------|---------------|
| phone       | ``138****5678``, ``718***1807``, ``+34*****5678`` | yes (E.164) |
| email       | ``z***@example.com``             | yes           |
| national_id | ``[national_id:1a2b3c4d]`` (CN resident ID, US SSN, UK NINO, ES DNI/NIE,
|             | IN Aadhaar, BR CPF)               | yes (only)    |
| card        | ``****1234``                     | yes           |
| iban        | ``DE****3000``                   | yes           |
| name        | ``Z**** W**``, ``张*``           | yes           |
| address     | ``[address:1a2b3c4d]``           | yes (only)    |
| secrets     | ``[<kind> removed]``             | no            |
| other kinds | ``[<kind>:1a2b3c4d]`` (``plugins``) | yes         |

An address has no partial form that is safe across countries (the street and number are the
identifying part wherever they are written), so like a national ID it is kept as a fingerprint
only. Secrets (API keys, JWTs, bearer tokens, private keys, passwords) are not identifiers of
people and are not fingerprinted: nobody needs to find runs by them, and even a keyed digest
of a secret is something to guess against.

A fingerprint is ``HMAC-SHA256(key, "<kind>:<normalised value>")``: the same phone number
written ``13812345678``, ``138 1234 5678`` or ``+86 138-1234-5678`` has one fingerprint (a
phone is normalised to E.164), and without the key nobody can test a guess against the
stored digests.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any

from traces.masking.detectors import SECRET_KINDS
from traces.masking.phone_validator import phone_validator

FINGERPRINTED_KINDS = ("phone", "email", "national_id", "card", "iban", "name", "address")
_FINGERPRINTED = frozenset(FINGERPRINTED_KINDS)
DECLARABLE_KINDS = ("phone", "email", "national_id", "card", "secret", "name", "address")

_CN_MOBILE = re.compile(r"1[3-9]\d{9}")
_SPACES = re.compile(r"\s+")
_NOT_DIGIT = re.compile(r"\D")
_ID_SEPARATORS = str.maketrans("", "", " -./")
_PHONE_SEPARATORS = str.maketrans("", "", " -./()+")


def _digits_of(value: str) -> str:
    """The decimal digits of ``value`` (``\\D`` removed): by ``translate`` when only the usual
    separators are between them, a third of the cost of the regular expression."""
    digits = value.translate(_PHONE_SEPARATORS)
    return digits if digits.isdecimal() else _NOT_DIGIT.sub("", value)


def fingerprint(key: bytes, kind: str, normalized: str) -> str:
    """``HMAC-SHA256(key, "<kind>:<normalized>")`` in hex (RFC 2104, as ``hmac.digest``), from
    the key's inner and outer hash states computed once: a third of the cost of ``hmac``.
    The states are CPython's own SHA-256 where it has one: copying an OpenSSL 3 hash object
    (twice a fingerprint) costs more than hashing the two blocks."""
    inner, outer = hmac_states(key)
    inner = inner.copy()
    inner.update(f"{kind}:{normalized}".encode())
    outer = outer.copy()
    outer.update(inner.digest())
    return outer.hexdigest()


@lru_cache(maxsize=64)
def hmac_states(key: bytes) -> tuple[Any, Any]:
    """The hash states of ``key``'s inner and outer pads (copy them before updating)."""
    if len(key) > _SHA256_BLOCK:
        key = hashlib.sha256(key).digest()
    key = key.ljust(_SHA256_BLOCK, b"\0")
    return (_sha256(key.translate(_IPAD)), _sha256(key.translate(_OPAD)))


_SHA256_BLOCK = 64
try:  # CPython's built-in SHA-256 (3.12+: _sha2; before: _sha256); same digests as OpenSSL's
    from _sha2 import sha256 as _sha256
except ImportError:  # pragma: no cover - depends on the Python version
    try:
        from _sha256 import sha256 as _sha256
    except ImportError:
        _sha256 = hashlib.sha256
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


def normalize(kind: str, value: str) -> str | None:
    """The canonical form fingerprints are taken of; None if ``value`` cannot be of ``kind``."""
    value = value.strip()
    if not value:
        return None
    if kind == "phone":
        return _normalize_phone(value)
    if kind == "email":
        return value.lower() if "@" in value else None
    if kind in ("national_id", "iban"):
        compact = value.translate(_ID_SEPARATORS).upper()
        return compact if len(compact) >= 6 else None
    if kind == "card":
        digits = _NOT_DIGIT.sub("", value)
        return digits if 12 <= len(digits) <= 19 else None
    if kind in ("name", "address"):
        return _SPACES.sub(" ", value).casefold()
    return None


def search_forms(kind: str, value: str) -> list[str]:
    """Every normalised form a typed ``value`` may have been stored under: for a phone number
    written nationally, its E.164 form in each default region it is valid in (the stored one
    depends on how it was written and on the order of ``HARNESS_PHONE_REGIONS``)."""
    forms = []
    normalized = normalize(kind, value)
    if normalized:
        forms.append(normalized)
    if kind == "phone" and not value.strip().startswith(("+", "00")):
        digits = _NOT_DIGIT.sub("", value)
        forms += [f for f in phone_validator().national_candidates(digits) if f not in forms]
    return forms


def _normalize_phone(value: str) -> str | None:
    """E.164 when the number is valid (written nationally in a default region or with its
    country code), so that ``(718) 951-1807`` and ``+1 718-951-1807`` are one identifier."""
    e164 = phone_validator().e164(value)
    if e164:
        return e164
    international = value.startswith(("+", "00"))
    digits = _NOT_DIGIT.sub("", value)
    if value.startswith("00"):
        digits = digits[2:]
    if len(digits) < 7:
        return None
    if not international and _CN_MOBILE.fullmatch(digits):
        return "+86" + digits
    return ("+" if international else "") + digits


def mask(kind: str, value: str, digest: str) -> str:
    """The stored form of ``value``; ``digest`` is its fingerprint (for fingerprint-only kinds)."""
    if kind in SECRET_KINDS:
        return f"[{kind} removed]"
    if kind == "phone":
        return _mask_phone(value)
    if kind == "email":
        local, _, domain = value.rpartition("@")
        return f"{local[:1]}***@{domain}" if local else "***"
    if kind == "card":
        digits = _digits_of(value)
        return f"****{digits[-4:]}" if len(digits) > 4 else "****"
    if kind == "iban":
        compact = value.replace(" ", "")
        return f"{compact[:2]}****{compact[-4:]}"
    if kind == "name":
        return " ".join(word[:1] + "*" * (len(word) - 1) for word in value.split())
    # national_id, address and anything else: the fingerprint only.
    return f"[{kind}:{digest[:8]}]"


def _mask_phone(value: str) -> str:
    digits = _digits_of(value)
    if value.startswith("00"):
        digits = digits[2:]
    international = value.startswith(("+", "00"))
    if international and digits.startswith("86") and _CN_MOBILE.fullmatch(digits[2:]):
        national = digits[2:]
        return f"+86 {national[:3]}****{national[-4:]}"
    if len(digits) < 8:
        return "*" * len(digits)
    if len(digits) < 10:
        # "234*6789", "+49**1234" would show seven, six of eight digits: a short number keeps
        # its last four only.
        return f"{'+' if international else ''}{'*' * (len(digits) - 4)}{digits[-4:]}"
    if international:
        return f"+{digits[:2]}{'*' * (len(digits) - 6)}{digits[-4:]}"
    return f"{digits[:3]}{'*' * (len(digits) - 7)}{digits[-4:]}"
