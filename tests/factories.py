"""Typed factories with unique defaults. Each returns a saved object."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from harness.api_keys import IssuedKey, create_api_key
from harness.models import Tenant
from tests.support.agents import DEMO_TOOLS

_counter = itertools.count(1)


def create_tenant(**overrides: Any) -> Tenant:
    n = next(_counter)
    values = {"slug": f"tenant-{n}", "name": f"Tenant {n}"} | overrides
    return Tenant.objects.create(**values)


def create_key(tenant: Tenant, name: str = "") -> IssuedKey:
    return create_api_key(tenant.slug, name or f"key-{next(_counter)}")


def write_script(folder: Path, responses: list[dict[str, Any]], name: str = "") -> Path:
    """A scripted-model file playing ``responses`` in order."""
    path = folder / f"{name or f'script-{next(_counter)}'}.json"
    path.write_text(json.dumps(responses, ensure_ascii=False), encoding="utf-8")
    return path


def write_agent(folder: Path, **overrides: Any) -> dict[str, Any]:
    """An agent file in ``folder`` (which tests add to ``HARNESS_AGENT_DIRS``)."""
    n = next(_counter)
    agent = {
        "name": f"test-agent-{n}",
        "description": "An agent written by a test.",
        "system_prompt": "You are a test agent.",
        "tools": DEMO_TOOLS,
        "max_steps": 6,
    } | overrides
    (folder / f"{agent['name']}.json").write_text(json.dumps(agent), encoding="utf-8")
    return agent


def write_tool(folder: Path, **overrides: Any) -> dict[str, Any]:
    """A valid tool file in ``folder`` (which tests add to ``HARNESS_TOOL_DIRS``)."""
    n = next(_counter)
    tool = {
        "name": f"test_tool_{n}",
        "description": "A tool written by a test; it echoes its arguments back.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        "handler": "tests.tools.handlers.echo",
        "access": ["ticket:read"],
        "timeout_s": 5,
        "idempotent": True,
        "concurrency_safe": True,
    } | overrides
    (folder / f"{tool['name']}.json").write_text(json.dumps(tool), encoding="utf-8")
    return tool
