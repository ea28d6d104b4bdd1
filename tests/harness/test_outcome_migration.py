"""Migration 0007 gives the runs that existed before it the outcome their stored conversation
and honesty-guard spans show."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from harness.models import Run

BEFORE = [
    ("harness", "0006_run_rows_indexed_by_their_unique_keys"),
    ("traces", "0007_spans_and_audit_without_redundant_indexes"),
]


def migrate(targets):
    executor = MigrationExecutor(connection)
    if targets is None:  # back to the schema the other tests expect
        targets = executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def tool_result(name: str, code: str | None) -> dict:
    body = {"ok": True, "result": {}} if code is None else {"ok": False, "error": {"code": code}}
    return {
        "role": "tool",
        "name": name,
        "tool_call_id": f"call_{name}",
        "content": json.dumps(body),
        **({"is_error": True} if code else {}),
    }


@pytest.fixture
def old_runs(transactional_db):
    apps = migrate(BEFORE)
    Tenant = apps.get_model("harness", "Tenant")
    OldRun = apps.get_model("harness", "Run")
    RunMessage = apps.get_model("harness", "RunMessage")
    Span = apps.get_model("traces", "Span")
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    made = {}
    for n, name in enumerate(["appended", "whole", "guarded", "clean"]):
        made[name] = OldRun.objects.create(
            request_id=f"{n:032x}", tenant=tenant, agent="a", user_id="bob", input="x",
            max_steps=5, status="succeeded",
        )  # fmt: skip
    # A run whose conversation has rows of its own: refused twice, a tool failed.
    for index, message in enumerate(
        [
            tool_result("send_external_email", "policy_refused"),
            tool_result("get_customer", "permission_denied"),
            tool_result("update_ticket", "tool_failed"),
            tool_result("get_ticket", None),
        ]
    ):
        RunMessage.objects.create(run=made["appended"], index=index, data=message, sealed="")
    # A run checkpointed whole (before conversations had rows): a denial.
    made["whole"].messages = [tool_result("update_ticket", "approval_denied")]
    made["whole"].save()
    now = timezone.now()
    Span.objects.create(
        tenant="acme", request_id=made["guarded"].request_id, sequence=1, span_id="a" * 16,
        kind="policy_check", name="honesty guard", status="refused", started_at=now,
        ended_at=now, duration_ms=0, attributes={"check": "honesty"},
    )  # fmt: skip
    yield {name: run.id for name, run in made.items()}
    migrate(None)


def test_existing_runs_get_the_outcome_their_records_show(old_runs):
    migrate(None)

    outcomes = {
        name: (Run.objects.get(id=run_id).outcome, Run.objects.get(id=run_id).outcome_counts)
        for name, run_id in old_runs.items()
    }

    assert outcomes == {
        "appended": ("tool_failed", {"refused": 2, "tool_failed": 1}),
        "whole": ("denied", {"denied": 1}),
        "guarded": ("corrected", {"corrected": 1}),
        "clean": ("clean", {}),
    }
