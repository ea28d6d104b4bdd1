"""Agents are data: one JSON file per agent, read from the configured folders.

Folders are the project's ``harness/agents/`` plus ``HARNESS_AGENT_DIRS``. A bad file raises
``InvalidAgentFile`` naming the file and the fault; the system check turns that into a
start-up error. A model route is ``provider:model`` or an alias (a name without a colon, such
as ``cheap``) that ``HARNESS_ROUTES`` configures: an alias nobody configured is a fault of the
file, found at start-up rather than at the first run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from jsonschema import Draft202012Validator

from harness.errors import InvalidAgentFile, UnknownAgent

_SCHEMA_PATH = Path(__file__).with_name("agent_file.schema.json")


@dataclass(frozen=True)
class AgentSpec:
    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...]
    model: str = ""
    fallback_models: tuple[str, ...] = ()
    summary_model: str = ""
    max_steps: int = 10
    max_tokens_per_run: int | None = None
    max_cost_per_run_usd: float | None = None
    max_tool_calls_per_run: int | None = None
    max_calls_per_tool: int | None = None
    deadline_s: float | None = None
    context_tokens: int | None = None
    # "react": decide each step as it comes; "plan_execute": write a plan first, follow it,
    # and plan again once when a step fails.
    strategy: str = "react"
    path: str = ""


def get_agent(name: str) -> AgentSpec:
    agents = list_agents()
    if name not in agents:
        raise UnknownAgent(name, sorted(agents))
    return agents[name]


def list_agents() -> dict[str, AgentSpec]:
    """Every agent, by name, from the folders currently configured."""
    folders = _resolved_folders(tuple(str(folder) for folder in settings.HARNESS_AGENT_DIRS))
    return _load_agents(folders, settings.HARNESS_DEFAULT_MAX_STEPS, configured_aliases())


# Resolving walks each folder's path (a system call per part), and every run asks for its agent.
@lru_cache(maxsize=64)
def _resolved_folders(folders: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(str(Path(folder).resolve()) for folder in folders)


def configured_aliases() -> frozenset[str]:
    """Route names of ``HARNESS_ROUTES`` that are not ``provider:model`` (e.g. ``cheap``)."""
    table = getattr(settings, "HARNESS_ROUTES", {}) or {}
    if not isinstance(table, dict):
        return frozenset()
    return frozenset(name for name in table if ":" not in name and name != "*")


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(_SCHEMA_PATH.read_text(encoding="utf-8")))


@cache
def _load_agents(
    folders: tuple[str, ...], default_max_steps: int, aliases: frozenset[str]
) -> dict[str, AgentSpec]:
    agents: dict[str, AgentSpec] = {}
    for folder in folders:
        for path in sorted(Path(folder).glob("*.json")):
            agent = _read_agent_file(path, default_max_steps)
            _check_aliases(agent, aliases)
            if agent.name in agents:
                raise InvalidAgentFile(
                    str(path),
                    f"agent {agent.name!r} is already defined in {agents[agent.name].path}",
                )
            agents[agent.name] = agent
    return agents


def _check_aliases(agent: AgentSpec, aliases: frozenset[str]) -> None:
    routes = [
        ("$.model", agent.model),
        *((f"$.fallback_models[{i}]", r) for i, r in enumerate(agent.fallback_models)),
        ("$.summary_model", agent.summary_model),
    ]
    for where, route in routes:
        if route and ":" not in route and route not in aliases:
            configured = ", ".join(sorted(aliases)) or "none"
            raise InvalidAgentFile(
                agent.path,
                f"at {where}: route {route!r} is neither provider:model nor "
                f"a route configured in HARNESS_ROUTES (aliases configured: {configured})",
            )


def _read_agent_file(path: Path, default_max_steps: int) -> AgentSpec:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidAgentFile(
            str(path), f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    except OSError as exc:
        raise InvalidAgentFile(str(path), f"cannot be read: {exc}") from exc
    return agent_from_data(data, str(path), default_max_steps)


def agent_from_data(data: Any, where: str, default_max_steps: int) -> AgentSpec:
    """An agent file's content, checked against its schema (``InvalidAgentFile`` naming
    ``where``); also how an experiment's candidate agent file is read."""
    error = next(iter(sorted(_validator().iter_errors(data), key=lambda e: e.path)), None)
    if error is not None:
        raise InvalidAgentFile(where, f"at {error.json_path}: {error.message}")
    return AgentSpec(
        name=data["name"],
        description=data["description"],
        system_prompt=data["system_prompt"],
        tools=tuple(data["tools"]),
        model=data.get("model", ""),
        fallback_models=tuple(data.get("fallback_models", ())),
        summary_model=data.get("summary_model", ""),
        max_steps=data.get("max_steps", default_max_steps),
        max_tokens_per_run=data.get("max_tokens_per_run"),
        max_cost_per_run_usd=data.get("max_cost_per_run_usd"),
        max_tool_calls_per_run=data.get("max_tool_calls_per_run"),
        max_calls_per_tool=data.get("max_calls_per_tool"),
        deadline_s=data.get("deadline_s"),
        context_tokens=data.get("context_tokens"),
        strategy=data.get("strategy", "react"),
        path=where,
    )
