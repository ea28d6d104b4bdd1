"""The working copy of a run, encrypted at rest.

What is stored readable (the run's input, conversation and answer, events, traces) is masked.
The model, though, must work on the real conversation — also in a worker that resumes a run
another one started — and a callback receiver must get the real answer. That clear copy is
kept only encrypted (Fernet: AES-128-CBC with HMAC-SHA256), with a key from the settings.
"""

from __future__ import annotations

import base64
import json
from functools import cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


def seal(value: Any) -> str:
    """Encrypt a JSON-able value."""
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return _fernet(settings.HARNESS_SEALING_KEY).encrypt(data).decode()


def unseal(token: str, default: Any = None) -> Any:
    """Decrypt a sealed value; ``default`` when there is none or the key changed."""
    if not token:
        return default
    try:
        return json.loads(_fernet(settings.HARNESS_SEALING_KEY).decrypt(token.encode()))
    except InvalidToken:
        return default


@cache
def _fernet(key: str) -> Fernet:
    raw = bytes.fromhex(key) if len(key) == 64 else key.encode()
    return Fernet(base64.urlsafe_b64encode(raw[:32].ljust(32, b"\0")))
