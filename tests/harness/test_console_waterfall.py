"""A run's spans as a waterfall (``harness.console.waterfall``), and the state a run's open
page watches (``/admin/harness/run/<id>/state/``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from hypothesis import given
from hypothesis import strategies as st

from harness.console.waterfall import MIN_BAR_PERCENT, build_waterfall
from harness.models import Run, StaffTenantGrant, Tenant

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def span(span_id: str, start_ms: float, duration_ms: float, parent: str = "", **extra) -> dict:
    return {
        "span_id": span_id,
        "parent_span_id": parent or None,
        "kind": extra.pop("kind", "tool_call"),
        "name": extra.pop("name", span_id),
        "status": extra.pop("status", "ok"),
        "started_at": T0 + timedelta(milliseconds=start_ms),
        "duration_ms": duration_ms,
        "attributes": extra.pop("attributes", {}),
    }


def test_bars_sit_on_the_runs_own_time_axis_under_their_parents():
    waterfall = build_waterfall(
        [
            span("session", 0, 100, kind="agent_session"),
            span("model", 0, 60, parent="session", kind="model_call"),
            span("check", 60, 0.01, parent="session", kind="policy_check"),
            span("tool", 70, 30, parent="session", attributes={"tool": "get_ticket", "ü": 1}),
            span("nested", 75, 10, parent="tool"),
        ]
    )

    assert waterfall.total_ms == pytest.approx(100)
    rows = {row.span_id: row for row in waterfall.rows}
    assert [row.depth for row in waterfall.rows] == [0, 1, 1, 1, 2]
    assert (rows["model"].offset_percent, rows["model"].width_percent) == (0, 60)
    assert rows["tool"].offset_percent == pytest.approx(70)
    assert rows["tool"].width_percent == pytest.approx(30)
    assert rows["check"].width_percent == MIN_BAR_PERCENT  # still visible
    assert rows["tool"].attributes == json.dumps(
        {"tool": "get_ticket", "ü": 1}, indent=2, ensure_ascii=False, sort_keys=True
    )


def test_no_spans_no_waterfall():
    assert build_waterfall([]).rows == []


@given(
    st.lists(
        st.tuples(st.floats(0, 10_000), st.floats(0, 10_000)),
        min_size=1,
        max_size=30,
    )
)
def test_every_bar_stays_inside_the_axis_and_starts_where_its_span_started(timings):
    spans = [span(f"s{i}", start, duration) for i, (start, duration) in enumerate(timings)]
    waterfall = build_waterfall(spans)
    first = min(start for start, _ in timings)
    for row, (start, _) in zip(waterfall.rows, timings, strict=True):
        assert row.offset_percent >= 0
        assert row.offset_percent + row.width_percent <= 100 + 1e-6
        assert row.width_percent > 0
        # Each start is rounded to a microsecond (a datetime) and read back as a float
        # timestamp: a difference of two starts can be off by a microsecond and a bit more.
        assert row.start_ms == pytest.approx(start - first, abs=2e-3)


@pytest.fixture
def staff_of(demo):
    def make(slug: str):
        user = get_user_model().objects.create_user(f"viewer-{slug}", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(codename="view_run"))
        StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug=slug))
        return user

    return make


def test_an_open_run_page_reads_its_runs_state_and_no_other_tenants(acme, staff_of, client):
    response = acme.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hello"}
    )
    run = Run.objects.get(id=response.json()["id"])

    client.force_login(staff_of("acme"))
    state = client.get(f"/admin/harness/run/{run.id}/state/")
    client.force_login(staff_of("globex"))
    other = client.get(f"/admin/harness/run/{run.id}/state/")

    assert state.status_code == 200
    assert state.json() == {
        "status": run.status,
        "outcome": run.outcome,
        "steps": run.steps,
        "updated_at": run.updated_at.isoformat(),
    }
    assert other.status_code == 403
