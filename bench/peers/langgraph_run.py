"""LangGraph ``create_react_agent`` checkpointed by ``PostgresSaver`` (sync), on the task of
``bench/support/setup.py``'s ``PEER_SCRIPT``: get a ticket, look two users up in one response,
assign the ticket, answer (4 model calls, 4 tool calls; a scripted model, pure-Python tools).

Runs in the peers' own venv (``bench/peers/.venv``), called by ``compare.py``; prints one JSON
line: per-run times and the per-step median (per run ÷ 4 model calls).

    bench/peers/.venv/bin/python bench/peers/langgraph_run.py --postgres URL [--runs 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
import warnings
from importlib.metadata import version
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.postgres import PostgresSaver

ANSWER = "Assigned ticket T-1 to U-2 (Bob Ops, on the ops team)."
# One entry per model call: the tool calls of that response, or the final answer.
SCRIPT: list[list[tuple[str, dict[str, Any]]] | str] = [
    [("get_ticket", {"ticket_id": "T-1"})],
    [("get_user", {"user_id": "U-1"}), ("get_user", {"user_id": "U-2"})],
    [("update_ticket", {"ticket_id": "T-1", "action": "assign", "assignee_id": "U-2"})],
    ANSWER,
]
MODEL_CALLS = len(SCRIPT)
CALLS = {"model": 0, "tool": 0}
USERS = {
    "U-1": {"id": "U-1", "name": "Alice Desk", "team": "frontline", "open_tickets": 12},
    "U-2": {"id": "U-2", "name": "Bob Ops", "team": "ops", "open_tickets": 3},
}


def get_ticket(ticket_id: str) -> dict:
    """Fetch a helpdesk ticket by its id."""
    CALLS["tool"] += 1
    return {"id": ticket_id, "title": "VPN drops every hour", "status": "open",
            "assignee_id": None, "team": "ops"}  # fmt: skip


def get_user(user_id: str) -> dict:
    """Fetch a user (a possible assignee) by its id."""
    CALLS["tool"] += 1
    return dict(USERS.get(user_id, {"id": user_id, "name": "unknown", "team": None}))


def update_ticket(ticket_id: str, action: str, assignee_id: str) -> dict:
    """Apply an action such as assign to a ticket."""
    CALLS["tool"] += 1
    return {"id": ticket_id, "action": action, "assignee_id": assignee_id, "status": "assigned"}


def responses():
    """The scripted model's answers, run after run: fresh messages with parsed arguments."""
    while True:
        for step, entry in enumerate(SCRIPT):
            CALLS["model"] += 1
            if isinstance(entry, str):
                yield AIMessage(content=entry)
                continue
            calls = [
                {"name": name, "args": dict(args), "id": f"call_{step}_{i}", "type": "tool_call"}
                for i, (name, args) in enumerate(entry)
            ]
            yield AIMessage(content="", tool_calls=calls)


class ScriptedModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self  # nothing to send the tool specs to


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", required=True, help="PostgreSQL URL for the checkpoints")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    prefix = uuid.uuid4().hex[:8]
    with PostgresSaver.from_conn_string(args.postgres) as saver:
        saver.setup()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated since LangGraph 1.0, still shipped
            from langgraph.prebuilt import create_react_agent

            graph = create_react_agent(
                ScriptedModel(messages=responses()),
                [get_ticket, get_user, update_ticket],
                prompt="You are a helpdesk agent. Use the tools.",
                checkpointer=saver,
            )
        samples = []
        for n in range(args.warmup + args.runs):
            config = {"configurable": {"thread_id": f"{prefix}-{n}"}}
            prompt = {"messages": [{"role": "user", "content": "Assign ticket T-1."}]}
            started = time.perf_counter()
            result = graph.invoke(prompt, config)
            elapsed = time.perf_counter() - started
            if result["messages"][-1].content != ANSWER:
                raise SystemExit(f"wrong answer: {result['messages'][-1].content!r}")
            if n >= args.warmup:
                samples.append(elapsed)
        checkpoints = saver.conn.execute(
            "SELECT count(*) AS n FROM checkpoints WHERE thread_id LIKE %s", (f"{prefix}-%",)
        ).fetchone()["n"]
    runs = args.warmup + args.runs
    expected = {"model": MODEL_CALLS * runs, "tool": 4 * runs}
    if expected != CALLS:
        raise SystemExit(f"expected {MODEL_CALLS * runs} model and {4 * runs} tool calls: {CALLS}")
    print(
        json.dumps(
            {
                "peer": "LangGraph create_react_agent + PostgresSaver (sync invoke)",
                "langgraph": version("langgraph"),
                "runs": args.runs,
                "per_run_ms": [round(s * 1e3, 3) for s in samples],
                "per_step_ms_median": statistics.median(samples) * 1e3 / MODEL_CALLS,
                "checkpoints_per_run": checkpoints / runs,
            }
        )
    )


if __name__ == "__main__":
    main()
