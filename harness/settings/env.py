"""Typed readers for environment variables.

Every setting is read through these helpers so that a bad value stops start-up with a message
naming the variable, instead of surfacing later as a confusing runtime error. Secrets may come
from a file named by ``<NAME>_FILE`` (Docker and Kubernetes secrets).
"""

import os
from pathlib import Path

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


def env_prices(name: str) -> dict[str, tuple[float, float]]:
    """Model prices: ``route=input/output,…`` in USD per million tokens, e.g.
    ``openai:gpt-4o-mini=0.15/0.60``."""
    prices: dict[str, tuple[float, float]] = {}
    for item in env_list(name):
        route, sep, pair = item.rpartition("=")
        parts = pair.split("/")
        try:
            if not sep or not route or len(parts) != 2:
                raise ValueError(item)
            prices[route.strip()] = (float(parts[0]), float(parts[1]))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not route=input/output (USD per million tokens)"
            ) from exc
    return prices
