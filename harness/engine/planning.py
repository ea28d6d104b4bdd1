"""Plan, then act: for agents with ``"strategy": "plan_execute"``.

Before its first step such a run asks the model for a plan — a short list of steps, without
calling tools — records it (``Run.plans``, a ``plan.created`` event, a ``model_call`` span named
``plan`` with its audit records) and then runs the usual loop with the plan in the system
prompt, so each step follows it. When a step's tool call fails, the model is asked once to
revise the plan (``plan.revised``); later failures are handled by the loop as usual.

A plan is the model's text: it is bounded (``MAX_PLAN_STEPS`` steps of at most
``MAX_PLAN_STEP_CHARS`` characters, ``MAX_PLAN_CHARS`` in all; what is over is cut, and the plan
marked ``truncated``) because every later step's system prompt carries it, and it is stored
like the conversation: masked in ``Run.plans`` (what the admin shows), in clear only sealed
(``Run.sealed_plans``, which a resumed drive reads).
"""

from __future__ import annotations

import json
from typing import Any

import json_repair

from gateway.messages import Message
from gateway.services import complete
from harness.agent_registry import AgentSpec

PLAN_EXECUTE = "plan_execute"
MAX_REPLANS = 1
MAX_PLAN_STEPS = 12
MAX_PLAN_STEP_CHARS = 500
MAX_PLAN_CHARS = 4000
MAX_REASON_CHARS = 500

PLANNER_PROMPT = (
    "Before acting, write the plan you will follow to answer the user: a JSON array of short "
    "steps (strings), at most {max_steps}, in order, naming the tools you expect to use. "
    "Answer with the JSON array only; do not call tools yet.\n\nThe tools you may use: {tools}."
)
REPLANNER_PROMPT = (
    "A step of your plan failed: {failure}. Write a revised plan for what is left: a JSON "
    "array of short steps (strings), at most {max_steps}. Answer with the JSON array only."
)


def wants_plan(agent: AgentSpec, plans: list[dict[str, Any]]) -> bool:
    return agent.strategy == PLAN_EXECUTE and not plans


def may_replan(agent: AgentSpec, plans: list[dict[str, Any]]) -> bool:
    return agent.strategy == PLAN_EXECUTE and 0 < len(plans) <= MAX_REPLANS


def planning_messages(
    agent: AgentSpec,
    conversation: list[Message],
    tool_names: list[str],
    failure: str = "",
) -> list[Message]:
    """What the planner is sent: the agent's instructions, the conversation so far, and the
    request for a (revised) plan."""
    ask = (
        REPLANNER_PROMPT.format(failure=failure, max_steps=MAX_PLAN_STEPS)
        if failure
        else PLANNER_PROMPT.format(max_steps=MAX_PLAN_STEPS, tools=", ".join(tool_names) or "none")
    )
    return [
        Message(role="system", content=agent.system_prompt),
        *conversation,
        Message(role="user", content=ask),
    ]


def request_plan(
    agent: AgentSpec, messages: list[Message], turn: int
) -> tuple[Any, list[str], bool]:
    """Ask the agent's model for a plan; the response, its steps (empty when the model gave
    none usable: the run then goes on without one) and whether they were cut to the bounds.
    Raises ``gateway`` errors."""
    response = complete(agent.model or None, messages, [], turn=turn)
    steps, truncated = bounded(parse_plan(response.text))
    return response, steps, truncated


def bounded(steps: list[str]) -> tuple[list[str], bool]:
    """``steps`` within ``MAX_PLAN_STEPS``, ``MAX_PLAN_STEP_CHARS`` each and ``MAX_PLAN_CHARS``
    in all (a step cut short ends with "…"); and whether anything was cut."""
    kept: list[str] = []
    total = 0
    truncated = len(steps) > MAX_PLAN_STEPS
    for step in steps[:MAX_PLAN_STEPS]:
        room = min(MAX_PLAN_STEP_CHARS, MAX_PLAN_CHARS - total)
        if room <= 1:
            truncated = True
            break
        if len(step) > room:
            step, truncated = step[: room - 1] + "…", True
        kept.append(step)
        total += len(step)
    return kept, truncated


def bounded_reason(reason: str) -> str:
    """Why a plan was revised (a tool's error message), bounded like a step."""
    if len(reason) <= MAX_REASON_CHARS:
        return reason
    return reason[: MAX_REASON_CHARS - 1] + "…"


def parse_plan(text: str) -> list[str]:
    """The steps of a plan the model wrote: a JSON array (repaired where a library can), or
    else one step per non-empty line."""
    value: Any = None
    try:
        value = json.loads(text)
    except ValueError:
        value = json_repair.repair_json(text, return_objects=True, skip_json_loads=True)
    if isinstance(value, dict):
        value = value.get("steps") or value.get("plan")
    if isinstance(value, list):
        steps = [str(step).strip() for step in value if str(step).strip()]
    else:
        steps = [line.strip(" -*0123456789.").strip() for line in text.splitlines()]
        steps = [step for step in steps if step]
    return steps


def plan_instructions(plans: list[dict[str, Any]]) -> str:
    """The current plan, as the system prompt carries it."""
    if not plans or not plans[-1].get("steps"):
        return ""
    numbered = "\n".join(f"{n}. {step}" for n, step in enumerate(plans[-1]["steps"], 1))
    return f"\n\nFollow this plan, step by step, and say when a step cannot be done:\n{numbered}"
