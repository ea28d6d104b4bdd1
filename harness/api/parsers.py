"""The API's JSON parser: bounded size and depth, and only text a database can store.

- A body larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (Django's 2.5 MiB) is ``413
  request_too_large``, refused before it is read (by ``harness.body_limit`` in front of Django;
  checked again here).
- JSON nested deeper than ``MAX_DEPTH`` is ``400 malformed_json`` (deep nesting only serves
  to exhaust the parser's stack).
- A string holding NUL (``\\u0000``) or a lone surrogate (``\\ud800``) is ``400
  invalid_request`` naming where: PostgreSQL cannot store either, and no request needs them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser

MAX_DEPTH = 32


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"
    default_detail = "The request body is too large."


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        request = (parser_context or {}).get("request")
        declared = _content_length(request)
        if limit is not None and declared is not None and declared > limit:
            raise RequestTooLarge(f"The request body is larger than {limit} bytes.")
        raw = stream.read(limit + 1) if limit is not None else stream.read()
        if limit is not None and len(raw) > limit:
            raise RequestTooLarge(f"The request body is larger than {limit} bytes.")
        try:
            data = json.loads(raw.decode("utf-8"))
        except RecursionError as exc:
            raise exceptions.ParseError(f"JSON nested deeper than {MAX_DEPTH} levels.") from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from exc
        check_value(data)
        return data


def check_value(data: Any) -> None:
    """Depth and storable text of a parsed JSON value.

    Iterative (no recursion to exhaust) and walking one iterator per open container, so the
    check holds O(depth) memory whatever the body: the path of a value is kept as the keys
    and indices of the containers open above it, and joined into text only for an error
    (building it per element cost key length x array length bytes: 250 KB of JSON took
    a web worker's memory past 700 MB).
    """
    if isinstance(data, str):
        _check_text(data, [])
    if not isinstance(data, dict | list):
        return
    open_entries: list[Iterator[tuple[Any, Any]]] = [_entries(data)]
    path: list[Any] = [None]  # path[i]: the key or index being visited in open_entries[i]
    while open_entries:
        entry = next(open_entries[-1], None)
        if entry is None:
            open_entries.pop()
            path.pop()
            continue
        key, value = entry
        path[-1] = key
        if len(open_entries) > MAX_DEPTH:
            raise exceptions.ParseError(f"JSON nested deeper than {MAX_DEPTH} levels.")
        if isinstance(key, str):
            _check_text(key, path)
        if isinstance(value, dict | list):
            open_entries.append(_entries(value))
            path.append(None)
        elif isinstance(value, str):
            _check_text(value, path)


def _entries(container: dict | list) -> Iterator[tuple[Any, Any]]:
    return iter(container.items()) if isinstance(container, dict) else enumerate(container)


def _check_text(text: str, path: list[Any]) -> None:
    if "\x00" in text:
        raise exceptions.ValidationError({_pointer(path): "NUL (\\u0000) is not allowed in text."})
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise exceptions.ValidationError(
            {_pointer(path): "A lone surrogate (e.g. \\ud800) is not allowed in text."}
        ) from exc


def _pointer(path: list[Any]) -> str:
    """Where a value is, as ``/key/0/key`` (``/`` for the body itself)."""
    return "".join(f"/{step}" for step in path) or "/"


def _content_length(request: Any) -> int | None:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else None
    except (TypeError, ValueError):
        return None


MAX_EVENT_ID = 2**63 - 1


def event_cursor(last_event_id: str | None, after: str | None) -> int:
    """The event sequence to resume after, from ``Last-Event-ID`` or ``?after=`` (0 if none).

    Only ASCII digits, within a 64-bit integer: ``²`` is a digit to ``str.isdigit`` but not to
    ``int``, and 5,000 digits exceed what ``int`` parses.
    """
    for name, raw in (("Last-Event-ID", last_event_id), ("after", after)):
        if raw is None or raw == "":
            continue
        text = raw.strip()
        if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) > MAX_EVENT_ID:
            raise exceptions.ValidationError(
                {name: "An event id: a non-negative integer below 2^63."}
            )
        return int(text)
    return 0
