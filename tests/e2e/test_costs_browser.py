"""The cost page in a real browser, on the demo's runs (the scripted model at its demo price):
an operator opens it on the last 30 days, sees a bar per day stacked by agent and model and
totals that are not zero, picks a range with the date pickers, and downloads the CSV."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone

from harness.models import Run
from tests.harness.test_cost_reports import ask, move_to_day
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, login, needs_chromium, save

pytestmark = needs_chromium


@pytest.fixture
def demo_runs(acme) -> list[Run]:
    """Demo runs of acme over a week: two today, one 2, 3 and 6 days ago."""
    runs = [ask(acme, "bob"), ask(acme, "alice")]
    for days_ago in (2, 3, 6):
        run = ask(acme, "bob")
        move_to_day(run, days_ago)
        runs.append(run)
    return [Run.objects.get(id=run.id) for run in runs]


def test_the_cost_page_charts_the_demo_runs_and_exports_them(demo_runs, operator, live_server):
    from playwright.sync_api import sync_playwright

    total = sum(run.cost_usd for run in demo_runs)
    today = timezone.now().date()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900}, accept_downloads=True)
        login(page, live_server.url, *operator, "/admin/harness/costreport/")
        chart = page.locator("#cost-chart svg.chart")
        chart_visible = chart.is_visible()
        bars = chart.locator("a").count()
        segments = chart.locator("rect.seg-s0").count()
        shown_total = page.locator("#cost-total").inner_text()
        footer = page.locator("#cost-report tfoot").inner_text()
        pickers = page.locator("input[type=date]").count()
        save(page, None, "costs.png")
        # The date pickers: the last three days only.
        page.fill("#id_start", str(today - timedelta(days=2)))
        page.fill("#id_end", str(today))
        page.click("input[type=submit][value=Show]")
        page.wait_for_url("**start=*")
        bars_after = page.locator("#cost-chart svg.chart a").count()
        runs_after = page.locator(".dash-figures .figure").nth(2).inner_text()
        with page.expect_download() as download_info:
            page.click("#cost-export")
        download = download_info.value
        exported = list(csv.DictReader(io.StringIO(Path(download.path()).read_text())))
        filename = download.suggested_filename
        browser.close()

    assert chart_visible
    assert bars == 30  # the last 30 days
    assert segments == 4  # one agent and model, on the 4 days with runs
    assert total > 0
    assert shown_total == f"${total.quantize(Decimal('0.0001'))}"
    assert shown_total in footer
    assert pickers == 2
    assert bars_after == 3
    assert runs_after.split()[0] == "3"
    assert filename == f"costs-{today - timedelta(days=2)}-{today}.csv"
    assert sum(int(row["runs"]) for row in exported) == 3
    assert {row["user"] for row in exported} == {"alice", "bob"}
    assert sum(Decimal(row["cost_usd"]) for row in exported) == sum(
        run.cost_usd for run in demo_runs if run.created_at.date() >= today - timedelta(days=2)
    )
