"""Finding M7 of the second review: ``plan_execute`` stored the model's plan in clear
(``Run.plans``, shown on the admin run page) and without a size cap (twelve steps of 400 KB was
stored, and sent again in every step's system prompt).

Plans are stored like the conversation: masked in ``Run.plans`` (what the admin shows), the clear
copy only sealed (``Run.sealed_plans``), which the model is shown; and bounded
(``harness.engine.planning``: ``MAX_PLAN_STEP_CHARS`` a step, ``MAX_PLAN_CHARS`` in all).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from harness.engine.planning import MAX_PLAN_CHARS, MAX_PLAN_STEP_CHARS, MAX_PLAN_STEPS
from harness.models import Run, RunEvent
from harness.runs import execute_run
from tests.factories import write_agent
from tests.fake_providers import FakeProvider, openai_completion
from tests.runs import TICKET, wait_until
from traces.services import unseal

PHONE, EMAIL = "13812345678", "zhang.wei@example.com"
PLAN = [f"Call the customer on {PHONE}", f"Write to {EMAIL}", "Tell the user"]


@pytest.fixture
def served_model(settings: Any):
    server = FakeProvider("openai")
    settings.OPENAI_BASE_URL = server.url
    settings.OPENAI_API_KEY = "sk-test-openai"
    settings.HARNESS_ROUTES = {"openai:model-test": {"stream": False, "retries": 0}}
    yield server
    server.close()


def planned_run(acme, agent_dir: Path, served_model, plan: list[str]) -> dict[str, Any]:
    served_model.queue(openai_completion(json.dumps(plan)), openai_completion("Done."))
    agent = write_agent(
        agent_dir, model="openai:model-test", strategy="plan_execute", tools=["get_ticket"]
    )["name"]
    response = acme.post("/api/v1/runs", {"agent": agent, "user": "bob", "input": "go"})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "succeeded"
    return response.json()


def system_prompt_of(request) -> str:
    return request.body["messages"][0]["content"]


def test_a_plan_is_stored_masked_and_its_clear_copy_sealed(acme, agent_dir, served_model):
    body = planned_run(acme, agent_dir, served_model, PLAN)

    run = Run.objects.get(id=body["id"])
    stored = json.dumps(run.plans, ensure_ascii=False)
    assert PHONE not in stored
    assert EMAIL not in stored
    assert "138****5678" in stored
    assert unseal(run.sealed_plans) == [{"steps": PLAN, "reason": "first plan"}]
    assert PHONE not in run.sealed_plans
    # The model follows the plan it wrote, in clear (as it works on the clear conversation).
    assert f"1. Call the customer on {PHONE}" in system_prompt_of(served_model.requests[1])
    # The event says the same as the stored plan.
    [event] = RunEvent.objects.filter(run_id=run.id, type="plan.created")
    assert event.data == run.plans[0]


def test_the_admin_run_page_shows_the_masked_plan(acme, agent_dir, served_model):
    body = planned_run(acme, agent_dir, served_model, PLAN)
    operator = Client()
    operator.force_login(get_user_model().objects.get(username="admin"))

    page = operator.get(f"/admin/harness/run/{body['id']}/change/").content.decode()

    assert "138****5678" in page
    assert PHONE not in page
    assert EMAIL not in page
    assert "sealed_plans" not in page


def test_a_plan_over_the_bounds_is_cut_and_so_is_every_prompt_that_carries_it(
    acme, agent_dir, served_model
):
    huge = ["x" * 400_000 for _ in range(MAX_PLAN_STEPS + 3)]

    body = planned_run(acme, agent_dir, served_model, huge)

    run = Run.objects.get(id=body["id"])
    [plan] = unseal(run.sealed_plans)
    assert plan["truncated"] is True
    assert len(plan["steps"]) <= MAX_PLAN_STEPS
    assert all(len(step) <= MAX_PLAN_STEP_CHARS for step in plan["steps"])
    assert sum(len(step) for step in plan["steps"]) <= MAX_PLAN_CHARS
    assert len(json.dumps(run.plans)) < 2 * MAX_PLAN_CHARS
    prompt = system_prompt_of(served_model.requests[1])
    assert MAX_PLAN_CHARS / 2 < len(prompt) < 2 * MAX_PLAN_CHARS
    [event] = RunEvent.objects.filter(run_id=run.id, type="plan.created")
    assert event.data["truncated"] is True


def test_a_resumed_run_follows_the_clear_plan_from_its_sealed_copy(acme, agent_dir, served_model):
    escalation = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "waited 30 days"}
    served_model.queue(
        openai_completion(json.dumps(PLAN)),
        openai_completion(calls=[("call_e", "update_ticket", json.dumps(escalation))]),
        openai_completion("Escalated."),
    )
    agent = write_agent(
        agent_dir, model="openai:model-test", strategy="plan_execute", tools=["update_ticket"]
    )["name"]
    response = acme.post("/api/v1/runs", {"agent": agent, "user": "bob", "input": "go"})
    assert response.status_code == 202, response.content  # held for approval
    run = response.json()
    [approval] = acme.get(run["links"]["approvals"]).json()
    decided = acme.post(
        f"/api/v1/runs/{run['id']}/approvals/{approval['call_id']}",
        {"decision": "approve", "arguments_sha256": approval["arguments_sha256"]},
        **{"X-Harness-User": "alice"},
    )
    assert decided.status_code == 200, decided.content
    wait_until(lambda: Run.objects.get(id=run["id"]).status == "queued")

    finished = execute_run(run["id"])  # another drive: it reads the plan from the run

    assert finished.status == "succeeded", finished.status_detail
    assert len(served_model.requests) == 3
    assert f"1. Call the customer on {PHONE}" in system_prompt_of(served_model.requests[2])


def test_plans_stored_in_clear_before_are_sealed_and_masked_by_the_migration(
    acme, agent_dir, served_model
):
    from importlib import import_module

    from django.apps import apps

    body = planned_run(acme, agent_dir, served_model, PLAN)
    clear = [{"steps": PLAN, "reason": "first plan"}]
    Run.objects.filter(id=body["id"]).update(plans=clear, sealed_plans="")  # as stored before
    migration = import_module("harness.migrations.0008_run_sealed_plans")

    migration.seal_and_mask_plans(apps, None)
    migration.seal_and_mask_plans(apps, None)  # again: nothing changes

    run = Run.objects.get(id=body["id"])
    assert unseal(run.sealed_plans) == clear
    assert PHONE not in json.dumps(run.plans)
    assert "138****5678" in json.dumps(run.plans, ensure_ascii=False)
