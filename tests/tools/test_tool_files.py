"""Bad tool files are reported, each with its fault, by ``check_tools`` and the system check."""

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError

from tests.tools.mcp_support import use_demo_servers

GOOD = {
    "name": "look_up_order",
    "description": "Look up one order by its id: items, state and delivery date.",
    "parameters": {
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "required": ["id"],
        "additionalProperties": False,
    },
    "handler": "tests.tools.handlers.echo",
    "access": ["order:read"],
}
OPTIONAL_ID = {"type": "object", "properties": {"id": {"type": "string"}}}


def http(url, **more):
    return {"kind": "http", "method": "GET", "url": url, **more}


# (case, file content, severity, the fault's message)
BAD_FILES = [
    (
        "invalid JSON",
        '{\n  "name": "look_up_order",\n}\n',
        "error",
        "invalid JSON at line 3, column 1: Expecting property name enclosed in double quotes",
    ),
    (
        "metaschema: a value out of range",
        GOOD | {"timeout_s": 0},
        "error",
        "at /timeout_s: 0 is less than or equal to the minimum of 0",
    ),
    (
        "metaschema: an unknown key",
        GOOD | {"timeout": 5},
        "error",
        "at /: Additional properties are not allowed ('timeout' was unexpected)",
    ),
    (
        "metaschema: inside an HTTP handler",
        GOOD | {"handler": http("https://crm.example.com/orders", method="FETCH")},
        "error",
        "at /handler/method: 'FETCH' is not one of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']",
    ),
    (
        "parameters is not a valid JSON Schema",
        GOOD | {"parameters": {"type": "object", "properties": {"id": {"type": "strin"}}}},
        "error",
        "'parameters' is not a valid JSON Schema at /properties/id/type: 'strin' is not valid "
        "under any of the given schemas",
    ),
    (
        "unknown handler module",
        GOOD | {"handler": "tests.tools.nowhere.echo"},
        "error",
        "handler 'tests.tools.nowhere.echo' cannot be imported: No module named "
        "'tests.tools.nowhere'",
    ),
    (
        "unknown handler function",
        GOOD | {"handler": "tests.tools.handlers.nothing"},
        "error",
        "handler 'tests.tools.handlers.nothing' cannot be imported: Module "
        '"tests.tools.handlers" does not define a "nothing" attribute/class',
    ),
    (
        "handler that is not callable",
        GOOD | {"handler": "tests.tools.handlers.finished"},
        "error",
        "handler 'tests.tools.handlers.finished' is not callable",
    ),
    (
        "a name a provider would reject",
        GOOD | {"name": "look up order!"},
        "error",
        "name 'look up order!' would be rejected by model providers: use 1-64 letters, digits, "
        "'_' or '-'",
    ),
    (
        "no access declared",
        GOOD | {"access": []},
        "error",
        "no required access declared: nobody could ever run this tool",
    ),
    (
        "a placeholder in the host of an HTTP tool",
        GOOD | {"handler": http("https://{id}.example.com/orders")},
        "error",
        "at /handler/url: the scheme and host may not contain placeholders (the model must "
        "never choose where a request goes)",
    ),
    (
        "a URL placeholder that is not a required argument",
        GOOD | {"parameters": OPTIONAL_ID, "handler": http("https://crm.example.com/orders/{id}")},
        "error",
        "at /handler/url: {id} must name a required property of 'parameters'",
    ),
    (
        "an argument in an HTTP header",
        GOOD | {"handler": http("https://crm.example.com/orders", headers={"X-Order": "{id}"})},
        "error",
        "at /handler/headers/X-Order: header values may use only ${secret:NAME}",
    ),
    (
        "fetch_details naming no tool",
        GOOD | {"key_fields": ["id"], "fetch_details": {"tool": "get_order", "argument": "id"}},
        "error",
        "fetch_details names tool 'get_order', which no tool file defines",
    ),
    (
        "fetch_details naming an argument the tool lacks",
        GOOD | {"key_fields": ["id"], "fetch_details": {"tool": "get_ticket", "argument": "id"}},
        "error",
        "fetch_details: tool 'get_ticket' has no argument 'id'",
    ),
    (
        "fetch_details taking a field that is not a key field",
        GOOD
        | {
            "key_fields": ["state"],
            "fetch_details": {"tool": "get_ticket", "argument": "ticket_id"},
        },
        "error",
        "fetch_details takes the field 'ticket_id', which is not in key_fields (a digest keeps "
        "only key fields)",
    ),
    (
        "a description too short to guide a model",
        GOOD | {"description": "Orders."},
        "warning",
        "description is under 15 characters: too short to guide a model",
    ),
    (
        "a format the validator cannot check",
        GOOD
        | {
            "parameters": {
                "type": "object",
                "properties": {"phone": {"type": "string", "format": "phone"}},
            }
        },
        "warning",
        "format 'phone' in 'parameters' is not checked by the validator: any string passes "
        "(use a pattern instead)",
    ),
    (
        "a secret that is not configured",
        GOOD
        | {
            "handler": http(
                "https://crm.example.com/orders", headers={"Authorization": "${secret:CRM_KEY}"}
            )
        },
        "warning",
        "secret CRM_KEY is not configured (set HARNESS_SECRET_CRM_KEY or "
        "HARNESS_SECRET_CRM_KEY_FILE): calls will fail",
    ),
]
CASE_IDS = [case[0] for case in BAD_FILES]


def write(folder: Path, content, name="look_up_order.json") -> Path:
    path = folder / name
    text = content if isinstance(content, str) else json.dumps(content, indent=2)
    path.write_text(text, encoding="utf-8")
    return path


