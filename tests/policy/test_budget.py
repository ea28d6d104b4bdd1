"""The budget ledger: per-run and per-tenant-day tokens, cost, tool calls and wall time."""

from harness.models import Run, RunEvent, Tenant, WebhookDelivery
from harness.runs import execute_run as resume_run
from harness.webhooks import deliver
from policy.models import BudgetAlert, BudgetLedger, TenantLimits, ToolApproval
from tests.e2e.test_webhooks import Receiver
from tests.runs import TICKET, call, scripted_agent, start, tool_results

# Distinct calls (search limits 1..n), so the repeated-call guard stays out of the way.
LOOKUPS = [call("search_tickets", limit=n + 1) for n in range(12)] + [{"text": "done"}]


def test_a_run_that_spends_its_token_budget_ends_as_budget_exceeded_saying_so(acme, agent_dir):
    response = start(acme, scripted_agent(agent_dir, LOOKUPS, max_tokens_per_run=3000))

    assert response.status_code == 200
    run = response.json()
    assert run["status"] == "budget_exceeded"
    assert run["answer"].startswith("The run stopped before finishing. The run has used its token")
    assert "of 3000 tokens spent" in run["answer"]
    budget = run["usage"]["budget"]
    assert budget["tokens_limit"] == 3000
    assert budget["tokens_used"] == run["usage"]["total_tokens"] <= 3000
    assert budget["tokens_reserved"] == 0
    assert budget["model_calls"] == run["steps"] >= 2


def test_a_request_may_lower_the_agents_token_budget(acme, agent_dir):
    agent = scripted_agent(agent_dir, LOOKUPS, max_tokens_per_run=100_000)

    run = start(acme, agent, budget={"max_tokens": 2500}).json()

    assert run["status"] == "budget_exceeded"
    assert run["usage"]["budget"]["tokens_limit"] == 2500


def test_a_request_may_raise_it_up_to_the_tenant_maximum_and_no_further(acme, agent_dir):
    TenantLimits.objects.create(tenant="acme", max_tokens_per_run=5000)
    agent = scripted_agent(agent_dir, LOOKUPS, max_tokens_per_run=3000)

    raised = start(acme, agent, budget={"max_tokens": 5000})
    too_high = start(acme, agent, budget={"max_tokens": 5001})

    assert raised.json()["usage"]["budget"]["tokens_limit"] == 5000
    assert too_high.status_code == 400
    assert too_high.json()["error"]["code"] == "budget_above_maximum"
    assert too_high.json()["error"]["details"]["maximum"] == 5000
    assert Run.objects.count() == 1


def test_an_agent_budget_above_the_tenant_maximum_is_capped(acme, agent_dir):
    TenantLimits.objects.create(tenant="acme", max_tokens_per_run=2000)

    run = start(acme, scripted_agent(agent_dir, LOOKUPS, max_tokens_per_run=50_000)).json()

    assert run["usage"]["budget"]["tokens_limit"] == 2000
    assert run["status"] == "budget_exceeded"


def test_the_tenants_daily_budget_stops_runs_and_refuses_new_ones(acme, agent_dir):
    TenantLimits.objects.create(tenant="acme", daily_tokens=4000)
    agent = scripted_agent(agent_dir, LOOKUPS)

    first = start(acme, agent).json()
    day = BudgetLedger.objects.get(key__startswith="tenant:acme:")
    tokens_after_first_run = day.tokens_used
    # What is left cannot pay for one answer's reserve: new runs are turned away.
    BudgetLedger.objects.filter(pk=day.pk).update(tokens_used=4000 - 1000)
    refused = start(acme, agent)

    assert first["status"] == "budget_exceeded"
    assert "Tenant acme has used its daily token budget" in first["answer"]
    assert tokens_after_first_run == first["usage"]["total_tokens"] <= 4000
    assert day.tokens_reserved == 0
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "tenant_budget_exhausted"
    assert int(refused["Retry-After"]) >= 1


