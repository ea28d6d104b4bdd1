"""The console's home in a real browser: an operator signs in and lands on the dashboard,
reads the day's figures, and follows a chart's bar and a refusal to the runs behind them."""

from __future__ import annotations

import pytest

from harness.models import Run
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, login, needs_chromium, save

pytestmark = needs_chromium


@pytest.fixture
def refused_run(acme) -> Run:
    """The demo's ticket case with members no longer allowed to write tickets: its
    update_ticket call is refused by the ACL."""
    from policy import services as policy

    member = policy.role_subject("member")
    policy.remove_permission("acme", member, "ticket:write", "allow", actor="tests")
    question = "Why has ticket T-20250318-007 not been handled?"
    response = acme.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": question}
    )
    return Run.objects.get(id=response.json()["id"])


def test_an_operator_lands_on_the_dashboard_and_follows_it_to_the_runs(
    varied_runs, operator, live_server
):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        login(page, live_server.url, *operator, "/admin/")
        figures = page.locator(".dash-figures .figure").all_inner_texts()
        bars = page.locator("#dash-runs svg.chart a").count()
        segments = page.locator("#dash-runs svg.chart rect[class^=seg-]").count()
        approvals = page.locator("#dash-approvals tbody tr").all_inner_texts()
        budgets = page.locator("#dash-budgets tbody tr").all_inner_texts()
        models_listed = page.locator(".dash-models .app-harness").count()
        first_screen = page.evaluate(
            "document.querySelector('#dash-runs').getBoundingClientRect().top < window.innerHeight"
        )
        save(page, None, "dashboard.png")
        # The newest hour's bar leads to the run list of that hour.
        page.locator("#dash-runs svg.chart a").last.click()
        page.wait_for_url("**/admin/harness/run/?created_at__gte=*")
        listed = page.locator("#result_list tbody tr").count()
        browser.close()

    assert figures[0].split()[0] == "3"  # three runs in the last day
    assert figures[2].split()[0] == "1"
    assert "waiting for approval" in figures[2]
    assert bars == 25
    assert segments >= 1
    assert len(approvals) == 1
    assert "update_ticket" in approvals[0]
    assert [row.split()[0] for row in budgets] == ["acme"]  # granted acme only
    assert models_listed == 1  # Django's list of models still below
    assert first_screen
    assert listed == 3


def test_a_refusal_on_the_dashboard_names_its_rule_and_lists_the_refused_runs(
    refused_run, operator, live_server
):
    from playwright.sync_api import sync_playwright

    # The scripted answer claims the assignment anyway: the guard corrected it, the worst.
    assert refused_run.outcome == "corrected"
    assert refused_run.outcome_counts["refused"] == 1
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        login(page, live_server.url, *operator, "/admin/")
        row = page.locator("#dash-problems tbody tr").first.inner_text()
        page.locator("#dash-problems tbody tr a").first.click()
        page.wait_for_url("**/admin/harness/run/?*had=refused*")
        listed = page.locator("#result_list tbody tr").count()
        opened = page.locator("#result_list tbody tr a").first.get_attribute("href")
        browser.close()

    assert row.split()[:2] == ["update_ticket", "acl"]
    assert listed == 1
    assert str(refused_run.id) in opened
