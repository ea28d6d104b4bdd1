"""What an experiment changes: the candidate, and which tools (if any) run live.

A candidate is an object with at least one of::

    {"model": "<route>",                 # any gateway route
     "system_prompt": "<text>",
     "agent": {<an agent file>},         # replaces the recorded agent (checked as a file)
     "policy_changes": [<edits>],        # the what-if preview's format (policy.snapshot)
     "strategy": "react" | "plan_execute"}

applied in that order over the recorded agent: the agent file first, then the model, the
prompt and the strategy. The candidate's model runs without fallbacks (it is what is measured).

Tools are ``"recorded"`` (every call answered from the recording), or live for named tools
(``{"live": ["get_ticket"]}``; ``"live"`` names every tool the dataset's agents may call).
A live tool must be declared ``read_only`` and ``idempotent`` in its file, and starting such an
experiment needs the scope ``experiment:live_tools`` besides ``experiment:run``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from core.errors import DomainError
from experiments.errors import ExperimentError
from experiments.errors import ExperimentErrorCode as Code
from harness.agent_registry import AgentSpec, agent_from_data, get_agent
from harness.errors import InvalidAgentFile
from policy import services as policy
from policy.errors import PolicyError
from tools.errors import ToolFilesInvalid
from tools.services import get_tool_registry

CANDIDATE_KEYS = ("model", "system_prompt", "agent", "policy_changes", "strategy")
STRATEGIES = ("react", "plan_execute")
LIVE_TOOLS_SCOPE = "experiment:live_tools"


def check_candidate(tenant_slug: str, candidate: dict[str, Any]) -> None:
    """Raises ``unsupported_candidate`` (400) naming the fault; a malformed policy change is
    the policy API's ``invalid_rule`` / ``rule_not_found``. Reads the policy, writes nothing."""
    unknown = sorted(set(candidate) - set(CANDIDATE_KEYS))
    if unknown or not candidate:
        raise ExperimentError(
            Code.UNSUPPORTED_CANDIDATE,
            f"A candidate has at least one of {', '.join(CANDIDATE_KEYS)}; "
            f"unknown: {', '.join(unknown) or 'none (the candidate is empty)'}.",
            {"unsupported": unknown, "supported": list(CANDIDATE_KEYS)},
        )
    for key in ("model", "system_prompt"):
        if key in candidate and (not isinstance(candidate[key], str) or not candidate[key]):
            raise _bad(key, f"{key} must be non-empty text.")
    if "strategy" in candidate and candidate["strategy"] not in STRATEGIES:
        raise _bad("strategy", f"strategy must be one of {', '.join(STRATEGIES)}.")
    if "agent" in candidate:
        try:
            agent_from_data(
                candidate["agent"], "candidate.agent", settings.HARNESS_DEFAULT_MAX_STEPS
            )
        except InvalidAgentFile as exc:
            raise _bad("agent", f"The candidate's agent file is not valid: {exc.fault}.") from exc
    if "policy_changes" in candidate:
        changes = candidate["policy_changes"]
        if not isinstance(changes, list) or not changes:
            raise _bad("policy_changes", "policy_changes is a non-empty list of edits.")
        try:  # checked as the what-if preview does
            policy.policy_snapshot(tenant_slug, changes)
        except PolicyError as exc:
            if exc.http_status != 400:
                raise  # e.g. 404 rule_not_found, as the policy API answers
            refused = f"The proposed policy change is refused: {exc.message}"
            raise _bad("policy_changes", refused) from exc


def _bad(key: str, message: str) -> ExperimentError:
    return ExperimentError(Code.UNSUPPORTED_CANDIDATE, message, {"field": key})


def candidate_agent(agent: AgentSpec, candidate: dict[str, Any]) -> AgentSpec:
    """The recorded run's agent as the candidate changes it."""
    if "agent" in candidate:
        agent = agent_from_data(
            candidate["agent"], "candidate.agent", settings.HARNESS_DEFAULT_MAX_STEPS
        )
    changes: dict[str, Any] = {"fallback_models": ()}
    for key in ("model", "system_prompt", "strategy"):
        if candidate.get(key):
            changes[key] = candidate[key]
    return dataclasses.replace(agent, **changes)


def live_tools(tools: Any, agents: Iterable[str], candidate: dict[str, Any]) -> list[str]:
    """The tools an experiment runs live (sorted), checked: ``tools`` is ``"recorded"``,
    ``"live"`` (every tool the agents may call) or ``{"live": [names]}``; each must be
    declared read-only and idempotent. Raises ``live_tool_refused`` naming the others."""
    if tools == "recorded":
        return []
    if tools == "live":
        names = set(_agent_tools(agents, candidate))
    elif isinstance(tools, dict) and set(tools) == {"live"} and isinstance(tools["live"], list):
        names = {str(name) for name in tools["live"]}
    else:
        raise ExperimentError(
            Code.UNSUPPORTED_CANDIDATE,
            'tools is "recorded", "live" or {"live": ["<tool>", ...]}.',
            {"tools": tools},
        )
    try:
        registry = get_tool_registry()
    except ToolFilesInvalid as exc:
        raise ExperimentError(Code.UNSUPPORTED_CANDIDATE, str(exc)) from exc
    refused = {}
    for name in sorted(names):
        tool = registry.get(name)
        if tool is None:
            refused[name] = "no such tool"
        elif not (tool.read_only and tool.idempotent):
            refused[name] = "its file does not declare it read_only and idempotent"
    if refused:
        raise ExperimentError(
            Code.LIVE_TOOL_REFUSED,
            "Only tools whose file says read_only and idempotent may run live in an "
            "experiment; refused: "
            + "; ".join(f"{name} ({why})" for name, why in refused.items())
            + ".",
            {"refused": refused},
        )
    return sorted(names)


def _agent_tools(agents: Iterable[str], candidate: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for name in set(agents):
        try:
            names.extend(candidate_agent(get_agent(name), candidate).tools)
        except DomainError:
            continue  # an agent gone: its items end as errors, not this check's concern
    return names
