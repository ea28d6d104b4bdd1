"""The console's cost page: the last 30 days by default, date pickers, a chart per day by
agent and model, totals, "no price" for unpriced calls, and the CSV export."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from harness.models import Run
from tests.fake_providers import openai_completion, openai_usage
from tests.harness.test_admin_console import staff_client
from tests.harness.test_cost_reports import ask, move_to_day

PAGE = "/admin/harness/costreport/"
EXPORT = "/admin/harness/costreport/export.csv"


def test_the_page_opens_on_the_last_30_days_with_date_pickers(acme, console_admin):
    recent, old = ask(acme, "bob"), ask(acme, "bob")
    move_to_day(recent, 29)
    move_to_day(old, 30)  # one day before the default range

    response = console_admin.get(PAGE)

    assert response.status_code == 200
    html = response.content.decode()
    today = timezone.now().date()
    assert f'type="date" name="start" value="{today - timedelta(days=29)}"' in html
    assert f'type="date" name="end" value="{today}"' in html
    report = response.context["report"]
    assert report["totals"]["runs"] == 1
    assert report["totals"]["cost_usd"] == Run.objects.get(id=recent.id).cost_usd > 0
    assert response.context["page"].days == 30


def test_the_chart_has_a_bar_per_day_stacked_by_agent_and_model(acme, console_admin):
    move_to_day(ask(acme, "bob"), 1)
    ask(acme, "bob")
    day = timezone.now().date()

    response = console_admin.get(PAGE, {"start": day - timedelta(days=2), "end": day})

    chart = str(response.context["page"].chart)
    assert chart.startswith('<svg class="chart"')
    assert chart.count('class="bar-hit"') == 3  # three days, one of them empty
    assert chart.count('class="seg-s0"') == 2  # one series on two days
    assert "ticket-assistant · scripted:demo" in chart
    assert response.context["page"].chart_unit == "USD"


def test_the_totals_are_the_sum_of_the_rows_shown_in_money(acme, globex, console_admin):
    runs = [ask(acme, "bob"), ask(globex, "charlie"), ask(acme, "alice")]

    response = console_admin.get(PAGE)

    report = response.context["report"]
    total = sum(Run.objects.get(id=r.id).cost_usd for r in runs)
    assert report["totals"]["cost_usd"] == sum(r["cost_usd"] for r in report["rows"]) == total
    label = report["totals"]["cost_label"]
    assert label == f"${total.quantize(Decimal('0.0001'))}"
    html = response.content.decode()
    assert f'<strong id="cost-total">{label}</strong>' in html
    tokens = report["totals"]["total_tokens"]
    assert tokens > 1000
    assert f"<strong>{tokens:,}</strong> tokens" in html  # thousands separated


def test_unpriced_calls_show_no_price_never_zero(acme, console_admin, unpriced):
    unpriced.queue(openai_completion("It waits for a part.", usage=openai_usage(300, 20)))
    ask(acme, "bob")

    response = console_admin.get(PAGE)

    report = response.context["report"]
    assert report["totals"]["cost_label"] == "no price"
    assert [row["cost_label"] for row in report["rows"]] == ["no price"]
    assert response.context["page"].chart_unit == "tokens"
    assert "$0<" not in response.content.decode()
    run_list = console_admin.get("/admin/harness/run/").content.decode()
    assert '<td class="field-cost">no price</td>' in run_list


def test_an_inverted_range_is_refused_on_the_page_and_in_the_export(console_admin):
    query = {"start": "2026-03-02", "end": "2026-03-01"}

    page = console_admin.get(PAGE, query)
    export = console_admin.get(EXPORT, query)

    assert page.status_code == 200
    assert page.context["page"] is None
    assert "&#x27;To&#x27; is before &#x27;From&#x27;." in page.content.decode()
    assert export.status_code == 400


def read_csv(response) -> list[dict[str, str]]:
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="costs-')
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_export_has_a_row_per_day_tenant_agent_model_and_user(acme, globex, console_admin):
    bob, charlie = ask(acme, "bob"), ask(globex, "charlie")

    rows = read_csv(console_admin.get(EXPORT))

    day = str(timezone.now().date())
    assert [(r["day"], r["tenant"], r["agent"], r["model"], r["user"]) for r in rows] == [
        (day, "acme", "ticket-assistant", "scripted:demo", "bob"),
        (day, "globex", "ticket-assistant", "scripted:demo", "charlie"),
    ]
    assert [Decimal(r["cost_usd"]) for r in rows] == [
        Run.objects.get(id=bob.id).cost_usd,
        Run.objects.get(id=charlie.id).cost_usd,
    ]
    assert rows[0]["total_tokens"] == str(bob.total_tokens)
    assert rows[0]["unpriced_calls"] == "0"


def test_the_export_covers_the_range_asked_and_only_granted_tenants(acme, globex):
    move_to_day(ask(acme, "bob"), 5)
    ask(acme, "alice")
    ask(globex, "charlie")
    day = timezone.now().date()
    staff = staff_client("accountant", "acme")

    rows = read_csv(staff.get(EXPORT, {"start": day - timedelta(days=1), "end": day}))

    assert [(r["tenant"], r["user"]) for r in rows] == [("acme", "alice")]


def test_the_export_needs_the_view_permission(demo):
    user = get_user_model().objects.create_user("nobody", password="pw", is_staff=True)
    client = Client()
    client.force_login(user)

    assert client.get(EXPORT).status_code == 403
    assert Client().get(EXPORT).status_code == 302  # to the sign-in page


def test_a_range_longer_than_a_chart_can_draw_is_refused(console_admin):
    query = {"start": "2024-01-01", "end": "2025-01-01"}  # 367 days

    page = console_admin.get(PAGE, query)

    assert page.context["page"] is None
    assert "Pick at most 366 days." in page.content.decode()
    assert console_admin.get(PAGE, {"start": "2024-01-02", "end": "2025-01-01"}).context["page"]


def test_an_open_range_charts_at_most_a_year_up_to_its_last_run(acme, console_admin):
    move_to_day(ask(acme, "bob"), 400)
    ask(acme, "bob")

    page = console_admin.get(PAGE, {"start": "", "end": ""}).context["page"]

    assert page.days == 366
    assert page.report["totals"]["runs"] == 2  # the table covers every day
