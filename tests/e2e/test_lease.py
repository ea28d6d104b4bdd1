"""A tool slower than the run's lease: the heartbeat keeps the lease, so no second driver
takes the run over while the first is in the call; and when the first driver is killed in
the call, the one that takes over does not run a non-idempotent call again."""

import time

import pytest

from harness.models import Run
from tests.factories import write_agent, write_script
from tests.runs import wait_until
from tools.demo.models import Notification

pytestmark = pytest.mark.worker

LEASE = {"HARNESS_RUN_LEASE_S": "2", "HARNESS_SWEEP_INTERVAL_S": "1"}
SLOW_CALL = {"tool_calls": [{"name": "slow_effect", "arguments": {"seconds": 6, "message": "x"}}]}


@pytest.fixture
def slow_agent(tmp_path, settings):
    agents = tmp_path / "lease-agents"
    agents.mkdir()
    script = write_script(tmp_path, [SLOW_CALL, {"text": "The slow action is done."}])
    name = write_agent(agents, model=f"scripted:{script}", tools=["slow_effect"])["name"]
    settings.HARNESS_AGENT_DIRS = [*settings.HARNESS_AGENT_DIRS, agents]
    return name, LEASE | {"HARNESS_AGENT_DIRS": str(agents)}


def start_run(client, agent):
    body = {"agent": agent, "user": "bob", "input": "go", "mode": "async"}
    return client.post("/api/v1/runs", body).json()


def test_a_tool_slower_than_the_lease_acts_once_and_the_run_is_not_taken_over(
    acme, start_worker, slow_agent
):
    name, env = slow_agent
    start_worker(beat=True, env=env)
    start_worker(env=env)  # a second worker, ready to take over a run whose lease ran out

    run = start_run(acme, name)
    wait_until(lambda: Run.objects.get(id=run["id"]).is_terminal, timeout_s=90)
    time.sleep(3)  # time for a stale driver, if there were one, to write

    finished = Run.objects.get(id=run["id"])
    assert finished.status == "succeeded", finished.status_detail
    assert finished.answer == "The slow action is done."
    assert Notification.objects.filter(message="x").count() == 1
    assert finished.lease_token == 1  # claimed once: never taken over


def test_a_driver_killed_inside_a_non_idempotent_call_is_not_repeated(
    acme, start_worker, slow_agent
):
    name, env = slow_agent
    first = start_worker(env=env)
    run = start_run(acme, name)
    wait_until(lambda: Notification.objects.filter(message="x").exists(), timeout_s=90)
    first.kill_hard()
    start_worker(beat=True, env=env)
    wait_until(lambda: Run.objects.get(id=run["id"]).is_terminal, timeout_s=90)
    time.sleep(1)

    finished = Run.objects.get(id=run["id"])
    assert finished.status == "succeeded", finished.status_detail
    assert Notification.objects.filter(message="x").count() == 1  # acted once, never again
    [result] = [m for m in finished.messages if m["role"] == "tool"]
    assert '"outcome_unknown"' in result["content"]
    # The honesty guard sees the unknown outcome: the answer does not claim success.
    assert "slow_effect" in finished.answer
    assert finished.lease_token == 2