def check_tools(*paths):
    """``check_tools``' output and whether it failed."""
    out = StringIO()
    try:
        call_command("check_tools", *map(str, paths), stdout=out)
    except CommandError as exc:
        return out.getvalue(), f"{exc} (exit {exc.returncode})"
    return out.getvalue(), None


@pytest.mark.parametrize(("case", "content", "severity", "message"), BAD_FILES, ids=CASE_IDS)
def test_check_tools_reports_a_bad_tool_file(tmp_path, case, content, severity, message):
    path = write(tmp_path, content)

    output, failure = check_tools(path)

    label = "ERROR  " if severity == "error" else "WARNING"
    assert f"{label} {path}: {message}\n" in output
    if severity == "error":
        assert failure is not None
        assert failure.endswith("0 tool(s) loaded, 1 error(s), 0 warning(s). (exit 1)")
    else:
        assert failure is None
        assert "1 tool(s) loaded, 0 error(s), 1 warning(s)." in output


@pytest.mark.parametrize(("case", "content", "severity", "message"), BAD_FILES, ids=CASE_IDS)
def test_the_system_check_reports_a_bad_tool_file(tool_dir, case, content, severity, message):
    path = write(tool_dir, content)
    stderr = StringIO()

    if severity == "error":
        with pytest.raises(SystemCheckError) as raised:
            call_command("check", stderr=stderr)
        report = str(raised.value)
        assert f"{path}: (tools.E001) {message}" in report
    else:
        call_command("check", stderr=stderr)
        assert f"{path}: (tools.W001) {message}" in stderr.getvalue()


def test_a_duplicate_name_is_reported_naming_both_files(tmp_path):
    first = write(tmp_path, GOOD, "a.json")
    second = write(tmp_path, GOOD, "b.json")

    output, failure = check_tools(tmp_path)

    assert f"ERROR   {second}: duplicate tool name 'look_up_order' (also in {first})\n" in output
    assert failure is not None


def test_every_fault_of_every_file_is_reported_in_one_go(tmp_path):
    write(tmp_path, GOOD | {"name": "look up", "access": []}, "a.json")
    write(tmp_path, "not json", "b.json")
    write(tmp_path, GOOD, "c.json")

    output, failure = check_tools(tmp_path)

    assert output.count("ERROR") == 3
    assert failure == "3 tool file(s) checked: 1 tool(s) loaded, 3 error(s), 0 warning(s). (exit 1)"


def test_a_file_may_refer_to_a_configured_tool_when_checked_alone(tmp_path):
    path = write(
        tmp_path,
        GOOD
        | {
            "key_fields": ["ticket_id"],
            "fetch_details": {"tool": "get_ticket", "argument": "ticket_id"},
        },
    )

    output, failure = check_tools(path)

    assert failure is None
    assert output == "1 tool file(s) checked: 1 tool(s) loaded, 0 error(s), 0 warning(s).\n"


PROJECT_TOOLS = Path(django_settings.BASE_DIR) / "tools" / "definitions"


def test_check_tools_without_paths_checks_the_configured_folders(tool_dir, settings):
    settings.HARNESS_TOOL_DIRS = [PROJECT_TOOLS, tool_dir]
    write(tool_dir, GOOD | {"access": []})

    output, failure = check_tools()

    assert "no required access declared" in output
    assert failure == "8 tool file(s) checked: 7 tool(s) loaded, 1 error(s), 0 warning(s). (exit 1)"


def test_the_projects_own_tool_files_pass(settings):
    settings.HARNESS_TOOL_DIRS = [PROJECT_TOOLS]
    settings.HARNESS_MCP_CONFIG = ""

    output, failure = check_tools()

    assert failure is None
    assert output == (
        "INFO    tools/definitions/get_ticket_messages.json: at /handler/server: MCP server "
        "'tickets' is not configured in HARNESS_MCP_CONFIG (unset): the tool is disabled\n"
        "7 tool file(s) checked: 7 tool(s) loaded, 0 error(s), 0 warning(s).\n"
    )


def test_the_projects_mcp_tool_matches_what_the_demo_server_advertises(
    settings, monkeypatch, transactional_db
):
    from tools.mcp.client import reset_pool

    settings.HARNESS_TOOL_DIRS = [PROJECT_TOOLS]
    use_demo_servers(settings, monkeypatch)

    try:
        output, failure = check_tools()
    finally:
        reset_pool()

    assert failure is None
    assert output == (
        "INFO    MCP servers configured in tools/mcp/demo-servers.json: tickets.\n"
        "7 tool file(s) checked: 7 tool(s) loaded, 0 error(s), 0 warning(s).\n"
    )


def test_check_tools_exits_non_zero_on_an_error_and_zero_on_warnings(tmp_path):
    bad = write(tmp_path, GOOD | {"access": []}, "bad.json")
    warned = write(tmp_path, GOOD | {"description": "Orders."}, "warned.json")
    manage = Path(django_settings.BASE_DIR) / "manage.py"

    def run(path):
        return subprocess.run(
            [sys.executable, str(manage), "check_tools", str(path)],
            capture_output=True,
            text=True,
            env=os.environ | {"DJANGO_SETTINGS_MODULE": "harness.settings.test"},
            check=False,
        )

    failed, passed = run(bad), run(warned)

    assert failed.returncode == 1
    assert f"ERROR   {bad}: no required access declared" in failed.stdout
    assert "1 error(s)" in failed.stderr
    assert passed.returncode == 0
    assert f"WARNING {warned}: description is under 15 characters" in passed.stdout


def test_tool_files_are_read_once_not_at_every_run(settings):
    """Without an MCP configuration too: reading and checking the files costs milliseconds."""
    from tools.registry import get_tool_registry

    settings.HARNESS_MCP_CONFIG = ""

    assert get_tool_registry() is get_tool_registry()
