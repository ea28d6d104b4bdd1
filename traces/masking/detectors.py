"""Detectors of personal data and secrets in free text.

Each detector is a regular expression for the shape of a value plus, where the value carries
one, a checksum: a Chinese resident ID's check digit (ISO 7064 MOD 11-2), a card number's Luhn
digit, an IBAN's mod-97. The checksums are what keep order numbers, ticket ids and invoice
numbers (``ORD-55213``, ``T-20250318-007``, ``INV-2025-0318``) readable: a long digit run that
fails its checksum is left alone. Numbers are only matched between non-alphanumeric characters,
so the digits inside a hex id or a word never match.

The order matters: secrets first (a JWT may contain digit runs), then e-mail (a local part may
be a phone number), IBAN, national ID (18 digits that could also pass Luhn), card, phone.

Speed: Python's regular expressions scan character classes slowly, so no detector scans all
text. Text detectors run only when a cheap substring test (``needles``) says they could match;
the numeric ones run only inside the short windows ``NUMBER_CANDIDATE`` finds (runs of 8+
digits), IBAN only where ``IBAN_GATE`` finds two capitals and two digits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# ASCII alphanumeric boundaries: Chinese text around a number still counts as a boundary.
_B = r"(?<![A-Za-z0-9])"
_E = r"(?![A-Za-z0-9])"


@dataclass(frozen=True)
class Detector:
    """``kind`` is the masking kind; ``group`` the part of the match that is the value."""

    kind: str
    pattern: re.Pattern[str]
    validate: Callable[[str], bool] | None = None
    group: int = 0
    # Run only if one of these occurs in the text (lower-cased first when ``lower``).
    needles: tuple[str, ...] = ()
    lower: bool = False


def luhn_ok(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def resident_id_ok(text: str) -> bool:
    """A mainland China resident ID (GB 11643): 17 digits and an ISO 7064 MOD 11-2 check."""
    value = text.upper()
    if len(value) != 18 or not value[:17].isdigit():
        return False
    total = sum(int(d) * w for d, w in zip(value[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == value[17]


def iban_ok(text: str) -> bool:
    value = text.replace(" ", "").upper()
    if not 15 <= len(value) <= 34:
        return False
    rearranged = value[4:] + value[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return int(number) % 97 == 1


def _phone_digits_ok(text: str) -> bool:
    return 8 <= sum(c.isdigit() for c in text) <= 15


_API_KEY_SHAPES = "|".join(
    [
        r"sk-(?:proj-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic
        r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
        r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key ids
        r"gh[pousr]_[A-Za-z0-9]{36,}",  # GitHub
        r"github_pat_[A-Za-z0-9_]{22,}",
        r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab
        r"xox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
        r"AIza[0-9A-Za-z_-]{35}",  # Google
        r"hk_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}",  # Harness's own client keys
    ]
)

# A credential written as ``name: value`` or ``name=value`` in prose, logs, query strings or
# JSON text (quotes possibly escaped, as in a tool result embedded in a message).
_CREDENTIAL_NAMES = (
    r"password|passwd|pwd|secret|client[_-]?secret|api[_-]?key|access[_-]?token|"
    r"refresh[_-]?token|auth[_-]?token|private[_-]?key"
)

TEXT_DETECTORS: tuple[Detector, ...] = (
    Detector(
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)",
            re.DOTALL,
        ),
        needles=("PRIVATE KEY-----",),
    ),
    Detector(
        "jwt",
        re.compile(_B + r"eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"),
        needles=("eyJ",),
    ),
    Detector(
        "bearer_token",
        re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/-]{12,}=*)"),
        group=1,
        needles=("bearer",),
        lower=True,
    ),
    Detector(
        "api_key",
        re.compile(_B + f"(?:{_API_KEY_SHAPES})" + _E),
        needles=(
            "sk-",
            "_live_",
            "_test_",
            "AKIA",
            "ASIA",
            "ghp_",
            "gho_",
            "ghu_",
            "ghs_",
            "ghr_",
            "github_pat_",
            "glpat-",
            "xox",
            "AIza",
            "hk_",
        ),
    ),
    Detector(
        "secret",
        re.compile(
            rf"(?i)\b(?:{_CREDENTIAL_NAMES})\b\\?[\"']?\s*[:=]\s*\\?[\"']?"
            r"([^\s\"'\\,;&}\[\]][^\s\"'\\,;&}\]]{3,})"
        ),
        group=1,
        needles=("pass", "pwd", "secret", "api", "token", "private"),
        lower=True,
    ),
    Detector(
        "email",
        re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"),
        validate=lambda v: v.rsplit(".", 1)[-1].isalpha(),
        needles=("@",),
    ),
)

IBAN_GATE = re.compile(r"[A-Z]{2}[0-9]{2}")
IBAN = Detector(
    "iban",
    re.compile(_B + r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?" + _E),
    validate=iban_ok,
)

# Where a national ID, card or phone number could be: 8 or more digits, single spaces or
# dashes between them, maybe a leading "+" and a trailing X. Dates ("2026-11-30") are
# candidates too; the detectors below then find nothing in them.
NUMBER_CANDIDATE = re.compile(r"\+?[0-9](?:[ -]?[0-9]){7,}[Xx]?")
NUMBER_DETECTORS: tuple[Detector, ...] = (
    Detector(
        "national_id",
        re.compile(
            _B
            + r"[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]"
            + _E
        ),
        validate=resident_id_ok,
    ),
    Detector(
        "card",
        re.compile(
            _B
            + r"(?:\d{13,19}|\d{4}(?:[ -]\d{4}){2,3}(?:[ -]\d{1,3})?|\d{4}[ -]\d{6}[ -]\d{5})"
            + _E
        ),
        validate=luhn_ok,
    ),
    # Chinese mobile numbers, with or without +86 / 0086 and with spaces or dashes 3-4-4.
    Detector(
        "phone",
        re.compile(r"(?<![A-Za-z0-9+])(?:(?:\+|00)86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}" + _E),
    ),
    # E.164 numbers written with their "+", digits optionally grouped by spaces or dashes.
    Detector(
        "phone",
        re.compile(r"(?<![A-Za-z0-9+])\+[1-9](?:[ -]?\d){7,14}" + _E),
        validate=_phone_digits_ok,
    ),
)

SECRET_KINDS = frozenset({"private_key", "jwt", "bearer_token", "api_key", "secret"})
