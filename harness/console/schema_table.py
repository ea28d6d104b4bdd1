"""A tool's JSON Schema as a table a person reads: one row per argument, nested ones under
their parent (``address.city``, ``items[].sku``), with its type, whether it is required, its
description and its constraints.

It reads whatever a schema holds without failing: a property whose schema is ``true``/``false``
or not an object, a ``type`` list, ``required`` that is not a list — each is shown as it is,
and every property at every level is a row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Keywords shown as constraints, in this order, when a property has them.
CONSTRAINTS = (
    "enum",
    "const",
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "default",
)
MAX_DEPTH = 8  # deeper nesting is shown as its parent's type, not expanded
MAX_VALUE_CHARS = 120


@dataclass(frozen=True)
class SchemaRow:
    path: tuple[str, ...]  # names from the top: ("address", "city"); "[]" marks array items
    type: str
    required: bool
    description: str = ""
    constraints: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return ".".join(self.path).replace(".[]", "[]")

    @property
    def depth(self) -> int:
        return len([part for part in self.path if part != "[]"]) - 1


def schema_rows(schema: Any) -> list[SchemaRow]:
    """The rows of ``schema``'s properties (an object schema); nothing for anything else."""
    rows: list[SchemaRow] = []
    _object_rows(schema, (), rows, 0)
    return rows


def schema_summary(schema: Any) -> str:
    """What the top of the schema says beyond its properties (e.g. no other argument)."""
    if not isinstance(schema, dict):
        return ""
    extra = schema.get("additionalProperties")
    if extra is False:
        return "No other argument is accepted."
    if isinstance(extra, dict):
        return f"Other arguments: {type_of(extra)}."
    return ""


def type_of(schema: Any) -> str:
    """A short name for what ``schema`` accepts."""
    if schema is True or schema == {}:
        return "any"
    if schema is False:
        return "nothing"
    if not isinstance(schema, dict):
        return _shown(schema)
    declared = schema.get("type")
    if isinstance(declared, list):
        name = " or ".join(str(t) for t in declared) or "any"
    elif isinstance(declared, str):
        name = declared
    elif "$ref" in schema:
        name = f"see {schema['$ref']}"
    elif any(k in schema for k in ("anyOf", "oneOf")):
        options = schema.get("anyOf", schema.get("oneOf"))
        if isinstance(options, list):
            name = " or ".join(type_of(option) for option in options) or "any"
        else:
            name = "any"
    elif "enum" in schema:
        name = "one of"
    elif "const" in schema:
        name = "constant"
    elif "properties" in schema:
        name = "object"
    else:
        name = "any"
    if name == "array" and "items" in schema:
        name = f"array of {type_of(schema['items'])}"
    return name


def _object_rows(schema: Any, prefix: tuple[str, ...], rows: list[SchemaRow], depth: int) -> None:
    if not isinstance(schema, dict):
        return
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return
    required = schema.get("required")
    if not isinstance(required, list):
        required = []
    required_names = {name for name in required if isinstance(name, str)}
    for name, spec in properties.items():
        path = (*prefix, str(name))
        rows.append(
            SchemaRow(
                path=path,
                type=type_of(spec),
                required=name in required_names,
                description=_description(spec),
                constraints=_constraints(spec),
            )
        )
        if depth + 1 >= MAX_DEPTH or not isinstance(spec, dict):
            continue
        _object_rows(spec, path, rows, depth + 1)
        items = spec.get("items")
        if isinstance(items, dict):
            _object_rows(items, (*path, "[]"), rows, depth + 1)


def _description(spec: Any) -> str:
    if not isinstance(spec, dict):
        return ""
    text = spec.get("description", spec.get("title", ""))
    return text if isinstance(text, str) else _shown(text)


def _constraints(spec: Any) -> list[str]:
    if not isinstance(spec, dict):
        return []
    shown = []
    for keyword in CONSTRAINTS:
        if keyword not in spec:
            continue
        value = spec[keyword]
        if keyword == "enum" and isinstance(value, list):
            shown.append("one of " + ", ".join(_shown(v) for v in value))
        else:
            shown.append(f"{keyword} {_shown(value)}")
    return shown


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"
