"""JSON pointers (RFC 6901) into a value, with ``*`` standing for every member or element.

Tool files declare sensitive fields as pointers into their arguments and results, e.g.
``/phone`` or ``/customers/*/email``. A pointer that does not resolve is not an error: a
result without the field simply has nothing to mask there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Location = tuple[Any, Any, Any]  # (container or None for the root, key, current value)


def parse(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"not a JSON pointer: {pointer!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def under(prefix: str, pointers: dict[str, str] | None) -> dict[str, str]:
    """``pointers`` re-rooted below ``prefix`` (itself a pointer)."""
    return {prefix + pointer: kind for pointer, kind in (pointers or {}).items()}


def locate(value: Any, pointer: str) -> Iterator[Location]:
    segments = parse(pointer)
    if not segments:
        yield None, None, value
        return
    yield from _walk(value, segments)


def _walk(node: Any, segments: list[str]) -> Iterator[Location]:
    segment, rest = segments[0], segments[1:]
    for key in _keys(node, segment):
        child = node[key]
        if rest:
            yield from _walk(child, rest)
        else:
            yield node, key, child


def _keys(node: Any, segment: str) -> list[Any]:
    if isinstance(node, dict):
        if segment == "*":
            return list(node)
        return [segment] if segment in node else []
    if isinstance(node, list):
        if segment == "*":
            return list(range(len(node)))
        if segment.isdigit() and int(segment) < len(node):
            return [int(segment)]
    return []
