"""Cost reports: tokens and cost of runs per tenant, agent, user and day, in the API and the
admin. Costs are what the gateway's route table priced each model call at."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from harness.models import Run
from harness.reports import CostFilter, cost_report
from tests.fake_providers import openai_completion, openai_usage
from tests.harness.test_admin_console import staff_client
from traces.models import Span

# USD per million tokens: a run of the demo costs a few thousandths of a cent.
PRICE = {"input": 1.0, "output": 2.0}
QUESTION = "Why T-20250318-007?"


@pytest.fixture
def priced(settings) -> None:
    settings.HARNESS_ROUTES = {"scripted:demo": {"price": PRICE}}


def ask(client, user: str) -> Run:
    response = client.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": user, "input": QUESTION}
    )
    return Run.objects.get(id=response.json()["id"])


def move_to_day(run: Run, days_ago: int) -> None:
    Run.objects.filter(id=run.id).update(created_at=timezone.now() - timedelta(days=days_ago))


def test_a_runs_cost_is_the_sum_of_its_priced_model_calls(acme, priced):
    run = ask(acme, "bob")

    calls = Span.objects.filter(request_id=run.request_id, kind="model_call")
    span_costs = sum(Decimal(str(s.attributes["cost_usd"])) for s in calls)
    expected = Decimal(run.prompt_tokens * 1 + run.completion_tokens * 2) / 1_000_000
    assert run.cost_usd > 0
    assert run.cost_usd == span_costs == expected


def test_runs_on_an_unpriced_route_count_their_calls_without_a_price(acme, unpriced):
    unpriced.queue(openai_completion("It waits for a part.", usage=openai_usage(300, 20)))

    run = ask(acme, "bob")

    assert run.total_tokens == 320
    assert run.cost_usd == 0
    assert run.unpriced_calls == 1
    body = acme.get("/api/v1/reports/costs?group_by=model").json()
    assert body["rows"] == [
        {
            "model": "scripted:demo",
            "runs": 1,
            "prompt_tokens": 300,
            "completion_tokens": 20,
            "total_tokens": 320,
            "cost_usd": 0.0,
            "unpriced_calls": 1,
        }
    ]


def test_the_demo_model_is_priced_at_the_demo_price(acme):
    run = ask(acme, "bob")

    expected = (Decimal(run.prompt_tokens) * 3 + Decimal(run.completion_tokens) * 15) / 10**6
    assert run.cost_usd == expected > 0
    assert run.unpriced_calls == 0


def test_the_api_reports_the_tenants_costs_by_agent_user_and_day(acme, globex, priced):
    today = ask(acme, "bob")
    also_today = ask(acme, "bob")
    yesterday = ask(acme, "alice")
    move_to_day(yesterday, 1)
    ask(globex, "charlie")  # another tenant's run: never in acme's report

    response = acme.get("/api/v1/reports/costs?group_by=agent,user,day")

    assert response.status_code == 200
    body = response.json()
    assert body["tenant"] == "acme"
    assert body["group_by"] == ["agent", "user", "day"]
    day = timezone.now().date()
    assert [(r["agent"], r["user"], r["day"], r["runs"]) for r in body["rows"]] == [
        ("ticket-assistant", "alice", str(day - timedelta(days=1)), 1),
        ("ticket-assistant", "bob", str(day), 2),
    ]
    bob = body["rows"][1]
    assert bob["prompt_tokens"] == today.prompt_tokens + also_today.prompt_tokens
    assert bob["total_tokens"] == today.total_tokens + also_today.total_tokens
    assert Decimal(str(bob["cost_usd"])) == today.cost_usd + also_today.cost_usd
    assert body["totals"]["runs"] == 3
    assert Decimal(str(body["totals"]["cost_usd"])) == (
        today.cost_usd + also_today.cost_usd + Run.objects.get(id=yesterday.id).cost_usd
    )


def test_the_api_report_covers_the_days_from_and_to_inclusive(acme, priced):
    for days_ago in (0, 1, 2, 3):
        move_to_day(ask(acme, "bob"), days_ago)
    day = timezone.now().date()
    window = f"from={day - timedelta(days=2)}&to={day - timedelta(days=1)}"

    body = acme.get(f"/api/v1/reports/costs?group_by=day&{window}").json()

    assert [r["day"] for r in body["rows"]] == [
        str(day - timedelta(days=2)),
        str(day - timedelta(days=1)),
    ]
    assert body["totals"]["runs"] == 2
    assert body["from"] == str(day - timedelta(days=2))


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("group_by=agent,tenant", "group_by"),
        ("group_by=week", "group_by"),
        ("from=2026-02-30", "from"),
        ("from=2026-03-02&to=2026-03-01", "to"),
    ],
)
def test_the_api_refuses_a_bad_report_query(acme, query, field):
    response = acme.get(f"/api/v1/reports/costs?{query}")

    # Each day valid but 'to' before 'from' is understood and refused: 422.
    assert response.status_code == (422 if "&to=" in query else 400)
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in error["details"]["fields"]


def test_the_report_needs_an_api_key(demo):
    response = Client().get("/api/v1/reports/costs")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


def test_the_service_groups_by_tenant_and_totals_every_row(acme, globex, priced):
    runs = [ask(acme, "bob"), ask(globex, "charlie"), ask(globex, "charlie")]

    report = cost_report(["tenant"], CostFilter())

    assert [(r["tenant"], r["runs"]) for r in report["rows"]] == [("acme", 1), ("globex", 2)]
    assert report["totals"]["cost_usd"] == sum(Run.objects.get(id=r.id).cost_usd for r in runs)
    assert report["totals"]["total_tokens"] == sum(r.total_tokens for r in runs)


def test_the_admin_cost_report_shows_only_granted_tenants(acme, globex, priced):
    ask(acme, "bob")
    ask(globex, "charlie")
    admin = Client()
    admin.force_login(get_user_model().objects.get(username="admin"))
    acme_staff = staff_client("accountant", "acme")

    everyone = admin.get("/admin/harness/costreport/", {"group_by": ["tenant"]})
    granted = acme_staff.get("/admin/harness/costreport/", {"group_by": ["tenant", "user"]})

    assert everyone.status_code == 200
    assert [r["tenant"] for r in everyone.context["report"]["rows"]] == ["acme", "globex"]
    assert granted.status_code == 200
    assert [(r["tenant"], r["user"]) for r in granted.context["report"]["rows"]] == [
        ("acme", "bob")
    ]
    assert "globex" not in granted.content.decode()
