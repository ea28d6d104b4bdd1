"""Clear data that must be kept, encrypted at rest.

What is stored readable (a run's input, conversation and answer, events, traces) is masked.
Some clear copies must still be kept: the conversation the model works on — also in a worker
that resumes a run another one started —, the answer a callback receiver gets, a tool's result
replayed for a re-executed call. Those are kept only encrypted (Fernet: AES-128-CBC with
HMAC-SHA256).

Keys: ``settings.HARNESS_SEALING_KEYS`` (``HARNESS_SEALING_KEY``, comma-separated, newest
first) is key material; each Fernet key is derived from it with HKDF-SHA256. The newest key
seals; every key unseals (``MultiFernet``), so a key can be rotated without losing data, and
``reseal_all`` (``manage.py reseal``) re-encrypts stored values with the newest one. Values
sealed before keys were derived with HKDF (the first format, which truncated or zero-padded
the key text) still unseal, as long as their key is listed, until they are resealed.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from traces.keys import hkdf

SEALING_PURPOSE = "harness.sealing.v2"


def seal(value: Any) -> str:
    """Encrypt a JSON-able value with the newest key."""
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return _fernet(tuple(settings.HARNESS_SEALING_KEYS)).encrypt(data).decode()


def unseal(token: str, default: Any = None) -> Any:
    """Decrypt a sealed value with any listed key; ``default`` when there is none or no listed
    key opens it."""
    if not token:
        return default
    try:
        return json.loads(_fernet(tuple(settings.HARNESS_SEALING_KEYS)).decrypt(token.encode()))
    except InvalidToken:
        return default


def reseal(token: str) -> str | None:
    """``token`` encrypted again with the newest key (same content and timestamp); ``None``
    when no listed key opens it."""
    try:
        return _fernet(tuple(settings.HARNESS_SEALING_KEYS)).rotate(token.encode()).decode()
    except InvalidToken:
        return None


@dataclass
class ResealReport:
    resealed: int = 0
    unreadable: int = 0
    empty: int = 0


def reseal_values(rows: Iterable[tuple[Any, str]], save: Any) -> ResealReport:
    """Reseal each ``(key, token)``; ``save(key, old_token, new_token)`` stores one (and should
    do so only if the value is still ``old_token``). Counts what happened."""
    report = ResealReport()
    for key, token in rows:
        if not token:
            report.empty += 1
            continue
        new = reseal(token)
        if new is None:
            report.unreadable += 1
            continue
        save(key, token, new)
        report.resealed += 1
    return report


def fernet_key(material: str) -> bytes:
    """The Fernet key (base64 of 32 bytes) derived from ``material``."""
    return base64.urlsafe_b64encode(hkdf(material, SEALING_PURPOSE))


def _legacy_key(material: str) -> bytes | None:
    """The key the first sealing format used (text truncated or zero-padded to 32 bytes, or
    64 hex digits), to read values sealed before HKDF; never used to seal."""
    try:
        raw = bytes.fromhex(material) if len(material) == 64 else material.encode()
    except ValueError:
        return None
    if len(raw) < 32:
        return None  # a padded key: refused for reading too
    return base64.urlsafe_b64encode(raw[:32])


@cache
def _fernet(materials: tuple[str, ...]) -> MultiFernet:
    fernets = [Fernet(fernet_key(material)) for material in materials]
    for material in materials:
        legacy = _legacy_key(material)
        if legacy is not None:
            try:
                fernets.append(Fernet(legacy))
            except (ValueError, binascii.Error):
                continue
    return MultiFernet(fernets)
