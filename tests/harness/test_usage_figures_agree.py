"""The figures of a run and of its budget agree: a run held for approval reports the tokens,
route and cost of every model call so far (the call that proposed the held call included), and
the tenant's day counts the model calls whose tokens it counts."""

from __future__ import annotations

from decimal import Decimal

from harness.models import Run
from tests.runs import TICKET, call, scripted_agent, start
from traces.models import Span

ADMIN = {"X-Harness-User": "alice"}  # a tenant admin: reads the policy budget
ESCALATION = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "charged twice"}


def held_run(acme, agent_dir) -> Run:
    agent = scripted_agent(
        agent_dir, [call("get_ticket", ticket_id=TICKET), call("update_ticket", **ESCALATION)]
    )
    response = start(acme, agent, user="bob", input="Escalate T-20250318-007")
    assert response.status_code == 202, response.content
    run = Run.objects.get(id=response.json()["id"])
    assert run.status == "awaiting_approval"
    return run


def test_a_held_run_reports_what_its_budget_was_charged(acme, agent_dir):
    run = held_run(acme, agent_dir)

    body = acme.get(f"/api/v1/runs/{run.id}").json()

    calls = Span.objects.filter(request_id=run.request_id, kind="model_call")
    tokens = sum(s.attributes["prompt_tokens"] + s.attributes["completion_tokens"] for s in calls)
    cost = sum(Decimal(str(s.attributes["cost_usd"])) for s in calls)
    usage, budget = body["usage"], body["usage"]["budget"]
    assert calls.count() == 2
    assert usage["total_tokens"] == budget["tokens_used"] == tokens
    assert budget["model_calls"] == 2
    assert body["model_route"].startswith("scripted:")
    assert Run.objects.get(id=run.id).cost_usd == cost > 0
    # The budget keeps whole micro-dollars: each call's cost rounded to one.
    assert abs(Decimal(str(budget["cost_usd"])) - cost) <= Decimal("0.000001") * 2


def test_the_tenants_day_counts_the_model_calls_behind_its_tokens(acme, agent_dir):
    held = held_run(acme, agent_dir)
    finished = acme.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "Why T-20250318-007?"}
    ).json()

    day = acme.get("/api/v1/policies/budget", **ADMIN).json()["today"]

    runs = [acme.get(f"/api/v1/runs/{r}").json()["usage"] for r in (held.id, finished["id"])]
    assert day["model_calls"] == sum(u["budget"]["model_calls"] for u in runs) > 0
    assert day["tokens_used"] == sum(u["budget"]["tokens_used"] for u in runs)
