"""Clear data that must be kept, encrypted at rest.

What is stored readable (a run's input, conversation and answer, events, traces) is masked.
Some clear copies must still be kept: the conversation the model works on — also in a worker
that resumes a run another one started —, the answer a callback receiver gets, a tool's result
replayed for a re-executed call. Those are kept only encrypted (Fernet: AES-128-CBC with
HMAC-SHA256), with a key from the settings (``HARNESS_SEALING_KEY``).
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
