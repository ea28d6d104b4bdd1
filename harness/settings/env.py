"""Typed readers for environment variables.

Every setting is read through these helpers so that a bad value stops start-up with a message
naming the variable, instead of surfacing later as a confusing runtime error. Secrets may come
from a file named by ``<NAME>_FILE`` (Docker and Kubernetes secrets).
"""

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

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
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_float(name: str, default: float, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, separator: str = ",") -> list[str]:
    raw = os.environ.get(name, "")
    return [item.strip() for item in raw.split(separator) if item.strip()]


def env_paths(name: str) -> list[Path]:
    """Folders separated by ``os.pathsep``, as PATH is."""
    return [Path(item).expanduser() for item in env_list(name, separator=os.pathsep)]


def derive_key(secret: str, purpose: str) -> str:
    """A key for ``purpose`` derived from ``secret`` (HMAC-SHA256), so one secret can seed many."""
    return hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).hexdigest()


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
