"""Tenant limits shared by every process: new runs per second, concurrent runs, model calls
per minute (new runs are refused before running ones are slowed)."""

import os
import subprocess
import sys

from django.conf import settings

from harness.runs import execute_run
from policy.models import TenantLimits
from policy.services import tenant_limits
from tests.runs import call, scripted_agent, start
from tests.worker import database_url

# Distinct calls (search limits 1..n), so the repeated-call guard stays out of the way.
LOOKUPS = [call("search_tickets", limit=n + 1) for n in range(3)] + [{"text": "done"}]


def test_new_runs_beyond_the_tenants_rate_get_429_with_retry_after(acme, agent_dir):
    TenantLimits.objects.create(tenant="acme", runs_per_second=1)
    agent = scripted_agent(agent_dir, LOOKUPS)

    responses = [start(acme, agent, mode="async") for _ in range(5)]

    assert responses[0].status_code == 202
    refused = [r for r in responses if r.status_code == 429]
    assert refused, "five runs within a second, at most one per second allowed"
    error = refused[0].json()["error"]
    assert error["code"] == "rate_limited"
    assert error["details"]["limit"] == 1
    assert int(refused[0]["Retry-After"]) == 1


def test_concurrent_runs_are_limited_and_a_finished_run_frees_its_slot(acme, agent_dir):
    TenantLimits.objects.create(tenant="acme", max_concurrent_runs=1, runs_per_second=100)
    agent = scripted_agent(agent_dir, LOOKUPS)

    queued = start(acme, agent, mode="async")
    refused = start(acme, agent, mode="async")
    execute_run(queued.json()["id"])
    admitted = start(acme, agent, mode="async")

    assert queued.status_code == 202
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "too_many_concurrent_runs"
    assert refused["Retry-After"] == "1"
    assert admitted.status_code == 202


def test_new_runs_are_refused_before_running_ones_are_slowed(acme, agent_dir):
    TenantLimits.objects.create(tenant="acme", model_calls_per_minute=5)

    agent = scripted_agent(agent_dir, LOOKUPS)

    running = start(acme, agent).json()
    new = start(acme, agent)

    assert running["status"] == "succeeded"
    assert running["steps"] == 4  # four of the five model calls, none refused or delayed
    assert new.status_code == 429
    assert new.json()["error"]["code"] == "tenant_busy"
    assert 1 <= int(new["Retry-After"]) <= 60


def test_a_run_paced_past_its_wall_time_stops_as_deadline_exceeded(acme, agent_dir):
    TenantLimits.objects.create(tenant="acme", model_calls_per_minute=2)

    run = start(acme, scripted_agent(agent_dir, LOOKUPS, deadline_s=5)).json()

    assert run["status"] == "deadline_exceeded"
    assert run["steps"] == 2
    assert "limit of model calls per minute kept it waiting" in run["answer"]


ADMIT = """
import sys, uuid
import django
django.setup()
from policy.errors import TooManyConcurrentRuns
from policy.services import admit_run
admitted = 0
for _ in range(5):
    try:
        admit_run("acme", str(uuid.uuid4()))
        admitted += 1
    except TooManyConcurrentRuns:
        pass
print(admitted)
"""


def test_the_concurrency_limit_holds_across_processes(demo):
    TenantLimits.objects.create(tenant="acme", max_concurrent_runs=3, runs_per_second=100)
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "harness.settings.test",
        "DATABASE_URL": database_url(),
    }
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", ADMIT],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]

    admitted = [int(p.communicate(timeout=120)[0]) for p in processes]

    assert sum(admitted) == 3, admitted
    assert tenant_limits("acme").max_concurrent_runs == 3


def test_a_running_run_refreshes_its_concurrency_slot_now_and_then_not_per_model_call(
    acme, agent_dir, monkeypatch
):
    from policy import limits
    from policy import services as policy_services

    taken = []
    limiter = limits.get_limiter()
    acquire = limiter.acquire_slot

    def counted(key, member, *args, **kwargs):
        taken.append(member)
        return acquire(key, member, *args, **kwargs)

    monkeypatch.setattr(limiter, "acquire_slot", counted)
    agent = scripted_agent(agent_dir, LOOKUPS)

    run = start(acme, agent).json()  # admission takes the slot; the driver re-takes it once
    monkeypatch.setattr(policy_services, "SLOT_REFRESH_S", 0)
    again = start(acme, agent).json()  # refreshed at every model call when the interval is 0

    assert run["status"] == again["status"] == "succeeded"
    assert taken.count(run["id"]) == 2
    assert taken.count(again["id"]) == 2 + again["steps"]
