"""The admin console in a real browser (Playwright driving Debian's chromium): an auditor
logs in, finds a run by its request id, opens it, reads its timeline, replays it, and previews
a policy change against past runs before saving it.

Set ``HARNESS_SCREENSHOT_DIR`` (e.g. ``docs/screenshots``) to save ``timeline.png`` and
``what-if.png`` there.
Playwright's own browser downloads are never used: the test drives ``/usr/bin/chromium``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from harness.models import Run, StaffTenantGrant, Tenant

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"no browser: {CHROMIUM} is not installed (apt install chromium)"
)


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
        {"agent": "ticket-assistant", "user": "bob", "input": "Why T-20250318-007?"},
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
        page.on(
            "response",
            lambda r: (
                stylesheets.__setitem__(r.url.rsplit("/", 1)[-1], r.status)
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
        page.wait_for_selector("table.policy-diff")
        added_line = page.locator("table.policy-diff").inner_text()
        changed = page.locator("tr.what-if-change")
        changed_calls = [changed.nth(i).inner_text() for i in range(changed.count())]
        if screenshots:
            page.locator("#policy-preview").screenshot(path=str(Path(screenshots) / "what-if.png"))
        browser.close()

    assert listed_before == 2
    assert found == 1
    assert steps == 4
    assert total_cost == f"{run.cost_usd:.6f}" != "0.000000"
    assert tool_names == ["get_ticket", "update_ticket", "notify_user"]
    assert "allowed" in first_check
    assert "role:member, acme, ticket, read, allow" in first_check
    assert "policy v" in first_check
    assert not hidden_before
    assert shown_after
    assert '"ticket_id": "T-20250318-007"' in arguments
    assert stylesheets.get("base.css") == 200, stylesheets
    assert stylesheets.get("timeline.css") == 200, stylesheets
    assert "No divergence" in replay_summary
    assert replayed_calls == 3
    assert "+ bob  ticket:write  deny" in added_line
    # Both demo runs assigned the ticket: exactly their update_ticket calls would now be
    # refused (by the ACL); their reads and notifications are untouched.
    assert len(changed_calls) == 2
    assert all("update_ticket" in c and "refused (acl)" in c for c in changed_calls)
    assert any(run.request_id in c for c in changed_calls)
