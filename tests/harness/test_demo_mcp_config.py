"""``HARNESS_MCP_CONFIG`` for the demo comes from one place: the configuration ``load_demo``
writes under var/, the settings' default. ``make run``'s processes, and ``check_tools`` or
``run_agent`` from a plain shell, all see the same servers; a set variable still wins."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from harness.demo import database_url, write_demo_mcp_config


def plain_shell(var_dir: Path, **extra: str) -> dict[str, str]:
    """An environment as a new terminal has it: no HARNESS_* variable, no venv on PATH."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(var_dir), "HARNESS_VAR_DIR": str(var_dir)} | extra


def check_tools(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check_tools", *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_check_tools_from_a_plain_shell_sees_and_reaches_the_demo_mcp_server(tmp_path):
    write_demo_mcp_config(tmp_path / "demo-mcp-servers.json")

    # Only the wait is raised: a shared, busy machine may take long to start a server.
    done = check_tools(plain_shell(tmp_path, HARNESS_MCP_CONNECT_TIMEOUT_S="120"))

    config = tmp_path / "demo-mcp-servers.json"
    assert f"MCP servers configured in {config}: tickets." in done.stdout, done.stdout
    # Drift is checked against the running server: reached, and the demo's pin matches.
    assert "cannot check drift" not in done.stdout
    assert "DRIFT" not in done.stdout
    assert "not configured" not in done.stdout  # neither the server nor a secret
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_set_variable_wins_over_the_demo_default_even_empty(tmp_path):
    write_demo_mcp_config(tmp_path / "demo-mcp-servers.json")

    done = check_tools(plain_shell(tmp_path, HARNESS_MCP_CONFIG=""), "--offline")

    assert "MCP servers configured" not in done.stdout
    assert "'tickets' is not configured in HARNESS_MCP_CONFIG (unset)" in done.stdout


def test_without_the_demos_file_no_server_is_configured(tmp_path):
    done = check_tools(plain_shell(tmp_path), "--offline")

    assert "MCP servers configured" not in done.stdout
    assert "'tickets' is not configured in HARNESS_MCP_CONFIG (unset)" in done.stdout


def test_the_written_configuration_names_this_interpreter_and_database_owner_only(tmp_path):
    path = write_demo_mcp_config(tmp_path / "demo.json")

    [server] = json.loads(path.read_text())["mcpServers"].values()

    assert server["command"] == sys.executable
    assert Path(server["cwd"]) == Path(settings.BASE_DIR).resolve()
    assert server["env"]["DATABASE_URL"] == database_url()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_database_url_with_a_password_stays_a_secret(tmp_path, monkeypatch):
    from django.db import connection

    monkeypatch.setitem(connection.settings_dict, "PASSWORD", "pw")

    path = write_demo_mcp_config(tmp_path / "demo.json")

    [server] = json.loads(path.read_text())["mcpServers"].values()
    assert server["env"]["DATABASE_URL"] == "${secret:DEMO_DESK_DATABASE_URL}"
    assert "pw" not in path.read_text()


@pytest.mark.django_db
def test_load_demo_writes_the_configuration_the_settings_default_to(settings, tmp_path):
    settings.DEMO_MCP_CONFIG = tmp_path / "demo-mcp-servers.json"

    out = io.StringIO()
    call_command("load_demo", stdout=out)

    assert settings.DEMO_MCP_CONFIG.is_file()
    assert str(settings.DEMO_MCP_CONFIG) in out.getvalue()
