"""Logging that never writes a secret or unmasked personal data, at any level.

``configure`` (Django's ``LOGGING_CONFIG``) applies ``settings.LOGGING`` and installs a log
record factory, so every record is cleaned when it is made — before any handler, formatter,
or test capture sees it:

- every configured secret (``HARNESS_SECRET_*``, provider keys, the project's own keys) is
  replaced by ``[secret-removed]``, also in its percent-encoded form (as it appears in a URL);
- credentials and query strings are cut from URLs (``https://u:p@host/x?token=…`` →
  ``https://host/x?[query removed]``): a callback URL or a tool's URL may carry a token there;
- the masking detectors of the trace store (phone numbers, e-mail, ID numbers, cards, API
  keys, bearer tokens, …) mask what remains, as they do for everything stored.

The exception text of a record (its traceback) is cleaned the same way.

httpx and httpcore log every request's full URL: they are kept at WARNING (see ``LOGGING``).
"""

from __future__ import annotations

import logging
import logging.config
import re
import threading
from typing import Any
from urllib.parse import quote

# No space: a URL around it is still one URL.
SECRET_REMOVED = "[secret-removed]"  # noqa: S105 (a placeholder, not a password)
MIN_SECRET_CHARS = 6
URL = re.compile(
    r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/\s@?#'\"<>]*@)?"
    r"(?P<rest>[^\s?#'\"<>]*)(?P<query>\?[^\s#'\"<>]*)?"
)

_local = threading.local()
_previous_factory = logging.getLogRecordFactory()


def configure(config: dict[str, Any]) -> None:
    """Django's ``LOGGING_CONFIG`` callable: ``dictConfig``, then the cleaning factory."""
    logging.config.dictConfig(config)
    logging.setLogRecordFactory(_clean_record)


def redact(text: str) -> str:
    """``text`` with secrets, URL credentials and queries, and personal data removed."""
    if not text:
        return text
    for secret in _secrets():
        if secret in text:
            text = text.replace(secret, SECRET_REMOVED)
    text = URL.sub(_cut_url, text)
    return _masker().mask_text(text)


def _clean_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record = _previous_factory(*args, **kwargs)
    if getattr(_local, "busy", False):
        return record  # a record made while cleaning another one
    _local.busy = True
    try:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the logging module reports it later
            return record
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
    except Exception:  # never lose a log line to the cleaner; drop what it could not clean
        record.msg, record.args, record.exc_text = (
            "[log line withheld: redaction failed]",
            None,
            None,
        )
        record.exc_info = None
    finally:
        _local.busy = False
    return record


def _cut_url(match: re.Match[str]) -> str:
    query = "?[query removed]" if match["query"] and len(match["query"]) > 1 else ""
    return f"{match['scheme']}{match['rest']}{query}"


def _secrets() -> list[str]:
    """Every configured secret value and its percent-encoded forms, longest first."""
    from django.conf import settings

    if not settings.configured:
        return []
    values: list[str] = list(getattr(settings, "HARNESS_SECRETS", {}).values())
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SECRET_KEY"):
        values.append(getattr(settings, name, "") or "")
    for name in (
        "HARNESS_SEALING_KEYS",
        "HARNESS_FINGERPRINT_KEYS",
        "HARNESS_AUDIT_CHECKPOINT_KEYS",
    ):
        values.extend(getattr(settings, name, []) or [])
    routes = getattr(settings, "HARNESS_ROUTES", {})
    for options in routes.values() if isinstance(routes, dict) else ():
        if isinstance(options, dict) and isinstance(options.get("api_key"), str):
            values.append(options["api_key"])
    forms = {
        form
        for value in values
        if isinstance(value, str) and len(value) >= MIN_SECRET_CHARS
        for form in (value, quote(value, safe=""), quote(value))
    }
    return sorted(forms, key=len, reverse=True)


def _masker() -> Any:
    """A fresh masker per line: its memo and remembered values must not grow with the log."""
    from django.conf import settings

    from traces.masking import Masker

    key = getattr(settings, "HARNESS_FINGERPRINT_KEY", "") or "log-redaction"
    return Masker(key.encode())
