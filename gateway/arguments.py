"""Turning a model's argument text into a dict, repairing what a library can repair."""

import json
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
    return value, None


def _repair(text: str) -> Any:
    if text.startswith("```"):
        text = text.strip("`")
        text = text.split("\n", 1)[1] if text.lower().startswith("json") else text
    repaired = json_repair.repair_json(text, return_objects=True, skip_json_loads=True)
    # json-repair returns "" when nothing object-like could be salvaged.
    return None if repaired == "" else repaired