def test_a_cost_budget_stops_the_run_by_the_route_price(acme, agent_dir, settings):
    agent = scripted_agent(agent_dir, LOOKUPS, max_cost_per_run_usd=3.0)
    route = f"scripted:{next(agent_dir.parent.glob('script-*.json'))}"
    # The gateway's route table prices the call: 0.001 USD a token.
    settings.HARNESS_ROUTES = {route: {"price": {"input": 1000.0, "output": 1000.0}}}

    run = start(acme, agent).json()

    assert run["status"] == "budget_exceeded"
    assert "cost budget" in run["answer"]
    budget = run["usage"]["budget"]
    assert budget["cost_limit_usd"] == 3.0
    assert budget["cost_usd"] == run["usage"]["total_tokens"] / 1000 <= 3.0


def test_tool_calls_are_limited_per_run_and_per_tool(acme, agent_dir):
    responses = [
        call("get_ticket", ticket_id=TICKET),
        call("get_ticket", ticket_id=TICKET),
        call("search_tickets", status="open"),
        call("notify_user", user_id="agent-li", message="hi"),
        {"text": "done"},
    ]
    agent = scripted_agent(agent_dir, responses, max_tool_calls_per_run=2, max_calls_per_tool=1)

    run = start(acme, agent).json()

    first, again, search, notify = tool_results(run["id"])
    assert first["ok"] is True
    assert again["error"]["code"] == "limit_exceeded"
    assert again["error"]["details"]["limit"] == "max_calls_per_tool"
    assert search["ok"] is True
    assert notify["error"]["code"] == "limit_exceeded"
    assert notify["error"]["details"]["limit"] == "max_tool_calls_per_run"
    assert run["usage"]["budget"]["tool_calls"] == 2


def test_a_run_past_its_wall_time_ends_as_deadline_exceeded(acme, agent_dir):
    escalate = call("update_ticket", ticket_id=TICKET, action="escalate", escalate_reason="x")
    agent = scripted_agent(agent_dir, [escalate, {"text": "done"}], deadline_s=30)
    run = start(acme, agent).json()
    assert run["status"] == "awaiting_approval"
    # Its driven time so far plus this much reaches the limit; waiting for approval is free.
    BudgetLedger.objects.filter(key=f"run:{run['id']}").update(wall_time_ms=30_000)
    approval = ToolApproval.objects.get()
    acme.post(
        f"/api/v1/runs/{run['id']}/approvals/{approval.call_id}",
        {"decision": "approve", "arguments_sha256": approval.arguments_sha256},
        **{"X-Harness-User": "admin"},  # four eyes: not the run's own user
    )

    finished = resume_run(run["id"])

    assert finished.status == "deadline_exceeded"
    assert "wall-time limit of 30 s" in finished.answer


def test_a_run_with_its_own_budget_reserves_it_from_the_day_at_admission(acme, agent_dir):
    TenantLimits.objects.create(tenant="acme", daily_tokens=7000)
    agent = scripted_agent(agent_dir, LOOKUPS, max_tokens_per_run=2500)

    first = start(acme, agent, mode="async")
    second = start(acme, agent, mode="async")
    third = start(acme, agent, mode="async")  # 5,000 of 7,000 are held by runs not yet done

    assert (first.status_code, second.status_code) == (202, 202)
    assert third.status_code == 429
    assert third.json()["error"]["code"] == "tenant_budget_exhausted"
    assert "cannot cover this run's budget" in third.json()["error"]["message"]
    assert int(third["Retry-After"]) >= 1
    day = BudgetLedger.objects.get(key__startswith="tenant:acme:")
    assert day.tokens_reserved == 5000
    assert Run.objects.count() == 2


def test_a_finished_run_gives_back_what_it_did_not_use(acme, agent_dir):
    TenantLimits.objects.create(tenant="acme", daily_tokens=6000)
    agent = scripted_agent(agent_dir, [call("search_tickets", limit=1), {"text": "done"}])
    slow = scripted_agent(agent_dir, LOOKUPS, max_tokens_per_run=2500)
    quick = scripted_agent(agent_dir, [{"text": "ok"}], max_tokens_per_run=2500)
    held = start(acme, slow, mode="async")
    cancelled = acme.post(f"/api/v1/runs/{held.json()['id']}/cancel", {})

    run = start(acme, agent).json()
    sized = start(acme, quick)

    assert cancelled.status_code == 200
    assert run["status"] == "succeeded"
    assert sized.json()["status"] == "succeeded"
    day = BudgetLedger.objects.get(key__startswith="tenant:acme:")
    assert day.tokens_reserved == 0
    assert day.tokens_used == run["usage"]["total_tokens"] + sized.json()["usage"]["total_tokens"]


