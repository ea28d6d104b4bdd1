"""What the model sees of a large tool result: the whole result when small, else a digest.

Above ``HARNESS_TOOL_RESULT_MAX_CHARS`` characters of JSON, the model gets a digest that keeps
each item's ``key_fields``, the number of items, and how to fetch one item in full (the tool
file's ``fetch_details``: which tool, which argument). The trace always keeps the whole result;
only the message to the model is shortened.

The items are the result itself when it is a list, else its largest list-valued field (such
as ``tickets`` in ``{"count": 3, "tickets": [...]}``); a result with no list keeps its own key
fields and names the fields left out.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from tools.registry import ToolDefinition


def result_for_model(tool: ToolDefinition, result: Any) -> tuple[Any, bool]:
    """``(what the model is shown, whether it is a digest)``."""
    size = _size(result)
    max_chars = settings.HARNESS_TOOL_RESULT_MAX_CHARS
    if size <= max_chars:
        return result, False
    return digest_result(tool, result, size, max_chars), True


def digest_result(tool: ToolDefinition, result: Any, size: int, max_chars: int) -> dict[str, Any]:
    digest: dict[str, Any] = {"digest": True}
    details = _how_to_fetch(tool)
    field, items = _items(result)
    if items is None:
        kept = {k: result[k] for k in tool.key_fields if isinstance(result, dict) and k in result}
        digest["note"] = (
            f"The full result ({size} characters) is too large to show: only its key fields "
            "are shown."
        )
        digest["fields"] = kept
        if isinstance(result, dict):
            digest["omitted_fields"] = [k for k in result if k not in kept]
    else:
        if isinstance(result, dict):
            digest |= {k: v for k, v in result.items() if k != field and _is_small_scalar(v)}
        digest["count"] = len(items)
        fields = ", ".join(tool.key_fields) or "all fields"

        def note(shown: int) -> str:
            which = "each" if shown == len(items) else f"the first {shown}"
            return (
                f"The full result ({size} characters, {len(items)} items) is too large to "
                f"show: {which} item(s) with only {fields}."
            )

        # Room for the items: what is left after the rest of the digest and its note.
        reserve = _size(details) + _size(note(len(items) - 1)) + 40
        shown = _fit(tool, items, max_chars - _size(digest) - reserve)
        digest["note"] = note(len(shown))
        digest[field] = shown
    digest["details"] = details
    return digest


def _items(result: Any) -> tuple[str, list[Any] | None]:
    if isinstance(result, list):
        return "items", result
    if isinstance(result, dict):
        lists = [(k, v) for k, v in result.items() if isinstance(v, list)]
        if lists:
            return max(lists, key=lambda kv: _size(kv[1]))
    return "items", None


def _fit(tool: ToolDefinition, items: list[Any], budget: int) -> list[Any]:
    shown: list[Any] = []
    used = 0
    for item in items:
        if isinstance(item, dict) and tool.key_fields:
            item = {k: item[k] for k in tool.key_fields if k in item}
        used += _size(item) + 2
        if used > budget and shown:
            break
        shown.append(item)
    return shown


def _how_to_fetch(tool: ToolDefinition) -> dict[str, str]:
    fetch = tool.fetch_details
    if fetch is None:
        return {"how": f"Call {tool.name} again with narrower arguments to see items in full."}
    field = fetch.get("field", fetch["argument"])
    return {
        "tool": fetch["tool"],
        "argument": fetch["argument"],
        "from_field": field,
        "how": f"Call {fetch['tool']} with {fetch['argument']} set to an item's {field} "
        "to see that item in full.",
    }


def _is_small_scalar(value: Any) -> bool:
    scalar = value is None or isinstance(value, str | int | float | bool)
    return scalar and _size(value) <= 200


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))
