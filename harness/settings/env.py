"""Typed readers for environment variables.

Every setting is read through these helpers so that a bad value stops start-up with a message
naming the variable, instead of surfacing later as a confusing runtime error. Secrets may come
from a file named by ``<NAME>_FILE`` (Docker and Kubernetes secrets).
"""

import hashlib
import hmac
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

Number = TypeVar("Number", int, float)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """The variable's value, or the content of the file named by ``NAME_FILE``."""
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_path!r} cannot be read: {exc}") from exc
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int, minimum: int | None = None) -> int:
    return _env_number(name, default, minimum, int, "an integer")


def env_int_or_off(name: str, default: int | None, minimum: int | None = None) -> int | None:
    """An integer, or None for ``off``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    if raw.strip().lower() in {"off", "none"}:
        return None
    return env_int(name, 0, minimum)


def env_float(name: str, default: float, minimum: float | None = None) -> float:
    return _env_number(name, default, minimum, float, "a number")


def _env_number(
    name: str, default: Number, minimum: Number | None, parse: Callable[[str], Number], what: str
) -> Number:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = parse(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not {what}") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, separator: str = ",") -> list[str]:
    raw = os.environ.get(name, "")
    return [item.strip() for item in raw.split(separator) if item.strip()]


def env_int_list(name: str, default: list[int], minimum: int | None = None) -> list[int]:
    """Comma-separated integers, each at least ``minimum``."""
    items = env_list(name)
    if not items:
        return default
    values = []
    for item in items:
        try:
            value = int(item)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {item!r} is not an integer") from exc
        if minimum is not None and value < minimum:
            raise ImproperlyConfigured(f"{name}: {value} must be at least {minimum}")
        values.append(value)
    return values


def env_paths(name: str) -> list[Path]:
    """Folders separated by ``os.pathsep``, as PATH is."""
    return [Path(item).expanduser() for item in env_list(name, separator=os.pathsep)]


def derive_key(secret: str, purpose: str) -> str:
    """A key for ``purpose`` derived from ``secret`` (HMAC-SHA256), so one secret can seed many."""
    return hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).hexdigest()


# A key shorter than this cannot carry 128 bits even as random base64 text; refuse it rather
# than pad it (a 16-character key once left half of the cipher key zero).
MIN_KEY_CHARS = 32


def env_keys(name: str, default: str) -> list[str]:
    """The keys of ``name`` (or ``NAME_FILE``), newest first, separated by commas.

    The first key writes; every key reads (rotation: put the new key first, keep the old ones
    until ``manage.py reseal`` has run). Each must have at least ``MIN_KEY_CHARS`` characters;
    with none set, ``[default]``. Keys are key *material*: users derive the real key with
    HKDF for their purpose (``hkdf``), so any text of enough entropy will do.
    """
    raw = env_str(name)
    keys = [key.strip() for key in raw.split(",")]
    if not raw.strip():
        return [default]
    for position, key in enumerate(keys, start=1):
        if len(key) < MIN_KEY_CHARS:
            where = f"key {position} of {len(keys)}" if len(keys) > 1 else "the key"
            raise ImproperlyConfigured(
                f"{name}: {where} has {len(key)} characters; each key needs at least "
                f"{MIN_KEY_CHARS} (make one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'). Several keys are separated by commas, "
                "newest first."
            )
    if len(set(keys)) != len(keys):
        raise ImproperlyConfigured(f"{name}: the same key is listed twice.")
    return keys


def hkdf(material: str, purpose: str, length: int = 32) -> bytes:
    """``length`` bytes for ``purpose`` from key material (HKDF-SHA256, RFC 5869)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=purpose.encode()).derive(
        material.encode()
    )


def env_json(name: str, default: Any) -> Any:
    """A JSON value, from the variable or from the file named by ``NAME_FILE``."""
    raw = env_str(name)
    if not raw.strip():
        return default
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"{name} is not valid JSON: {exc}") from exc


def env_prefixed(prefix: str) -> dict[str, str]:
    """Every variable ``<PREFIX><NAME>`` (or ``<PREFIX><NAME>_FILE``), keyed by NAME."""
    names = {
        key[len(prefix) :].removesuffix("_FILE") for key in os.environ if key.startswith(prefix)
    }
    return {name: env_str(prefix + name) for name in sorted(names) if name}


def env_group_map(name: str) -> dict[str, list[tuple[str, str]]]:
    """Identity-provider groups mapped to console roles per tenant: a JSON object whose values
    are a ``[tenant, role]`` pair or a list of them, e.g.
    ``{"harness-acme-operators": ["acme", "operator"]}``. Returned as group -> pairs."""
    raw = env_json(name, {})
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object of group -> [tenant, role]")
    mapped: dict[str, list[tuple[str, str]]] = {}
    for group, value in raw.items():
        pairs = (
            value if isinstance(value, list) and value and isinstance(value[0], list) else [value]
        )
        for pair in pairs:
            if not (
                isinstance(pair, list)
                and len(pair) == 2
                and all(isinstance(part, str) and part.strip() for part in pair)
            ):
                raise ImproperlyConfigured(
                    f"{name}: the group {group!r} maps to {value!r}; use [tenant, role] "
                    'or a list of them, e.g. {"harness-acme-operators": ["acme", "operator"]}'
                )
            mapped.setdefault(group, []).append((pair[0].strip(), pair[1].strip()))
    return mapped
