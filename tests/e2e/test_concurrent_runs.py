"""Many runs of one tenant at once on two workers: they share the tenant's audit chain, budget
ledger and limits, and every one of them must finish (a grouped-transaction design once
deadlocked on the audit chain's head row here)."""

import time

import pytest

from harness.models import Run
from policy.models import TenantLimits

pytestmark = pytest.mark.worker

RUNS = 24


def test_concurrent_runs_of_one_tenant_all_succeed(acme, start_worker):
    TenantLimits.objects.create(tenant="acme", runs_per_second=1000, max_concurrent_runs=1000)
    start_worker()
    start_worker()
    ids = [
        acme.post(
            "/api/v1/runs",
            {
                "agent": "ticket-assistant",
                "user": "bob",
                "input": f"Why has ticket T-20250318-007 not been handled? ({n})",
                "mode": "async",
            },
        ).json()["id"]
        for n in range(RUNS)
    ]

    deadline = time.monotonic() + 120
    while Run.objects.filter(id__in=ids, finished_at__isnull=False).count() < RUNS:
        assert time.monotonic() < deadline, "runs did not finish in time"
        time.sleep(0.2)

    statuses = list(Run.objects.filter(id__in=ids).values_list("status", "stop_reason"))
    assert statuses == [("succeeded", "final_answer")] * RUNS
