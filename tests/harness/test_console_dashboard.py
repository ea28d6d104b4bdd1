"""The console's home (``harness.console.dashboard``): what it counts, over which window, for
whom, and where each figure links."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.console.dashboard import build_dashboard
from harness.models import (
    DeliveryStatus,
    Run,
    RunOutcome,
    RunStatus,
    StaffTenantGrant,
    WebhookDelivery,
)
from policy.models import ApprovalStatus, TenantLimits, ToolApproval
from tests.factories import create_tenant
from traces.models import Span, SpanKind, SpanStatus
from traces.span_records import ToolCallSpan

NOW = datetime(2026, 11, 30, 15, 20, tzinfo=UTC)
_ids = itertools.count(1)


def make_run(tenant, created_at: datetime = NOW, **fields) -> Run:
    n = next(_ids)
    values = {
        "request_id": f"req{n:020d}",
        "tenant": tenant,
        "agent": "ticket-assistant",
        "user_id": "bob",
        "input": "hello",
        "max_steps": 10,
        "status": RunStatus.SUCCEEDED,
    } | fields
    run = Run.objects.create(**values)
    Run.objects.filter(pk=run.pk).update(created_at=created_at)  # auto_now_add ignores it
    run.refresh_from_db()
    return run


def stored_span(run: Run, kind: str, name: str, status: str, attributes: dict, at=NOW) -> Span:
    return Span.objects.create(
        request_id=run.request_id,
        tenant=run.tenant.slug,
        span_id=uuid.uuid4().hex[:16],
        sequence=next(_ids),
        kind=kind,
        name=name,
        status=status,
        started_at=at,
        ended_at=at,
        duration_ms=0.1,
        attributes=attributes,
    )


def refused_check(run: Run, tool: str, check: str, rule: str, at: datetime = NOW) -> Span:
    attributes = {"call_id": "c1", "tool": tool, "check": check, "refused": True, "rule": rule}
    return stored_span(
        run, SpanKind.POLICY_CHECK, f"policy.{check}", SpanStatus.REFUSED, attributes, at
    )


def staff(*tenants) -> object:
    user = get_user_model().objects.create_user(f"staff-{next(_ids)}", is_staff=True)
    for tenant in tenants:
        StaffTenantGrant.objects.create(user=user, tenant=tenant)
    return user


def superuser() -> object:
    return get_user_model().objects.create_superuser(f"root-{next(_ids)}", password="x")


@pytest.fixture
def tenants(db):
    return create_tenant(slug="acme"), create_tenant(slug="globex")


def test_it_counts_only_the_runs_of_the_granted_tenants_in_the_window(tenants):
    acme, globex = tenants
    make_run(acme, status=RunStatus.SUCCEEDED)
    make_run(acme, status=RunStatus.FAILED, outcome=RunOutcome.TOOL_FAILED)
    make_run(acme, created_at=NOW - timedelta(hours=25))  # before the window
    make_run(acme, experiment=True)  # an experiment's run is not traffic
    make_run(globex, status=RunStatus.FAILED)

    board = build_dashboard(staff(acme), now=NOW)

    assert board.runs == 2
    assert board.by_status == {RunStatus.SUCCEEDED: 1, RunStatus.FAILED: 1}
    assert board.by_outcome == {RunOutcome.CLEAN: 1, RunOutcome.TOOL_FAILED: 1}
    assert board.with_problems == 1
    assert [b.tenant for b in board.budgets] == ["acme"]
    assert build_dashboard(superuser(), now=NOW).runs == 3
    assert build_dashboard(staff(), now=NOW).runs == 0  # granted nothing, sees nothing


def test_each_hour_bar_links_to_the_run_list_of_that_hour(tenants):
    acme, _ = tenants
    make_run(acme, created_at=NOW.replace(minute=5), status=RunStatus.FAILED)
    make_run(acme, created_at=NOW - timedelta(hours=3))

    board = build_dashboard(superuser(), now=NOW)

    assert len(board.hourly) == 25  # the partial first hour, then every hour up to now
    last = board.hourly[-1]
    assert last.start == NOW.replace(minute=0)
    assert last.counts == {RunStatus.FAILED: 1}
    query = parse_qs(urlsplit(last.link).query)
    assert urlsplit(last.link).path == "/admin/harness/run/"
    assert query == {
        "created_at__gte": [NOW.replace(minute=0).isoformat()],
        "created_at__lt": [(NOW.replace(minute=0) + timedelta(hours=1)).isoformat()],
    }
    assert board.hourly[-4].counts == {RunStatus.SUCCEEDED: 1}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    runs=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=30 * 60),  # minutes before now
            st.sampled_from(RunStatus.values),
            st.sampled_from(RunOutcome.values),
        ),
        max_size=25,
    )
)
def test_the_bars_and_totals_agree_with_the_runs_in_the_window(tenants, runs):
    acme, _ = tenants
    Run.objects.all().delete()
    for minutes, status, outcome in runs:
        make_run(acme, created_at=NOW - timedelta(minutes=minutes), status=status, outcome=outcome)
    inside = [(m, s, o) for m, s, o in runs if m <= 24 * 60]

    board = build_dashboard(superuser(), now=NOW)

    assert board.runs == len(inside)
    assert sum(bar.total for bar in board.hourly) == len(inside)
    for status in RunStatus.values:
        expected = sum(1 for _, s, _ in inside if s == status)
        assert board.by_status.get(status, 0) == expected
    assert board.with_problems == sum(1 for _, _, o in inside if o != RunOutcome.CLEAN)


def test_refusals_are_ranked_by_tool_check_and_rule_and_link_to_the_refused_runs(tenants):
    acme, globex = tenants
    run = make_run(acme, outcome=RunOutcome.REFUSED)
    for _ in range(3):
        refused_check(run, "send_email", "chain", "default-pii-no-external")
    refused_check(run, "update_ticket", "acl", "")
    refused_check(run, "send_email", "chain", "old", at=NOW - timedelta(days=2))  # too old
    refused_check(make_run(globex), "delete_all", "acl", "")  # not granted

    board = build_dashboard(staff(acme), now=NOW)

    assert [(p.tool, p.check, p.rule, p.refused) for p in board.problems] == [
        ("send_email", "chain", "default-pii-no-external", 3),
        ("update_ticket", "acl", "", 1),
    ]
    query = parse_qs(urlsplit(board.problems[0].link).query)
    assert query["tool"] == ["send_email"]
    assert query["had"] == ["refused"]


def failed_call(run: Run, tool: str, error_code: str) -> Span:
    """A failed ``tool_call`` span as the engine writes it (``ToolCallSpan``)."""
    attributes = ToolCallSpan(
        call_id="c1", tool=tool, duration_ms=1.0, attempts=1, error_code=error_code
    ).attributes()
    return stored_span(run, SpanKind.TOOL_CALL, tool, SpanStatus.ERROR, attributes)


def test_failed_tool_calls_are_ranked_by_tool_and_the_error_code_that_stands_for_a_rule(tenants):
    acme, _ = tenants
    run = make_run(acme, outcome=RunOutcome.TOOL_FAILED)
    failed_call(run, "always_fails", "tool_failed")
    failed_call(run, "always_fails", "tool_failed")
    failed_call(run, "always_fails", "timeout")

    board = build_dashboard(staff(acme), now=NOW)

    assert [(p.tool, p.check, p.rule, p.failed) for p in board.problems] == [
        ("always_fails", "tool", "tool_failed", 2),
        ("always_fails", "tool", "timeout", 1),
    ]


def test_approvals_waiting_soonest_first_and_not_the_expired_or_decided(tenants):
    acme, _ = tenants

    def approval(tenant: str, status: str, expires_in: timedelta, tool: str) -> None:
        ToolApproval.objects.create(
            tenant=tenant,
            run_id=str(uuid.uuid4()),
            call_id=f"c{next(_ids)}",
            tool=tool,
            user_id="bob",
            arguments={},
            arguments_sha256="0" * 64,
            rule="escalations",
            reason="held",
            policy_version=1,
            status=status,
            expires_at=NOW + expires_in,
        )

    approval("acme", ApprovalStatus.PENDING, timedelta(hours=2), "later")
    approval("acme", ApprovalStatus.PENDING, timedelta(minutes=5), "sooner")
    approval("acme", ApprovalStatus.PENDING, -timedelta(minutes=1), "expired")
    approval("acme", ApprovalStatus.APPROVED, timedelta(hours=1), "decided")
    approval("globex", ApprovalStatus.PENDING, timedelta(minutes=1), "other-tenant")

    board = build_dashboard(staff(acme), now=NOW)

    assert [a.tool for a in board.approvals] == ["sooner", "later"]
    assert board.approvals[0].link == f"/admin/harness/run/{board.approvals[0].run_id}/change/"


def test_latency_percentiles_come_from_the_runs_that_succeeded(tenants):
    acme, _ = tenants
    for seconds in [1, 2, 3, 4, 100]:
        started = NOW - timedelta(minutes=10)
        make_run(
            acme,
            started_at=started,
            finished_at=started + timedelta(seconds=seconds),
            steps=2,
        )
    started = NOW - timedelta(minutes=5)
    make_run(
        acme,
        status=RunStatus.FAILED,
        started_at=started,
        finished_at=started + timedelta(seconds=999),
        steps=1,
    )

    latency = build_dashboard(superuser(), now=NOW).latency

    assert latency.runs == 5
    assert latency.run_p50_s == pytest.approx(3.0)
    assert latency.step_p50_s == pytest.approx(1.5)
    assert 4 < latency.run_p95_s <= 100


def test_spend_per_day_by_agent_and_model_and_the_budget_against_its_limit(tenants):
    acme, _ = tenants
    make_run(acme, prompt_tokens=100, completion_tokens=20, cost_usd=Decimal("0.5"))
    make_run(
        acme,
        prompt_tokens=10,
        completion_tokens=5,
        cost_usd=Decimal("0.25"),
        model_route="scripted:demo",
    )
    make_run(acme, created_at=NOW - timedelta(days=2), prompt_tokens=7)
    make_run(acme, created_at=NOW - timedelta(days=9), prompt_tokens=1000)  # outside a week
    TenantLimits.objects.create(tenant="acme", daily_tokens=1000)

    board = build_dashboard(superuser(), now=NOW)

    rows = [(r.day, r.model, r.tokens, r.cost_usd) for r in board.spend]
    assert rows == [
        (NOW.date(), "—", 120, Decimal("0.5")),
        (NOW.date(), "scripted:demo", 15, Decimal("0.25")),
        ((NOW - timedelta(days=2)).date(), "—", 7, Decimal(0)),
    ]
    assert [d for d, *_ in board.spend_by_day] == [
        (NOW - timedelta(days=i)).date() for i in range(6, -1, -1)
    ]
    assert board.spend_by_day[-1][1:3] == (135, Decimal("0.75"))
    acme_budget = next(b for b in board.budgets if b.tenant == "acme")
    assert acme_budget.tokens_limit == 1000


def test_failing_webhook_deliveries_are_counted_for_the_granted_tenants(tenants):
    acme, globex = tenants

    def delivery(run: Run, status: str, attempts: int) -> None:
        WebhookDelivery.objects.create(
            run=run,
            event_type="run.finished",
            url="https://example.com/hook",
            payload={},
            status=status,
            attempts=attempts,
        )

    run = make_run(acme)
    delivery(run, DeliveryStatus.FAILED, 8)
    delivery(run, DeliveryStatus.PENDING, 2)  # retrying
    delivery(run, DeliveryStatus.PENDING, 0)  # not tried yet
    delivery(run, DeliveryStatus.DELIVERED, 1)
    delivery(make_run(globex), DeliveryStatus.FAILED, 8)

    assert build_dashboard(staff(acme), now=NOW).failing_webhooks == 2
    assert build_dashboard(superuser(), now=NOW).failing_webhooks == 3


def test_the_siem_lag_is_shown_to_superusers_only(tenants):
    from harness.siem.models import SiemCursor

    acme, _ = tenants
    SiemCursor.objects.create(sink="splunk", stream="audit", lag_records=42, lag_seconds=61.5)

    rows = build_dashboard(superuser(), now=NOW).siem

    assert [(r["sink"], r["stream"], r["lag_records"], r["lag_seconds"]) for r in rows] == [
        ("splunk", "audit", 42, 61.5)
    ]
    assert build_dashboard(staff(acme), now=NOW).siem == []  # sinks hold every tenant's records


def test_spend_without_a_price_says_so_rather_than_zero_dollars(tenants):
    acme, _ = tenants
    make_run(acme, prompt_tokens=50, model_route="openai:unknown-model", unpriced_calls=2)
    make_run(acme, prompt_tokens=50, cost_usd=Decimal("0.5"), unpriced_calls=1)

    board = build_dashboard(superuser(), now=NOW)

    assert sorted(row.cost for row in board.spend) == [
        "$0.5000 (+1 calls without a price)",
        "no price",
    ]
