"""A run's page in a real browser: it opens on the run's header and its waterfall within the
first screen (1440 x 900), a span opens in place on its pretty-printed attributes, and while
the run waits for an approval the page follows it: the decision shows without a reload."""

from __future__ import annotations

import threading

from harness.models import Run
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, login, needs_chromium, save
from traces.queries import list_spans

pytestmark = needs_chromium


def approve(run: Run, approval) -> None:
    from django.db import connection

    from harness.runs import decide_tool_call

    try:
        decide_tool_call(
            run.tenant,
            str(run.id),
            approval.call_id,
            approver="alice",
            approve=True,
            arguments_sha256=approval.arguments_sha256,
        )
    finally:
        connection.close()


def test_a_held_runs_page_opens_on_its_waterfall_and_follows_the_decision(
    varied_runs, operator, live_server
):
    from playwright.sync_api import sync_playwright

    from policy.models import ToolApproval

    held = varied_runs["held"]
    approval = ToolApproval.objects.get(run_id=str(held.id))
    spans = list_spans(held.request_id)  # as the page opens
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        path = f"/admin/harness/run/{held.id}/change/"
        login(page, live_server.url, *operator, path)
        header = page.locator(".run-header").inner_text()
        waterfall_top = page.evaluate(
            "document.querySelector('#waterfall').getBoundingClientRect().top"
        )
        rows = page.locator("#waterfall .waterfall-row").count()
        bar_widths = page.locator("#waterfall .waterfall-bar").evaluate_all(
            "bars => bars.map(b => b.getBoundingClientRect().width)"
        )
        fields_hidden = not page.locator("details.run-fields fieldset").first.is_visible()
        save(page, None, "run-page.png")
        model_row = page.locator("#waterfall .waterfall-row.kind-model_call").first
        hidden_before = not model_row.locator("pre").is_visible()
        model_row.locator("summary").click()
        attributes = model_row.locator("pre").inner_text()
        # Decided elsewhere (the API, another operator): the open page shows it by itself.
        # (In a thread of its own: Playwright's loop runs in this one, and the ORM refuses to
        # run beside an event loop.)
        decide = threading.Thread(target=approve, args=(held, approval))
        decide.start()
        decide.join()
        page.wait_for_function(
            # The page reloads itself after the decision: between two pages there is none.
            "(status => status !== null && status.dataset.status !== 'awaiting_approval')"
            "(document.querySelector('.run-header .run-status'))",
            timeout=20_000,
        )
        status_after = page.locator(".run-header .run-status").first.get_attribute("data-status")
        browser.close()

    assert "Awaiting Approval" in header
    assert held.request_id in header
    assert held.agent in header
    assert waterfall_top < 900  # in the first screen
    assert rows == len(spans)
    assert all(width > 0 for width in bar_widths)
    assert fields_hidden
    assert hidden_before
    assert '"prompt_tokens"' in attributes
    assert "\n  " in attributes  # pretty-printed
    assert status_after == Run.objects.get(id=held.id).status
    assert status_after != "awaiting_approval"
