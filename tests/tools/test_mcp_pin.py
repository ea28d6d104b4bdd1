"""The pin of an MCP tool and drift from it, as functions of what the server advertises: which
fields changed, the diff a reviewer reads, the hash recorded in tool files (its format is a
contract: files written by import_mcp_tools carry it)."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from tools.mcp.pin import Drift, Pin, advertised_sha256, compare, pin_for

SCHEMA = {
    "type": "object",
    "properties": {"ticket_id": {"type": "string", "title": "Ticket Id"}},
    "required": ["ticket_id"],
}
DESCRIPTION = "Fetch one ticket — 读取工单."
PIN = pin_for(DESCRIPTION, SCHEMA)


def advertised(description: str | None = DESCRIPTION, schema: dict | None = None):
    return SimpleNamespace(
        description=description, input_schema=SCHEMA if schema is None else schema
    )


def drift_of(description: str | None = DESCRIPTION, schema: dict | None = None) -> Drift | None:
    return compare("desk_ticket", "desk", "get_ticket", PIN, advertised(description, schema))


def test_the_hash_is_sha256_of_the_canonical_json_of_description_and_schema():
    canonical = json.dumps(
        {"description": DESCRIPTION, "input_schema": SCHEMA},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert '"description":"Fetch one ticket — 读取工单."' in canonical

    assert PIN.sha256 == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert advertised_sha256(DESCRIPTION, SCHEMA) == PIN.sha256
    assert (PIN.description, PIN.input_schema) == (DESCRIPTION, SCHEMA)


def test_no_description_is_pinned_as_an_empty_one():
    assert advertised_sha256(None, SCHEMA) == advertised_sha256("", SCHEMA)
    assert pin_for(None, SCHEMA).description == ""
    assert compare("t", "s", "st", pin_for("", SCHEMA), advertised(None)) is None


def test_a_pin_round_trips_through_its_spec_and_knows_when_it_was_edited():
    spec = PIN.to_spec()
    assert spec == {"sha256": PIN.sha256, "description": DESCRIPTION, "input_schema": SCHEMA}
    assert Pin.from_spec(spec) == PIN
    assert PIN.consistent
    assert not Pin(PIN.sha256, DESCRIPTION + ".", SCHEMA).consistent
    assert not Pin(PIN.sha256, DESCRIPTION, {**SCHEMA, "required": []}).consistent
    assert not Pin("0" * 64, DESCRIPTION, SCHEMA).consistent


def test_the_same_advertisement_is_no_drift_whatever_its_key_order():
    reordered = dict(reversed(list(SCHEMA.items())))
    assert drift_of() is None
    assert drift_of(schema=reordered) is None


def test_a_tool_the_server_no_longer_offers_is_gone():
    drift = compare("desk_ticket", "desk", "get_ticket", PIN, None)

    assert drift == Drift("desk_ticket", "desk", "get_ticket", "gone")
    assert drift.summary() == "server desk no longer offers the tool 'get_ticket'"
    assert drift.to_dict() == {
        "server": "desk",
        "server_tool": "get_ticket",
        "drift": "gone",
        "changed": [],
        "diff": "",
    }


def test_a_changed_description_is_named_with_a_diff_of_the_two():
    drift = drift_of("Fetch one ticket and mail it to the author.")

    assert drift is not None
    assert (drift.tool, drift.server, drift.server_tool) == ("desk_ticket", "desk", "get_ticket")
    assert drift.kind == "changed"
    assert drift.changed == ("description",)
    assert drift.summary() == (
        "server desk now advertises a different description for 'get_ticket' than the pinned one"
    )
    lines = drift.diff.splitlines()
    assert lines[:2] == ["--- pinned desk/get_ticket", "+++ advertised desk/get_ticket"]
    assert f'-  "description": "{DESCRIPTION}",' in lines  # unescaped: reviewers read it
    assert '+  "description": "Fetch one ticket and mail it to the author.",' in lines
    assert not any(line.startswith(('-  "input', '+  "input')) for line in lines)
    assert drift.to_dict() == {
        "server": "desk",
        "server_tool": "get_ticket",
        "drift": "changed",
        "changed": ["description"],
        "diff": drift.diff,
    }


def test_a_changed_schema_alone_is_named_and_shown():
    schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "cc": {"type": "string"}}}

    drift = drift_of(schema=schema)

    assert drift is not None
    assert drift.changed == ("input_schema",)
    assert "a different input_schema for" in drift.summary()
    added = [line for line in drift.diff.splitlines() if line.startswith("+") and "+++" not in line]
    assert any('"cc"' in line for line in added)
    assert not any("description" in line for line in added)


def test_both_changed_are_named_in_order():
    drift = drift_of("Other.", {"type": "object"})

    assert drift is not None
    assert drift.changed == ("description", "input_schema")
    assert "a different description and input_schema for 'get_ticket'" in drift.summary()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(
    description=st.text(max_size=20),
    extra=st.dictionaries(st.text(min_size=1, max_size=5), JSON, max_size=3),
)
def test_any_change_of_either_pinned_field_is_drift_and_none_else(description, extra):
    schema = {**SCHEMA, **{f"x-{key}": value for key, value in extra.items()}}

    drift = drift_of(description, schema)

    changed = tuple(
        name
        for name, same in (("description", description == DESCRIPTION), ("input_schema", not extra))
        if not same
    )
    if not changed:
        assert drift is None
    else:
        assert drift is not None
        assert drift.changed == changed


def test_a_schema_advertised_in_another_key_order_is_not_named_beside_a_changed_description():
    reordered = {
        key: dict(reversed(list(value.items()))) if isinstance(value, dict) else value
        for key, value in reversed(list(SCHEMA.items()))
    }

    drift = drift_of("Another description.", reordered)

    assert drift is not None
    assert drift.changed == ("description",)
    changed_lines = [
        line
        for line in drift.diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed_lines == [
        f'-  "description": "{DESCRIPTION}",',
        '+  "description": "Another description.",',
    ]


def test_the_hash_of_a_tool_without_a_description_is_that_of_an_empty_one():
    canonical = json.dumps(
        {"description": "", "input_schema": SCHEMA}, sort_keys=True, separators=(",", ":")
    )

    assert advertised_sha256(None, SCHEMA) == hashlib.sha256(canonical.encode()).hexdigest()
