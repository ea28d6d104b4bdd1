"""Shared by the experiment tests: three recorded demo runs, and candidate scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.forms.models import model_to_dict

from tests.runs import ADMIN, demo_run
from tools.demo.models import Notification, OutboxEmail, Ticket
from tools.models import ToolExecution

DEMO_SCRIPT = Path(__file__).resolve().parents[2] / "gateway" / "scripts" / "demo.json"
QUESTIONS = [
    "Why has ticket T-20250318-007 not been handled?",
    "A customer (phone 13812345678, e-mail zhang.wei@example.com, ID 11010519491231002X) "
    "asks where the parcel of ticket T-20250320-011 is.",
    "Close ticket T-20250399-999, the customer says it is solved.",
]
SEARCH_FIRST = {"tool_calls": [{"name": "search_tickets", "arguments": {"text": "refund"}}]}


def recorded_runs(client: Any) -> list[str]:
    runs = [demo_run(client, "bob", question) for question in QUESTIONS]
    assert [run["status"] for run in runs] == ["succeeded"] * 3
    return [run["id"] for run in runs]


def make_dataset(client: Any, runs: list[str], name: str = "demo-three") -> dict[str, Any]:
    response = client.post("/api/v1/datasets", {"name": name, "runs": runs}, **ADMIN)
    assert response.status_code == 201, response.content
    return response.json()


def demo_variant(folder: Path, change: Any) -> str:
    """The demo script with ``change(scenario)`` applied to each scenario; its route."""
    script = json.loads(DEMO_SCRIPT.read_text())
    for scenario in script["scenarios"]:
        change(scenario)
    path = folder / f"candidate-{len(list(folder.glob('candidate-*')))}.json"
    path.write_text(json.dumps(script))
    return f"scripted:{path}"


def desk() -> dict[str, Any]:
    """Everything the demo tools can change, to show nothing was."""
    return {
        "tickets": sorted(json.dumps(model_to_dict(t), default=str) for t in Ticket.objects.all()),
        "notifications": Notification.objects.count(),
        "outbox": OutboxEmail.objects.count(),
    }


def executions() -> int:
    return ToolExecution.objects.count()
