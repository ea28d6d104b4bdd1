"""Checking a model's arguments against a tool's JSON Schema (Draft 2020-12, formats on).

The result lists every violation in words a model can act on: where, what was expected, and
what came. Nothing is coerced: "5" is not 5.
"""

import json
from typing import Any

from jsonschema.exceptions import ValidationError

from tools.registry import ToolDefinition

MAX_SHOWN_VALUE = 80


def find_violations(tool: ToolDefinition, arguments: dict[str, Any]) -> list[dict[str, str]]:
    """Every violation of the tool's parameter schema; empty when the arguments are valid."""
    errors = sorted(tool.validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    return [_describe(leaf) for error in errors for leaf in _leaves(error)]


def _leaves(error: ValidationError) -> list[ValidationError]:
    """The specific causes behind a combinator error (allOf/anyOf/oneOf/if-then)."""
    if not error.context:
        return [error]
    return [leaf for sub in error.context for leaf in _leaves(sub)]


def _describe(error: ValidationError) -> dict[str, str]:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in error.absolute_path]
    return {
        "at": "/" + "/".join(parts),
        "problem": error.message,
        "expected": f"{error.validator}: {_short(error.validator_value)}",
        "got": _short(error.instance),
    }


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_SHOWN_VALUE else text[: MAX_SHOWN_VALUE - 1] + "…"


def summarize_violations(tool_name: str, violations: list[dict[str, str]]) -> str:
    lines = [f"The arguments for {tool_name} are invalid ({len(violations)} problem(s)):"]
    lines += [f"- at {v['at']}: {v['problem']}" for v in violations]
    lines.append("Fix the arguments and call the tool again.")
    return "\n".join(lines)
