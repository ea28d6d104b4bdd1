"""A worker SIGKILLed mid-run: another worker finishes the run, each side effect once."""

from collections import Counter

import pytest

from harness.models import Run
from tests.factories import write_agent, write_script
from tests.runs import wait_until
from tools.demo.models import Notification, Ticket

pytestmark = pytest.mark.worker

LEASE = {"HARNESS_RUN_LEASE_S": "2", "HARNESS_SWEEP_INTERVAL_S": "1"}


def test_a_run_survives_its_worker_being_killed(acme, start_worker, settings, tmp_path):
    agents = tmp_path / "crash-agents"
    agents.mkdir()
    script = write_script(
        tmp_path,
        [
            {
                "tool_calls": [
                    {
                        "name": "update_ticket",
                        "arguments": {
                            "ticket_id": "T-20250318-007",
                            "action": "assign",
                            "assignee_id": "agent-li",
                        },
                    }
                ]
            },
            {
                "tool_calls": [
                    {"name": "slow_note", "arguments": {"seconds": 1.5, "message": "one"}}
                ]
            },
            {
                "tool_calls": [
                    {"name": "slow_note", "arguments": {"seconds": 1.5, "message": "two"}}
                ]
            },
            {
                "tool_calls": [
                    {"name": "slow_note", "arguments": {"seconds": 1.5, "message": "three"}}
                ]
            },
            {"text": "Assigned and noted three times."},
        ],
    )
    name = write_agent(agents, model=f"scripted:{script}", tools=["update_ticket", "slow_note"])[
        "name"
    ]
    settings.HARNESS_AGENT_DIRS = [*settings.HARNESS_AGENT_DIRS, agents]
    worker_env = LEASE | {"HARNESS_AGENT_DIRS": str(agents)}
    first = start_worker(env=worker_env)

    run = acme.post(
        "/api/v1/runs", {"agent": name, "user": "bob", "input": "go", "mode": "async"}
    ).json()
    wait_until(lambda: Notification.objects.filter(message="one").exists(), timeout_s=90)
    first.kill_hard()
    interrupted = Run.objects.get(id=run["id"])
    assert interrupted.status == "running"
    start_worker(beat=True, env=worker_env)
    wait_until(lambda: Run.objects.get(id=run["id"]).is_terminal, timeout_s=90)

    finished = Run.objects.get(id=run["id"])
    assert finished.status == "succeeded", finished.status_detail
    assert finished.answer == "Assigned and noted three times."
    assert sorted(Notification.objects.values_list("message", flat=True)) == ["one", "three", "two"]
    assert Ticket.objects.get(ticket_id="T-20250318-007").assignee_id == "agent-li"
    results = Counter(m["tool_call_id"] for m in finished.messages if m["role"] == "tool")
    assert set(results.values()) == {1}  # one result per call: no duplicated messages
    assistant_turns = [m for m in finished.messages if m["role"] == "assistant"]
    assert len(assistant_turns) == 5
