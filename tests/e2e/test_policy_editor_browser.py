"""The console's Policy pages in a real browser, on the demo data: a tenant admin opens the rules
in effect for acme (the built-in ones marked), writes a call rule in the structured editor,
is told which field is wrong, previews the rule over acme's recent runs, saves it and finds it
at the top of the change log.

``HARNESS_SCREENSHOT_DIR`` (e.g. ``docs/screenshots``) keeps ``policies.png`` and
``policy-editor.png`` (1440x900)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from harness.models import StaffTenantGrant, Tenant
from policy import services as policy
from policy.models import PolicyChange
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, login, needs_chromium, save

pytestmark = needs_chromium


@pytest.fixture
def tenant_admin(demo) -> tuple[str, str]:
    """alice: the demo's tenant_admin of acme (policy:admin there), as a console user granted
    acme who may view everything and edit rules and Casbin lines."""
    user = get_user_model().objects.create_user("alice", password="alice-pw", is_staff=True)
    edits = ["add_policyrule", "change_policyrule", "delete_policyrule"]
    user.user_permissions.set(
        [
            *Permission.objects.filter(codename__startswith="view_"),
            *Permission.objects.filter(codename__in=edits),
        ]
    )
    StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug="acme"))
    return "alice", "alice-pw"


def test_a_tenant_admin_edits_previews_and_saves_a_rule_and_finds_it_in_the_change_log(
    varied_runs, tenant_admin, live_server
):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        login(page, live_server.url, *tenant_admin, "/admin/policy/")
        page.get_by_role("link", name="Rules in effect and change log").click()
        page.wait_for_selector("#policies")
        built_in = page.locator("#built-in-rules tr.built-in").all_inner_texts()
        acl_lines = page.locator("#acl-permissions tr.acl-line").count()
        save(page, None, "policies.png")

        page.click("a.policy-edit-link")
        page.wait_for_selector("#policy-editor")
        page.select_option("#id_kind", "call")
        label_hidden = page.locator(".policy-form [data-field=label]").is_hidden()
        page.fill("#id_name", "no-ticket-updates")
        page.fill("#id_tool", "update ticket")  # a space: not a tool name
        page.fill("#id_match", "")
        page.select_option("#id_effect", "refuse")
        page.fill("#id_description", "Tickets are changed by people, not by the assistant.")
        page.click("input[name=preview]")
        page.wait_for_selector("#policy-editor")
        tool_error = page.locator(".field-tool .errorlist").inner_text()
        no_preview = page.locator("#policy-preview").count()

        page.fill("#id_tool", "update_ticket")
        page.click("input[name=preview]")
        page.wait_for_selector("#policy-preview")
        raw = json.loads(page.locator("#id_raw").input_value())
        added = page.locator("pre.policy-diff .diff-added").all_inner_texts()
        changed = page.locator("tr.what-if-change").all_inner_texts()
        # The form, the raw view and the runs it changes in one screen: the header scrolled off.
        page.locator("#policy-edit-form").evaluate(
            "e => window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 8)"
        )
        save(page, None, "policy-editor.png")

        page.click("#save-change")
        page.wait_for_url("**/admin/policy/effective/?tenant=acme*")
        newest = page.locator("#policy-changes tr.policy-change").first.inner_text()
        listed = page.locator("#call-rules tr.policy-rule").all_inner_texts()
        browser.close()

    assert [row.split()[0] for row in built_in] == [
        "default-pii-no-external",
        "default-escalation-approval",
    ]
    assert all("built-in" in row and "Cannot be edited" in row for row in built_in)
    assert acl_lines >= 3
    assert label_hidden
    assert "tool 'update ticket' must be a tool name, or '*'" in tool_error
    assert no_preview == 0
    assert raw == {
        "op": "add",
        "rule": {
            "name": "no-ticket-updates",
            "kind": "call",
            "tool": "update_ticket",
            "match": {},
            "effect": "refuse",
            "description": "Tickets are changed by people, not by the assistant.",
            "enabled": True,
        },
    }
    assert added == [
        "+ rule        no-ticket-updates: kind=call, effect=refuse, tool=update_ticket"
    ]
    assert changed, "the runs' update_ticket calls would now be refused"
    # The what-if rows show the coloured verdict badges ("Refused", with its check).
    assert all("update_ticket" in row and "Refused" in row for row in changed)
    assert "admin:alice" in newest
    assert "rule no-ticket-updates" in newest
    saved = PolicyChange.objects.filter(tenant="acme").first()
    assert saved.created_at.isoformat(timespec="microseconds") in newest
    assert [row.split()[0] for row in listed] == ["no-ticket-updates"]
    assert policy.get_rule("acme", "no-ticket-updates").effect == "refuse"
