"""Twenty concurrent runs in four processes against one tenant's daily budget."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db.models import Sum

from harness.models import Run
from policy.models import BudgetLedger, TenantLimits
from tests.runs import call, scripted_agent
from tests.worker import database_url
from traces.models import Span

pytestmark = pytest.mark.skipif(
    "postgresql" not in settings.DATABASES["default"]["ENGINE"],
    reason="needs PostgreSQL: the point is row locks under concurrent writers, and SQLite "
    "serialises every writer of the file (the embedded tier runs the same code single-file)",
)

PROCESSES, THREADS = 4, 5
# Small answer reserves, so that a reservation is close to what a call really uses: an
# over-granted reservation then shows up as tokens really spent past the limit.
COMPLETION_RESERVE = 64
DAILY_TOKENS = 6_000  # fewer than twenty first calls fit: they contend at once

RUNNER = """
import sys, threading
import django
django.setup()
from django.db import connections
from harness.models import Tenant
from harness.runs import RunRequest, start_run

agent, threads = sys.argv[1], int(sys.argv[2])
barrier = threading.Barrier(threads)
statuses = []

def one():
    tenant = Tenant.objects.get(slug="acme")
    barrier.wait()
    run, _ = start_run(tenant, RunRequest(agent=agent, user_id="bob", input="go"))
    statuses.append(run.status)
    connections.close_all()

workers = [threading.Thread(target=one) for _ in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
print(",".join(statuses))
"""


@pytest.fixture
def looping_agent(agent_dir, monkeypatch):
    monkeypatch.setenv("HARNESS_AGENT_DIRS", str(agent_dir))
    # Distinct calls, so that a run the budget lets go on is never stopped as repeating itself.
    responses = [call("search_tickets", limit=n + 1) for n in range(30)] + [{"text": "done"}]
    return scripted_agent(agent_dir, responses, max_steps=40)


def test_concurrent_runs_never_spend_past_the_tenants_daily_budget(demo, looping_agent):
    TenantLimits.objects.create(tenant="acme", daily_tokens=DAILY_TOKENS, runs_per_second=100)
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "harness.settings.test",
        "DATABASE_URL": database_url(),
        "HARNESS_COMPLETION_RESERVE_TOKENS": str(COMPLETION_RESERVE),
        # Per-call reservations (no estimate held at admission): what this test is about.
        "HARNESS_DEFAULT_RUN_RESERVE_TOKENS": "0",
    }
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", RUNNER, looping_agent, str(THREADS)],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]

    statuses = [s for p in processes for s in p.communicate(timeout=600)[0].strip().split(",")]

    assert len(statuses) == PROCESSES * THREADS
    assert set(statuses) <= {"budget_exceeded", "succeeded"}
    assert "budget_exceeded" in statuses
    day = BudgetLedger.objects.get(key__startswith="tenant:acme:")
    runs = Run.objects.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    assert day.tokens_reserved == 0
    assert day.tokens_used == runs["p"] + runs["c"]
    # Never past the limit, and stopped only when what was left could not pay for a call.
    largest_prompt = max(
        s.attributes["prompt_tokens"] for s in Span.objects.filter(kind="model_call")
    )
    largest_reservation = largest_prompt + COMPLETION_RESERVE
    assert DAILY_TOKENS - largest_reservation < day.tokens_used <= DAILY_TOKENS
    print(f"spent {day.tokens_used} of {DAILY_TOKENS} in {day.model_calls} model calls")
