"""A tool file's name is checked whole: with ``^…$`` and ``re.match``, ``"get_ticket\\n"`` passed
the check (``$`` matches before a final newline), so a tool could be registered under a name a
model provider refuses and that no rule or permission written for ``get_ticket`` would match."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tools.registry import load_tool_files

TOOL = {
    "description": "Look up an order by its number.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    "access": ["orders:read"],
    "handler": "tests.tools.handlers.echo",
}
VALID_NAME = st.from_regex(r"[a-zA-Z0-9_-]{1,63}", fullmatch=True)
CONTROL = st.sampled_from(["\n", "\r", "\t", "\x00", "\x0b", "\u2028", " "])


@hypothesis_settings(max_examples=60, deadline=None)
@given(name=VALID_NAME, control=CONTROL, at=st.integers(min_value=0, max_value=64))
def test_a_name_with_any_character_a_provider_refuses_is_a_fault(
    tmp_path_factory, name, control, at
):
    bad = name[:at] + control + name[at:]
    path = tmp_path_factory.mktemp("tools") / "tool.json"
    path.write_text(json.dumps(TOOL | {"name": bad}), encoding="utf-8")

    tools, faults = load_tool_files([path])

    assert tools == {}
    assert [f.message for f in faults] == [
        f"name {bad!r} would be rejected by model providers: use 1-64 letters, digits, '_' or '-'"
    ]


@hypothesis_settings(max_examples=30, deadline=None)
@given(name=VALID_NAME)
def test_a_valid_name_loads(tmp_path_factory, name):
    path = tmp_path_factory.mktemp("tools") / "tool.json"
    path.write_text(json.dumps(TOOL | {"name": name}), encoding="utf-8")

    tools, faults = load_tool_files([path])

    assert faults == []
    assert list(tools) == [name]
