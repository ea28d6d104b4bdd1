"""Real MCP servers for the tests: configuration, pinned tool files and runs through the API.

Import the fixtures into a test module (``from tests.tools.mcp_support import mcp_stdio``).
Servers are real processes: ``tests.support.mcp_server`` (the test desk) over stdio or
Streamable HTTP, and the demo ticket desk ``tools.mcp.demo_server`` over stdio.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from harness.demo import database_url
from tests.factories import write_agent, write_script
from tests.support.servers import free_port
from tools.mcp.client import reset_pool

BASE_DIR = Path(django_settings.BASE_DIR)
PINNED_TEST_TOOLS = BASE_DIR / "tests" / "support" / "mcp_tools"
TEST_TOOLS = sorted(path.stem for path in PINNED_TEST_TOOLS.glob("*.json"))
DEMO_SERVERS = BASE_DIR / "tools" / "mcp" / "demo-servers.json"


@dataclass
class McpSetup:
    """What a test's servers wrote down, and the folder of its pinned tool files."""

    state: Path
    tool_dir: Path
    config_path: Path
    servers: dict[str, Any] = field(default_factory=dict)

    def log(self, tool: str) -> list[dict[str, Any]]:
        path = self.state / f"{tool}.log"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def drift(self, **changes: str | dict[str, Any] | None) -> None:
        """Per server tool: a new description, the advertised fields to replace
        (``{"input_schema": ...}``), or None to hide it."""
        (self.state / "drift.json").write_text(json.dumps(changes))

    def write_config(self) -> None:
        self.config_path.write_text(json.dumps({"mcpServers": self.servers}))


def stdio_server(module: str, state: Path, **env: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", module],
        "cwd": str(BASE_DIR),
        "env": {"MCP_TEST_STATE": str(state), "DATABASE_URL": database_url(), **env},
    }


@pytest.fixture
def mcp_setup(tmp_path: Path, settings: Any) -> Iterator[McpSetup]:
    state = tmp_path / "mcp-state"
    state.mkdir()
    tool_dir = tmp_path / "mcp-tools"
    shutil.copytree(PINNED_TEST_TOOLS, tool_dir)
    setup = McpSetup(state=state, tool_dir=tool_dir, config_path=tmp_path / "mcp.json")
    settings.HARNESS_TOOL_DIRS = [*settings.HARNESS_TOOL_DIRS, tool_dir]
    settings.HARNESS_MCP_CONFIG = str(setup.config_path)
    settings.HARNESS_MCP_LIST_TTL_S = 0  # every call checks the server's list now
    yield setup
    reset_pool()  # the test's server processes end with their sessions


@pytest.fixture
def mcp_stdio(mcp_setup: McpSetup, transactional_db: None) -> McpSetup:
    """The test desk over stdio as server ``testdesk``."""
    mcp_setup.servers["testdesk"] = stdio_server("tests.support.mcp_server", mcp_setup.state)
    mcp_setup.write_config()
    return mcp_setup


def use_demo_servers(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's own MCP configuration, set up as ``make run`` does: ``python`` on ``PATH`` is
    this one, and the secret ``DEMO_DESK_DATABASE_URL`` names this process's (test) database."""
    settings.HARNESS_MCP_CONFIG = str(DEMO_SERVERS)
    settings.HARNESS_SECRETS = {
        **settings.HARNESS_SECRETS,
        "DEMO_DESK_DATABASE_URL": database_url(),
    }
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


class HttpServerProcess:
    """The test desk over Streamable HTTP in its own process; it can be killed and restarted."""

    def __init__(self, state: Path, token: str) -> None:
        self.state, self.token, self.port = state, token, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        env = {"MCP_TEST_STATE": str(self.state), "MCP_TEST_TOKEN": self.token, "PATH": "/usr/bin"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.mcp_server", "--http", str(self.port)],
            cwd=BASE_DIR,
            env=env,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                assert self.process.poll() is None, "the MCP test server exited"
                time.sleep(0.1)
        raise AssertionError("the MCP test server did not listen in 20 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def mcp_http(mcp_setup: McpSetup, transactional_db: None, settings: Any) -> Iterator[McpSetup]:
    """The test desk over Streamable HTTP as server ``testdesk``, behind a bearer token that
    the configuration names as ``${secret:TESTDESK_TOKEN}``."""
    server = HttpServerProcess(mcp_setup.state, token="s3cret-token")
    server.start()
    settings.HARNESS_SECRETS = {**settings.HARNESS_SECRETS, "TESTDESK_TOKEN": "s3cret-token"}
    mcp_setup.servers["testdesk"] = {
        "url": server.url,
        "headers": {"Authorization": "Bearer ${secret:TESTDESK_TOKEN}"},
    }
    mcp_setup.write_config()
    mcp_setup.http = server  # type: ignore[attr-defined]
    yield mcp_setup
    reset_pool()
    server.stop()


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def start_run(
    client: Any,
    agent_dir: Path,
    steps: list[list[dict[str, Any]]],
    tools: list[str] | None = None,
    user: str = "alice",
    answer: str = "Done.",
) -> Any:
    """POST /api/v1/runs for a scripted agent proposing ``steps`` of calls, then ``answer``."""
    responses = [{"tool_calls": calls} for calls in steps] + [{"text": answer}]
    script = write_script(agent_dir.parent, responses)
    agent = write_agent(
        agent_dir, model=f"scripted:{script}", tools=tools or TEST_TOOLS, max_steps=10
    )
    response = client.post("/api/v1/runs", {"agent": agent["name"], "user": user, "input": "Go."})
    response.agent = agent["name"]  # to start the same agent again
    return response


def tool_results(client: Any, run: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool-result messages the model was shown, in order, parsed."""
    trace = client.get(run["links"]["trace"]).json()
    requests = [
        record["payload"]
        for span in trace["spans"]
        for record in span["audit"]
        if record["kind"] == "model_request"
    ]
    return [
        {"name": m["name"], **json.loads(m["content"])}
        for m in requests[-1]["messages"]
        if m["role"] == "tool"
    ]


def trace_of(client: Any, run: dict[str, Any]) -> dict[str, Any]:
    return client.get(run["links"]["trace"]).json()
