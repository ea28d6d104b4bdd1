"""Helpers for policy tests that go through the run API with a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.models import Run
from tests.factories import write_agent, write_script

TICKET = "T-20250318-007"
ADMIN = {"X-Harness-User": "alice"}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in pairs]}


def scripted_agent(agent_dir: Path, responses: list[dict[str, Any]], **agent: Any) -> str:
    """An agent playing ``responses``; returns its name."""
    script = write_script(agent_dir.parent, responses)
    return write_agent(agent_dir, model=f"scripted:{script}", **agent)["name"]


def start(client: Any, agent: str, user: str = "alice", **body: Any) -> Any:
    return client.post("/api/v1/runs", {"agent": agent, "user": user, "input": "go"} | body)


def run_script(
    client: Any, agent_dir: Path, responses: list[dict[str, Any]], user: str = "alice", **agent: Any
) -> dict[str, Any]:
    response = start(client, scripted_agent(agent_dir, responses, **agent), user)
    assert response.status_code in (200, 202), response.content
    return response.json()


def tool_results(run_id: str) -> list[dict[str, Any]]:
    messages = Run.objects.get(id=run_id).messages
    return [json.loads(m["content"]) for m in messages if m["role"] == "tool"]


def proposed_calls(run_id: str) -> list[str]:
    """Every tool call the model proposed in the run, in order."""
    messages = Run.objects.get(id=run_id).messages
    return [
        c["name"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])
    ]


def spans_of(client: Any, run: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    spans = client.get(f"/api/v1/runs/{run['id']}/trace").json()["spans"]
    return [span for span in spans if span["kind"] == kind]
