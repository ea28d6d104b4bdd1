"""The admin console in a real browser (Playwright driving Debian's Chromium): an auditor
logs in, finds a run by its request id, opens it, reads its timeline, replays it, and previews
a policy change against past runs before saving it; the run list fits 1280 px; an operator
finds a held run in the list, opens it, reads why it is held and approves it on its page.

Prerequisite: Chromium at ``/usr/bin/chromium`` (Debian: ``apt install chromium``). Playwright's
own browser downloads are never used. Set ``HARNESS_SCREENSHOT_DIR`` (e.g. ``docs/screenshots``)
to save ``timeline.png``, ``run-list.png`` and ``held-run.png`` there (``what-if.png``:
test_replay_browser.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from harness.console.reads import format_money
from harness.models import Run, StaffTenantGrant, Tenant
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, login, needs_chromium, save

pytestmark = needs_chromium


@pytest.fixture
def auditor(demo) -> tuple[str, str]:
    """A staff user granted acme, who may view everything there."""
    user = get_user_model().objects.create_user("auditor", password="audit-pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug="acme"))
    return "auditor", "audit-pw"


def test_an_auditor_finds_a_run_by_request_id_and_reads_its_timeline(
    acme, auditor, live_server, settings
):
    from playwright.sync_api import sync_playwright

    # Priced, so that the timeline has costs to show (USD per million tokens).
    settings.HARNESS_ROUTES = {"scripted:demo": {"price": {"input": 2.5, "output": 10.0}}}
    acme.post(
        "/api/v1/runs",
        {
            "agent": "ticket-assistant",
            "user": "bob",
            "input": "Why T-20250318-007? Call 13812345678",
        },
    )
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hello"})
    run = Run.objects.filter(input__contains="T-20250318-007").get()
    username, password = auditor
    stylesheets: dict[str, int] = {}
    screenshots = os.environ.get("HARNESS_SCREENSHOT_DIR", "")

    # No database access inside this block: Playwright's sync API runs an event loop here,
    # and Django refuses ORM calls from a thread with a running loop.
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        # The first response for each stylesheet (a fresh browser: a full 200); later pages
        # may revalidate it and get 304 Not Modified.
        page.on(
            "response",
            lambda r: (
                stylesheets.setdefault(r.url.rsplit("/", 1)[-1], r.status)
                if r.url.endswith(".css")
                else None
            ),
        )
        page.goto(f"{live_server.url}/admin/login/?next=/admin/harness/run/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.wait_for_url("**/admin/harness/run/")
        listed_before = page.locator("#result_list tbody tr").count()

        page.fill("#searchbar", run.request_id)
        page.press("#searchbar", "Enter")
        page.wait_for_url("**/admin/harness/run/?q=*")
        results = page.locator("#result_list tbody tr")
        found = results.count()
        page.locator("#result_list tbody tr th a").first.click()
        page.wait_for_selector("#timeline")

        tools = page.locator('#timeline li[data-kind="tool_call"]')
        tool_names = [tools.nth(i).get_attribute("data-tool") for i in range(tools.count())]
        steps = page.locator("#timeline article.timeline-step").count()
        total_cost = page.locator("#timeline .total-cost").inner_text()
        first_check = page.locator('#timeline li[data-kind="policy_check"]').first.inner_text()
        tool_io = page.locator('#timeline li[data-kind="tool_call"] details.tool-io').first
        hidden_before = tool_io.locator("pre").first.is_visible()
        tool_io.locator("summary").click()
        shown_after = tool_io.locator("pre").first.is_visible()
        arguments = tool_io.locator("pre").first.inner_text()
        page.locator("#timeline details.model-saw").first.locator("summary").click()
        masked = page.locator("#timeline details.model-saw mark.masked").first
        masked_shown = masked.is_visible() and masked.inner_text() == "138****5678"
        if screenshots:
            Path(screenshots).mkdir(parents=True, exist_ok=True)
            page.locator("#timeline").screenshot(path=str(Path(screenshots) / "timeline.png"))

        # Replay it: today's system decides every call as it did.
        page.click("a.replay-link")
        page.wait_for_selector("#replay-report")
        replay_summary = page.locator(".replay-summary").inner_text()
        replayed_calls = page.locator("tr.replay-call").count()

        # Preview a policy change before saving it: deny bob ticket:write.
        page.goto(f"{live_server.url}/admin/harness/run/")
        page.click("a.policy-preview-link")
        page.wait_for_selector("#policy-preview")
        page.select_option("#id_tenant", label="acme")
        page.select_option("#id_op", "add")
        page.fill("#id_subject", "bob")
        page.fill("#id_scope", "ticket:write")
        page.select_option("#id_effect", "deny")
        page.click("input[name=preview]")
        page.wait_for_selector("pre.policy-diff")
        added_line = page.locator("pre.policy-diff").inner_text()
        added_colour = page.locator("pre.policy-diff .diff-added").evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        kept_colour = page.locator("pre.policy-diff .diff-kept").first.evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        run_link = page.locator("tr.what-if-change a.run-link").first.get_attribute("href")
        changed = page.locator("tr.what-if-change")
        changed_calls = [changed.nth(i).inner_text() for i in range(changed.count())]
        browser.close()

    assert listed_before == 2
    assert found == 1
    assert steps == 4
    assert total_cost == format_money(run.cost_usd) != "$0"
    assert tool_names == ["get_ticket", "update_ticket", "notify_user"]
    assert "allowed" in first_check
    assert "role:member, acme, ticket, read, allow" in first_check
    assert "policy v" in first_check
    assert masked_shown
    assert not hidden_before
    assert shown_after
    assert '"ticket_id": "T-20250318-007"' in arguments
    assert stylesheets.get("base.css") == 200, stylesheets
    assert stylesheets.get("timeline.css") == 200, stylesheets
    assert "No divergence" in replay_summary
    assert replayed_calls == 3
    assert "+ permission  bob  ticket:write  deny" in added_line
    assert added_colour == "rgb(230, 255, 236)"  # green, the added line
    assert kept_colour == "rgba(0, 0, 0, 0)"  # unchanged lines are not coloured
    assert run_link.startswith("/admin/harness/run/")
    # Both demo runs assigned the ticket: exactly their update_ticket calls would now be
    # refused (by the ACL); their reads and notifications are untouched.
    assert len(changed_calls) == 2
    assert all("update_ticket" in c and "Refused" in c and "ACL" in c for c in changed_calls)
    assert any(run.request_id in c for c in changed_calls)


def test_the_run_list_fits_1280_px_with_every_column(varied_runs, operator, live_server):
    # Granted both tenants: the widest list, with its tenant column.
    StaffTenantGrant.objects.create(
        user=get_user_model().objects.get(username="olga"), tenant=Tenant.objects.get(slug="globex")
    )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        login(page, live_server.url, *operator, "/admin/harness/run/")
        headers = page.locator("#result_list thead th").all_inner_texts()
        page_width = page.evaluate("document.documentElement.scrollWidth")
        table_right = page.evaluate(
            "document.querySelector('#result_list').getBoundingClientRect().right"
        )
        # Cut: a cell beyond the list's visible box (hidden under the filters, or behind a
        # horizontal scroll bar of the results), or beyond the window.
        cut = page.evaluate(
            """(() => {
                 const box = document.querySelector('#changelist .results');
                 const right = Math.min(box.getBoundingClientRect().right, window.innerWidth);
                 return [...document.querySelectorAll('#result_list td, #result_list th')]
                   .filter(c => c.getBoundingClientRect().right > right + 0.5)
                   .map(c => c.className || c.innerText);
               })()"""
        )
        scrolls = page.evaluate(
            "(b => b.scrollWidth > b.clientWidth)(document.querySelector('#changelist .results'))"
        )
        badges = page.locator("#result_list .run-status:not(.run-outcome)").all_inner_texts()
        outcomes = page.locator("#result_list .run-outcome").all_inner_texts()
        held_colour = page.locator(
            '#result_list .run-status[data-status="awaiting_approval"]'
        ).evaluate("e => getComputedStyle(e).backgroundColor")
        costs = page.locator("#result_list td.field-cost").all_inner_texts()
        inputs = page.locator("#result_list td.field-short_input").all_inner_texts()
        save(page, page.locator("#changelist"), "run-list.png")
        browser.close()

    assert [h.strip().lower() for h in headers if h.strip()] == [
        "request id",
        "status",
        "outcome",
        "agent",
        "user id",
        "input",
        "duration",
        "steps",
        "tokens",
        "cost",
        "created",
        "tenant",
    ]
    assert page_width <= 1280
    assert table_right <= 1280
    assert cut == []
    assert not scrolls
    assert sorted(badges) == ["Awaiting Approval", "Budget Exceeded", "Succeeded"]
    assert len(outcomes) == 3
    assert held_colour == "rgb(255, 241, 214)"  # amber
    assert all(c.startswith("$") for c in costs), costs
    assert any("138****5678" in i for i in inputs), inputs
    assert not any("13812345678" in i for i in inputs)


def test_an_operator_finds_a_held_run_reads_why_and_approves_it_on_its_page(
    varied_runs, operator, live_server
):
    from playwright.sync_api import sync_playwright

    held = varied_runs["held"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        login(page, live_server.url, *operator, "/admin/harness/run/")
        # Find it: the status filter, then the amber badge's row.
        page.click("#changelist-filter a[href*='status__exact=awaiting_approval']")
        page.wait_for_url("**status__exact=awaiting_approval*")
        listed = page.locator("#result_list tbody tr").count()
        page.locator("#result_list tbody tr").filter(has_text="Awaiting Approval").locator(
            "th a"
        ).click()
        page.wait_for_selector("#held-calls")
        # Read why, before anything else on the page.
        problem_above_fields = page.evaluate(
            """document.querySelector('#run-problem').getBoundingClientRect().top <
               document.querySelector('#waterfall').getBoundingClientRect().top"""
        )
        problem = page.locator("#run-problem").inner_text()
        held_call = page.locator("#held-calls .held-call").first
        summary = held_call.locator(".held-summary").inner_text()
        arguments = held_call.locator(".held-arguments").inner_text()
        save(page, None, "held-run.png")  # the top of the page, as the operator lands on it
        # Approve it there.
        held_call.locator("input[name=comment]").fill("charged twice: escalate")
        held_call.locator("button.decide-approve").click()
        page.wait_for_selector("ul.messagelist")
        message = page.locator("ul.messagelist").inner_text()
        held_after = page.locator("#held-calls").count()
        approval_event = page.locator('#timeline li[data-kind="approval"]').inner_text()
        browser.close()

    from policy.models import ToolApproval

    approval = ToolApproval.objects.get(run_id=str(held.id))
    assert listed == 1
    assert problem_above_fields
    assert "Awaiting Approval" in problem
    assert "update_ticket" in summary
    assert "default-escalation-approval" in summary
    assert "left" in summary
    assert '"action": "escalate"' in arguments
    assert "138****5678" in arguments
    assert "13812345678" not in arguments
    assert "Approved call_2_1" in message
    assert held_after == 0
    assert "approved" in approval_event
    assert "olga" in approval_event
    assert approval.status == "approved"
    assert approval.decided_by == "olga"
    assert approval.comment == "charged twice: escalate"
