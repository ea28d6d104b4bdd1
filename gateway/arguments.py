"""Turning a model's argument text into a dict, repairing what a library can repair."""

import json
import math
from collections.abc import Iterable
from typing import Any

import json_repair


def parse_tool_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """Parse argument text; return ``(arguments, None)`` or ``(None, reason)``.

    Models wrap JSON in markdown fences, leave trailing commas, comments or single quotes;
    json-repair fixes those. Text that repairs to something other than an object is refused
    rather than guessed at.
    """
    text = raw.strip()
    if not text:
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = _repair(text)
        if value is None:
            return None, "the arguments are not valid JSON and could not be repaired"
    if not isinstance(value, dict):
        return None, f"the arguments must be a JSON object, got {type(value).__name__}"
    # Python reads NaN, Infinity and 1e999 as floats, but no JSON document may hold them
    # (PostgreSQL refuses them): the call is refused here, before it is stored anywhere.
    where = non_finite_path(value)
    if where is not None:
        return None, f"the number at {where} is not finite (NaN or infinity)"
    return value, None


def non_finite_path(value: Any, path: str = "") -> str | None:
    """The JSON pointer of the first NaN or infinity in ``value``, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "/"
    items: Iterable[tuple[Any, Any]] = ()
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    for key, item in items:
        found = non_finite_path(item, f"{path}/{key}")
        if found:
            return found
    return None


def _repair(text: str) -> Any:
    if text.startswith("```"):
        text = text.strip("`")
        text = text.split("\n", 1)[1] if text.lower().startswith("json") else text
    repaired = json_repair.repair_json(text, return_objects=True, skip_json_loads=True)
    # json-repair returns "" when nothing object-like could be salvaged.
    return None if repaired == "" else repaired
