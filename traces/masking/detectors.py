"""Detectors of secrets in free text, and the interface every detector has.

Secrets (private keys, JWTs, bearer tokens, API keys, ``password=…``) are found by regular
expressions, each run only when one of its ``needles`` occurs in the text (one Hyperscan pass
over all needles when the ``hyperscan`` wheel is installed, substring tests otherwise).
Personal data written with digits is found by ``numbers``, e-mail by ``emails``.

A detector added by configuration (``HARNESS_MASKING_DETECTORS``) or a tenant's custom pattern
is anything with ``kind`` and ``find(text)`` (see ``plugins``); ``Detector`` below has that
interface too.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
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

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        """Spans of the values in ``text`` (checked by ``validate``)."""
        group, validate = self.group, self.validate
        for match in self.pattern.finditer(text):
            if validate is None or validate(match.group(group)):
                yield match.span(group)


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
# JSON text (quotes possibly escaped, as in a tool result embedded in a message): the names
# ``masker._SECRET_MEMBER`` removes from a parsed object, but ``authorization`` (its value is
# ``<scheme> <credentials>``: the bearer and basic detectors take the credentials, the last
# detector a value without a scheme).
_CREDENTIAL_NAMES = (
    r"password|passwd|pwd|secret|client[_-]?secret|api[_-]?key|access[_-]?token|"
    r"refresh[_-]?token|id[_-]?token|session[_-]?token|auth[_-]?token|token|private[_-]?key"
)


def _basic_credentials(value: str) -> bool:
    """``user:password`` in base64 (RFC 7617), not a word that follows "basic" in prose."""
    try:
        return b":" in base64.b64decode(value, validate=True)
    except ValueError:  # binascii.Error
        return False


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
        "secret",
        re.compile(r"(?i)\bbasic\s+([A-Za-z0-9+/]{2,}={0,2})(?![A-Za-z0-9+/=])"),
        validate=_basic_credentials,
        group=1,
        needles=("basic",),
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
        "secret",
        # An ``authorization`` value with no scheme before it ("Authorization: 9f86d0…", a
        # bare API key): the credential itself, removed as from a parsed object. One with a
        # scheme ("Bearer …", "Basic …", "Digest …") is left to the detectors above; a value
        # without a digit is a word ("authorization: approved"), not a credential.
        re.compile(
            r"(?i)\bauthorization\b\\?[\"']?\s*[:=]\s*\\?[\"']?(?![A-Za-z][\w-]*[ \t]+[^\s\"'\\])"
            r"(?=[^\s\"'\\,;&}\]]*\d)([^\s\"'\\,;&}\[\]][^\s\"'\\,;&}\]]{7,})"
        ),
        group=1,
        needles=("authoriz",),
        lower=True,
    ),
)

SECRET_KINDS = frozenset({"private_key", "jwt", "bearer_token", "api_key", "secret"})
