"""Pure-Python tool handlers for the engine benchmarks: no database, no network.

``lookup`` stamps the time of each call, so a benchmark can time every step of a run from
the outside (one tool call per step: the interval between two calls is one step's cost).
The ``peer_*`` tools return the same small dicts as the peer benchmark's task (a ticket,
two users, an assignment), so Harness and its peers run the same work.
"""

from __future__ import annotations

import time
from typing import Any

# perf_counter() of each ``lookup`` call in this process, in call order.
TICKS: list[float] = []

_USERS = {
    "U-1": {"id": "U-1", "name": "Alice Desk", "team": "frontline", "open_tickets": 12},
    "U-2": {"id": "U-2", "name": "Bob Ops", "team": "ops", "open_tickets": 3},
}


def lookup(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    TICKS.append(time.perf_counter())
    return {"n": arguments.get("n", 0), "found": True}


def peer_get_ticket(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    return {
        "id": arguments["ticket_id"],
        "title": "VPN drops every hour",
        "status": "open",
        "assignee_id": None,
        "team": "ops",
    }


def peer_get_user(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    user_id = arguments["user_id"]
    unknown = {"id": user_id, "name": "unknown", "team": None, "open_tickets": 0}
    return dict(_USERS.get(user_id, unknown))


def peer_update_ticket(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    return {
        "id": arguments["ticket_id"],
        "action": arguments["action"],
        "assignee_id": arguments["assignee_id"],
        "status": "assigned",
    }
