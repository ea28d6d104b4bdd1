"""A tool's JSON Schema as the catalogue's table of arguments
(``harness.console.schema_table``): any schema renders, and every property is a row."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.console.schema_table import MAX_DEPTH, schema_rows, schema_summary, type_of

NAMES = st.text(min_size=1, max_size=8)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(NAMES, children, max_size=3),
    max_leaves=12,
)
LEAF = st.booleans() | st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["string", "integer", "number", "boolean", "null"])
        | st.lists(st.sampled_from(["string", "null"]), max_size=2),
        "description": st.text(max_size=30) | JSON,
        "enum": st.lists(JSON, max_size=3),
        "pattern": st.text(max_size=10),
        "minimum": st.integers(),
        "default": JSON,
        "format": st.sampled_from(["email", "date", "uri"]),
        "anyOf": st.lists(st.fixed_dictionaries({"type": st.just("string")}), max_size=2),
    },
)


def objects(children: Any) -> Any:
    return st.dictionaries(NAMES, children, max_size=4).flatmap(_object_around)


def _object_around(properties: dict[str, Any]) -> Any:
    names = st.sampled_from(sorted(properties)) if properties else NAMES
    return st.fixed_dictionaries(
        {"properties": st.just(properties)},
        optional={
            "type": st.just("object"),
            # Mostly names of its properties (and some that are not); sometimes not a list.
            "required": st.lists(names, max_size=4) | st.lists(NAMES, max_size=2) | JSON,
            "additionalProperties": st.booleans() | st.fixed_dictionaries({"type": st.just("x")}),
            "description": st.text(max_size=20),
        },
    )


SCHEMAS = st.recursive(
    LEAF,
    lambda children: (
        objects(children) | st.fixed_dictionaries({"type": st.just("array"), "items": children})
    ),
    max_leaves=15,
)


def expected_paths(schema: Any, prefix: tuple[str, ...] = (), depth: int = 0) -> list[tuple]:
    """Every property's path, walked independently of the module: objects' properties, and
    the properties of an array's items under ``[]``."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    paths = []
    for name, spec in schema["properties"].items():
        path = (*prefix, name)
        paths.append(path)
        if depth + 1 < MAX_DEPTH and isinstance(spec, dict):
            paths += expected_paths(spec, path, depth + 1)
            paths += expected_paths(spec.get("items"), (*path, "[]"), depth + 1)
    return paths


@given(objects(SCHEMAS))
def test_every_property_of_any_schema_is_a_row_in_order(schema):
    rows = schema_rows(schema)

    assert [row.path for row in rows] == expected_paths(schema)
    for row in rows:
        assert isinstance(row.type, str)
        assert row.type
        assert isinstance(row.description, str)
        assert all(isinstance(c, str) for c in row.constraints)


@given(objects(SCHEMAS))
def test_a_top_level_argument_is_required_exactly_when_the_schema_says_so(schema):
    required = schema.get("required")
    names = {n for n in required if isinstance(n, str)} if isinstance(required, list) else set()

    top = [row for row in schema_rows(schema) if len(row.path) == 1]

    assert {row.path[0] for row in top if row.required} == names & set(schema["properties"])


@given(JSON)
def test_anything_that_is_not_a_schema_renders_without_error(value):
    rows = schema_rows(value)

    assert isinstance(rows, list)
    assert isinstance(schema_summary(value), str)
    assert isinstance(type_of(value), str)


def test_a_nested_object_and_array_items_are_named_by_their_path():
    schema = {
        "type": "object",
        "properties": {
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "Where."}},
                "required": ["city"],
            },
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"sku": {"type": "string"}}},
            },
            "status": {"enum": ["open", "closed"]},
            "note": {"type": ["string", "null"], "maxLength": 200},
        },
        "additionalProperties": False,
    }

    rows = {row.name: row for row in schema_rows(schema)}

    assert list(rows) == ["address", "address.city", "items", "items[].sku", "status", "note"]
    assert rows["address.city"].required
    assert rows["address.city"].depth == 1
    assert rows["address.city"].description == "Where."
    assert rows["items"].type == "array of object"
    assert rows["items[].sku"].depth == 1
    assert rows["status"].constraints == ["one of open, closed"]
    assert rows["note"].type == "string or null"
    assert rows["note"].constraints == ["maxLength 200"]
    assert schema_summary(schema) == "No other argument is accepted."
