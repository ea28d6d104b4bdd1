"""Replay and what-if in a real browser (1440 x 900), on the demo data: a demo run replayed
after a rule that refuses its assignment shows the refusal as a red "Now refused" badge, the
check and the rule's name (a link to the rule), the answer's change as a diff, and a link to
the call on the run's page that lands on it (unfolding its step if folded); the what-if
preview of a deny shows the calls it would refuse, badged likewise.

``HARNESS_SCREENSHOT_DIR`` (e.g. ``docs/screenshots``) keeps ``replay.png`` and
``what-if.png``."""

from __future__ import annotations

from harness.models import Run
from policy import services as policy
from policy.models import PolicyRule
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, login, needs_chromium, save

pytestmark = needs_chromium

DEMO = {"agent": "ticket-assistant", "user": "bob", "input": "Why T-20250318-007?"}
RULE = {
    "name": "assignments-stay-manual",
    "kind": "call",
    "tool": "update_ticket",
    "match": {"action": "assign"},
    "effect": "refuse",
    "description": "Tickets are assigned by the desk lead, not by the assistant.",
}
RED = "rgb(251, 227, 227)"  # .run-status.status-failed (timeline.css)
GREEN = "rgb(227, 243, 227)"  # .run-status.status-ok


def test_a_replayed_refusal_reads_as_a_red_verdict_with_its_rule_diff_and_call_link(
    acme, operator, live_server
):
    from playwright.sync_api import sync_playwright

    acme.post("/api/v1/runs", DEMO)
    acme.post("/api/v1/runs", DEMO | {"input": "T-20250318-007 为什么没人处理? Call 13812345678"})
    run = Run.objects.filter(input=DEMO["input"]).get()
    policy.create_rule("acme", RULE, actor="tests")
    rule_pk = PolicyRule.objects.get(tenant="acme", name=RULE["name"]).pk

    # No database access inside this block (Playwright's sync API runs an event loop).
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        login(page, live_server.url, *operator, f"/admin/harness/run/{run.pk}/replay/")
        diverged = page.locator("tr.replay-call.diverged")
        rows = diverged.count()
        now = diverged.locator(".verdict-now .verdict-badge")
        verdict = (now.inner_text(), now.get_attribute("title"), _background(now))
        then = diverged.locator(".verdict-then .verdict-badge")
        verdict_then = (then.inner_text(), _background(then))
        badge = diverged.locator(".divergence-badge")
        divergence = (badge.inner_text(), badge.get_attribute("title"), _background(badge))
        check = diverged.locator(".verdict-now .verdict-check").inner_text()
        rule = diverged.locator(".verdict-now a.rule-link")
        rule_text, rule_href = rule.inner_text(), rule.get_attribute("href")
        added = page.locator("pre.answer-diff ins").first
        added_text, added_colour = added.inner_text(), _background(added)
        kept = page.locator("pre.answer-diff").inner_text()
        save(page, None, "replay.png")

        diverged.locator("a.call-link").click()
        page.wait_for_url("**/change/#call-call_2_1")
        target = page.locator("#call-call_2_1")
        landed = target.is_visible() and _in_view(page, "#call-call_2_1")
        # Folded (as a long run's earlier steps are), the link still lands on the call.
        page.evaluate("document.querySelectorAll('details.step').forEach(d => d.open = false)")
        hidden = not target.is_visible()
        page.evaluate("location.hash = ''")
        page.evaluate("location.hash = '#call-call_2_1'")
        target.wait_for(state="visible")
        unfolded = _in_view(page, "#call-call_2_1")

        page.goto(f"{live_server.url}{rule_href}")
        rule_page = page.locator("#content").inner_text()
        browser.close()

    assert rows == 1
    assert verdict == (
        "Refused",
        "A check of the decision chain refuses the call: it does not run.",
        RED,
    )
    assert verdict_then == ("Allowed", GREEN)
    assert divergence == (
        "Now refused",
        "The recorded run let this call through; today it is refused.",
        RED,
    )
    assert check == "Call rule"
    assert (rule_text, rule_href) == (RULE["name"], f"/admin/policy/policyrule/{rule_pk}/change/")
    assert added_text.startswith("Note: some actions in this run did not complete")
    assert RULE["name"] in added_text
    assert added_colour == "rgb(230, 255, 236)"  # green: only in today's answer
    assert "agent-li" in kept
    assert landed
    assert hidden
    assert unfolded
    assert RULE["name"] in rule_page


def test_the_what_if_of_a_deny_badges_each_call_it_would_refuse(acme, operator, live_server):
    from playwright.sync_api import sync_playwright

    acme.post("/api/v1/runs", DEMO)
    acme.post("/api/v1/runs", DEMO | {"input": "T-20250318-007 为什么没人处理? Call 13812345678"})

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        login(page, live_server.url, *operator, "/admin/harness/run/preview-policy/")
        page.select_option("#id_tenant", label="acme")
        page.fill("#id_subject", "bob")
        page.fill("#id_scope", "ticket:write")
        page.select_option("#id_effect", "deny")
        page.click("input[name=preview]")
        page.wait_for_selector("#what-if-changes")
        rows = page.locator("tr.what-if-change")
        texts = rows.all_inner_texts()
        colours = [_background(b) for b in rows.locator(".verdict-now .verdict-badge").all()]
        call_links = rows.locator("a.call-link").evaluate_all("as => as.map(a => a.href)")
        page.locator("#what-if-changes").scroll_into_view_if_needed()
        save(page, None, "what-if.png")
        page.goto(call_links[0])
        landed = _in_view(page, "#" + call_links[0].split("#", 1)[1])
        browser.close()

    assert len(texts) == 2
    assert all("update_ticket" in t and "Refused" in t and "ACL" in t for t in texts), texts
    assert all("bob ticket:write deny" in t for t in texts), texts
    assert colours == [RED, RED]
    assert all("/change/#call-call_2_1" in link for link in call_links)
    assert landed


def _background(locator) -> str:
    return locator.evaluate("e => getComputedStyle(e).backgroundColor")


def _in_view(page, selector: str) -> bool:
    return page.evaluate(
        """s => { const r = document.querySelector(s).getBoundingClientRect();
                  return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; }""",
        selector,
    )
