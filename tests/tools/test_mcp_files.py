"""Pinned MCP tool files and the MCP configuration: what is an error, what is loaded, what a
draft looks like. No server is needed here (the e2e tests run real ones)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tools.mcp.config import get_mcp_config
from tools.mcp.pin import pin_for
from tools.mcp.services import draft_tool_file
from tools.registry import get_tool_registry, load_tool_files

ADVERTISED_SCHEMA = {
    "type": "object",
    "properties": {"ticket_id": {"type": "string"}},
    "required": ["ticket_id"],
}
PIN = pin_for("Fetch a ticket.", ADVERTISED_SCHEMA).to_spec()


def pinned(**handler):
    return {
        "name": "desk_ticket",
        "description": "Fetch one support ticket by its id, from the desk's MCP server.",
        "parameters": ADVERTISED_SCHEMA | {"additionalProperties": False},
        "handler": {"kind": "mcp", "server": "desk", "tool": "get_ticket", "pin": PIN} | handler,
        "access": ["ticket:read"],
    }


@pytest.fixture
def config(tmp_path, settings):
    path = tmp_path / "mcp.json"
    settings.HARNESS_MCP_CONFIG = str(path)

    def write(servers):
        path.write_text(json.dumps({"mcpServers": servers}))
        return path

    write({"desk": {"command": "desk-server", "args": ["--stdio"], "cwd": "."}})
    return write


def load(tmp_path, data):
    path = tmp_path / "tool.json"
    path.write_text(json.dumps(data))
    return load_tool_files([path])


def test_a_pinned_tool_loads_with_its_hand_written_contract(tmp_path, config):
    tools, faults = load(tmp_path, pinned())

    tool = tools["desk_ticket"]
    assert faults == []
    assert tool.enabled
    assert tool.handler_path == "mcp desk/get_ticket"
    assert tool.handler is tool.mcp
    assert (tool.mcp.server, tool.mcp.server_tool) == ("desk", "get_ticket")
    assert tool.spec().parameters["additionalProperties"] is False


def test_a_pin_whose_hash_does_not_match_its_content_is_an_error(tmp_path, config):
    edited = PIN | {"description": "Fetch a ticket. (edited by hand)"}

    tools, faults = load(tmp_path, pinned(pin=edited))

    assert tools == {}
    assert [f.severity for f in faults] == ["error"]
    assert "sha256 is not the hash of the pinned description" in faults[0].message


@pytest.mark.parametrize(
    ("handler", "message"),
    [
        ({"pin": {"sha256": "abc", "description": "", "input_schema": {}}}, "/handler/pin/sha256"),
        ({"server": "a b"}, "/handler/server"),
        ({"extra": 1}, "Additional properties"),
    ],
)
def test_a_malformed_mcp_handler_is_a_metaschema_error(tmp_path, config, handler, message):
    tools, faults = load(tmp_path, pinned(**handler))

    assert tools == {}
    assert message in faults[0].message


def test_a_tool_of_a_server_that_is_not_configured_is_disabled(tmp_path, config, settings):
    settings.HARNESS_MCP_CONFIG = ""

    tools, faults = load(tmp_path, pinned())

    assert tools["desk_ticket"].enabled is False
    assert [f.severity for f in faults] == ["info"]
    assert "MCP server 'desk' is not configured" in faults[0].message


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"desk": {"command": "x", "url": "http://x"}}, "give either 'command' (stdio) or 'url'"),
        ({"desk": {"command": "x", "timeout": 5}}, "unknown key 'timeout'"),
        ({"desk": {"url": "ftp://x"}}, "/mcpServers/desk/url: expected an http(s) URL"),
        ({"desk": {"command": "x", "args": "--stdio"}}, "/args: expected a list of strings"),
        ({"desk": {"url": "http://x", "headers": {"A": 1}}}, "/headers: expected strings"),
        ({"desk": {"url": "http://x", "type": "sse"}}, "'sse' is not supported here"),
    ],
)
def test_a_bad_configuration_stops_start_up_naming_the_fault(config, servers, message):
    path = config(servers)

    with pytest.raises(CommandError) as raised:
        call_command("check_tools", "--offline", stdout=StringIO())
    assert "error" in str(raised.value)
    assert message in " ".join(str(f) for f in get_mcp_config().faults)
    assert str(path) in str(get_mcp_config().faults[0])


def test_a_secret_the_configuration_names_must_be_configured(config, settings):
    settings.HARNESS_SECRETS = {}
    config({"desk": {"url": "https://desk.example", "headers": {"X-Key": "${secret:DESK}"}}})
    out = StringIO()

    call_command("check_tools", "--offline", stdout=out)

    assert "secret DESK is not configured (set HARNESS_SECRET_DESK" in out.getvalue()


def test_a_disabled_server_is_not_configured(config):
    config({"desk": {"command": "x", "disabled": True}})

    assert get_mcp_config().servers == {}


def test_import_drafts_are_pinned_and_never_load_unreviewed(tmp_path, config):
    class Advertised:
        name = "get ticket!"
        description = "Fetch a ticket."
        input_schema = ADVERTISED_SCHEMA

    draft = draft_tool_file("desk", Advertised())
    (tmp_path / "draft.json").write_text(json.dumps(draft))

    tools, faults = load_tool_files([tmp_path / "draft.json"])

    assert draft["name"] == "get_ticket_"
    assert draft["handler"]["pin"] == PIN
    assert draft["approval"] == "always"
    assert tools == {}
    assert ["no required access declared" in f.message for f in faults] == [True]


def test_the_demo_tool_is_pinned_to_the_demo_server_and_hidden_without_it(settings):
    settings.HARNESS_MCP_CONFIG = ""
    tool = get_tool_registry().get("get_ticket_messages")

    assert tool.mcp.server == "tickets"
    assert tool.enabled is False