def budget_events(run_id):
    return [e.data for e in RunEvent.objects.filter(run_id=run_id, type="budget.threshold")]


def test_a_runs_budget_thresholds_are_announced_once_each(acme, agent_dir):
    # Each model call of this run costs ~740 tokens: 25 % of its budget, then 50 %.
    TenantLimits.objects.create(tenant="acme", alert_thresholds=[20, 40])
    agent = scripted_agent(agent_dir, LOOKUPS, max_tokens_per_run=3000)

    run = start(acme, agent, callback_url="http://127.0.0.1:9/hooks").json()

    events = budget_events(run["id"])
    assert [(e["measure"], e["threshold"]) for e in events] == [("tokens", 20), ("tokens", 40)]
    assert events[0]["period"] == f"run:{run['id']}"
    assert events[0]["limit"] == 3000
    assert events[1]["used"] >= 1200
    deliveries = WebhookDelivery.objects.filter(run_id=run["id"], event_type="budget.threshold")
    assert [d.payload["data"]["threshold"] for d in deliveries.order_by("created_at")] == [20, 40]
    assert BudgetAlert.objects.filter(period=f"run:{run['id']}").count() == 2


def test_a_runs_cost_thresholds_are_announced_in_micro_usd(acme, agent_dir, settings):
    TenantLimits.objects.create(tenant="acme", alert_thresholds=[20, 40])
    agent = scripted_agent(agent_dir, LOOKUPS, max_cost_per_run_usd=3.0)
    route = f"scripted:{next(agent_dir.parent.glob('script-*.json'))}"
    # 0.001 USD a token: each model call (~740 tokens) is a quarter of the budget.
    settings.HARNESS_ROUTES = {route: {"price": {"input": 1000.0, "output": 1000.0}}}

    run = start(acme, agent, callback_url="http://127.0.0.1:9/hooks").json()

    costs = [e for e in budget_events(run["id"]) if e["measure"] == "cost"]
    assert [e["threshold"] for e in costs] == [20, 40]
    assert {e["limit"] for e in costs} == {3_000_000}
    assert costs[0]["used"] >= 600_000
    deliveries = WebhookDelivery.objects.filter(run_id=run["id"], event_type="budget.threshold")
    assert sorted(
        d.payload["data"]["threshold"] for d in deliveries if d.payload["data"]["measure"] == "cost"
    ) == [20, 40]


def test_the_days_threshold_is_announced_by_the_first_run_to_cross_it_and_never_again(
    acme, agent_dir
):
    TenantLimits.objects.create(
        tenant="acme",
        daily_tokens=40_000,
        alert_thresholds=[1],
        alert_url="http://127.0.0.1:9/budget-alerts",
    )
    agent = scripted_agent(agent_dir, [call("search_tickets", limit=1), {"text": "done"}])

    first = start(acme, agent).json()
    second = start(acme, agent).json()

    [event] = budget_events(first["id"])
    assert (event["measure"], event["threshold"]) == ("tokens", 1)
    assert event["period"].startswith("day:")
    assert budget_events(second["id"]) == []
    [delivery] = WebhookDelivery.objects.filter(event_type="budget.threshold")
    assert delivery.url == "http://127.0.0.1:9/budget-alerts"
    assert delivery.payload["data"]["limit"] == 40_000


def test_the_days_alert_reaches_the_tenants_alert_url_signed_once(acme, agent_dir, settings):
    settings.HARNESS_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    receiver = Receiver(Tenant.objects.get(slug="acme").webhook_secret)
    TenantLimits.objects.create(
        tenant="acme", daily_tokens=40_000, alert_thresholds=[1], alert_url=receiver.url
    )
    agent = scripted_agent(agent_dir, [call("search_tickets", limit=1), {"text": "done"}])
    try:
        for _ in range(2):
            start(acme, agent)
            for delivery in WebhookDelivery.objects.filter(event_type="budget.threshold"):
                deliver(delivery.id)  # what the worker's delivery task does
    finally:
        receiver.close()

    [alert] = receiver.received  # verified against the tenant's webhook secret
    assert alert["payload"]["type"] == "budget.threshold"
    assert (alert["payload"]["data"]["threshold"], alert["payload"]["data"]["limit"]) == (1, 40_000)
