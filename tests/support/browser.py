"""The console in a real browser: Debian's Chromium driven by Playwright (never Playwright's own
browser downloads). ``HARNESS_SCREENSHOT_DIR`` (e.g. ``docs/screenshots``) keeps screenshots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"Chromium is required: {CHROMIUM} is not installed (apt install chromium)",
)


def login(page, url: str, username: str, password: str, next_path: str) -> None:
    page.goto(f"{url}/admin/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_path}")


def save(page, locator, name: str) -> None:
    screenshots = os.environ.get("HARNESS_SCREENSHOT_DIR", "")
    if screenshots:
        Path(screenshots).mkdir(parents=True, exist_ok=True)
        (locator or page).screenshot(path=str(Path(screenshots) / name))
