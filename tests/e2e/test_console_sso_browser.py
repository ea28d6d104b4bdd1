"""Console single sign-on in a real browser (Playwright driving Debian's Chromium) against a
real OpenID Provider (tests/support/oidc.py): an operator clicks *Sign in with single sign-on*,
signs in at the provider, lands in the console with the tenant and role their group maps to,
signs out (here and at the provider), and must sign in at the provider again."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission

from harness.models import StaffTenantGrant
from tests.support.oidc import run_provider, turn_sso_on

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"Chromium is required: {CHROMIUM} is not installed (apt install chromium)",
)


def sign_in_at_provider_page(page, login: str) -> None:
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any")
    page.click("button[type=submit]")
    page.wait_for_selector("button:has-text('Continue')")
    page.click("button:has-text('Continue')")


def test_an_operator_signs_in_through_the_provider_and_signs_out(
    demo, live_server, settings, tmp_path
):
    from playwright.sync_api import sync_playwright

    operator, _ = Group.objects.get_or_create(name="operator")
    operator.permissions.set(Permission.objects.filter(codename="view_run"))
    with run_provider(tmp_path, [f"{live_server.url}/oidc/callback/"]) as provider:
        turn_sso_on(settings, provider.issuer)
        provider.set_groups("olga", ["harness-acme-operators"])

        # No database access inside this block (Playwright's sync API runs an event loop).
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"{live_server.url}/admin/harness/run/")
            page.click("#sso-button")
            at_provider = page.url
            sign_in_at_provider_page(page, "olga")
            page.wait_for_url("**/admin/harness/run/")
            user_tools = page.locator("#user-tools").inner_text()
            runs_title = page.locator("h1").first.inner_text()

            page.click("#logout-form button")
            page.click("button[value=yes]")
            page.wait_for_url("**/admin/login/")
            after_logout = page.goto(f"{live_server.url}/admin/harness/run/")
            back_at_login = page.url
            page.click("#sso-button")
            page.wait_for_selector("input[name=login]")  # the provider asks again
            asked_again = page.url.startswith(provider.issuer)
            browser.close()

    assert at_provider.startswith(provider.issuer)
    assert "OLGA" in user_tools.upper()
    assert "run" in runs_title.lower()
    assert after_logout.status == 200
    assert "/admin/login/" in back_at_login
    assert asked_again
    olga = get_user_model().objects.get(username="olga")
    assert list(
        StaffTenantGrant.objects.filter(user=olga).values_list("tenant__slug", flat=True)
    ) == ["acme"]
