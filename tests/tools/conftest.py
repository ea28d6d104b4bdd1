"""Fixtures for the tool tests: a folder of extra tool files and scripted runs through the API."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ApiClient
from tests.factories import write_agent, write_script
from tests.support.agents import DEMO_TOOLS
from tests.tools import handlers


@pytest.fixture(autouse=True)
def _handler_state() -> Any:
    handlers.reset()
    yield
    handlers.release.set()  # a hung test handler ends instead of holding a worker thread


@dataclass
class ScriptedRun:
    """A finished run and what the model was shown."""

    run: dict[str, Any]
    trace: dict[str, Any]

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """The tool-result messages of the run, in conversation order, parsed."""
        return [
            {"name": m["name"], "call_id": m["tool_call_id"], **json.loads(m["content"])}
            for m in self.last_request["messages"]
            if m["role"] == "tool"
        ]

    @property
    def last_request(self) -> dict[str, Any]:
        return self.model_requests[-1]

    @property
    def model_requests(self) -> list[dict[str, Any]]:
        return [
            record["payload"]
            for span in self.trace["spans"]
            for record in span["audit"]
            if record["kind"] == "model_request"
        ]

    def spans(self, kind: str) -> list[dict[str, Any]]:
        return [span for span in self.trace["spans"] if span["kind"] == kind]

    def tool_io(self, name: str) -> dict[str, Any]:
        span = next(s for s in self.spans("tool_call") if s["name"] == name)
        return span["audit"][0]["payload"]


RunScript = Callable[..., ScriptedRun]


@pytest.fixture
def run_script(acme: ApiClient, agent_dir: Path, tmp_path: Path) -> RunScript:
    """Run an agent whose scripted model proposes ``steps`` (lists of calls), then answers."""

    def run(
        *steps: list[dict[str, Any]],
        tools: list[str] | None = None,
        user: str = "bob",
        client: ApiClient = acme,
    ) -> ScriptedRun:
        responses = [{"tool_calls": calls} for calls in steps] + [{"text": "Done."}]
        script = write_script(tmp_path, responses)
        agent = write_agent(
            agent_dir, model=f"scripted:{script}", tools=tools or DEMO_TOOLS, max_steps=10
        )
        response = client.post(
            "/api/v1/runs", {"agent": agent["name"], "user": user, "input": "Go."}
        )
        assert response.status_code == 200, response.content
        body = response.json()
        trace = client.get(body["links"]["trace"]).json()
        return ScriptedRun(run=body, trace=trace)

    return run
