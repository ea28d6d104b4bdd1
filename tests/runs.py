"""Helpers for tests that go through the run API, with the demo agent or a scripted model."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.models import Run
from tests.factories import write_agent, write_script

TICKET = "T-20250318-007"
ADMIN = {"X-Harness-User": "alice"}
QUESTION = "Why has ticket T-20250318-007 not been handled?"
TEST_TOOLS = ["get_ticket", "search_tickets", "always_fails", "slow_note"]


def wait_until(predicate: Callable[[], Any], timeout_s: float = 20) -> Any:
    """Poll ``predicate`` until what it returns is true, and return that; fail the test at the
    timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in pairs]}


def scripted_agent(agent_dir: Path, responses: list[dict[str, Any]], **agent: Any) -> str:
    """An agent playing ``responses``; returns its name."""
    script = write_script(agent_dir.parent, responses)
    return write_agent(agent_dir, model=f"scripted:{script}", **agent)["name"]


def agent_with(agent_dir: Path, responses: list[dict[str, Any]], **agent: Any) -> str:
    """A scripted agent with the read tools and the test tools (failing, slow); its name."""
    return scripted_agent(agent_dir, responses, **({"tools": TEST_TOOLS} | agent))


def demo_run(client: Any, user: str = "bob", question: str = QUESTION) -> dict[str, Any]:
    """A sync run of the demo agent; asserts it answered 200."""
    response = client.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": user, "input": question}
    )
    assert response.status_code == 200, response.content
    return response.json()


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
