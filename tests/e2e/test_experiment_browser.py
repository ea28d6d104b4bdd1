"""The console's experiment pages in a real browser (Playwright driving Debian's Chromium): a
staff user selects runs in the run list and adds them to a dataset ("Add to dataset"), then
opens an experiment: progress, summary, distributions, the items filtered by verdict, one
item's trajectories side by side with the first divergence marked and the answers diffed,
the comparison with another experiment on the dataset, and the JSON Lines export.

Prerequisite: Chromium at ``/usr/bin/chromium``. Set ``HARNESS_SCREENSHOT_DIR`` (e.g.
``docs/screenshots``) to save ``experiment.png`` and ``experiment-item.png`` there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from experiments import services
from experiments.models import Dataset
from harness.models import Run, StaffTenantGrant, Tenant
from policy import services as policy
from tests.experiments.helpers import SEARCH_FIRST, demo_variant, recorded_runs

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"Chromium is required: {CHROMIUM} is not installed (apt install chromium)",
)


@pytest.fixture
def analyst(demo) -> tuple[str, str]:
    """A staff user granted acme, who may view everything there and make datasets."""
    user = get_user_model().objects.create_user("analyst", password="analyst-pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(codename__startswith="view_")
        | Permission.objects.filter(codename="add_dataset")
    )
    StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug="acme"))
    policy.add_permission("acme", "analyst", "dataset:write", "allow", "test")
    return "analyst", "analyst-pw"


def run_experiment(model: str) -> str:
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"), "from-console", {"model": model}, enqueue=False
    )
    for row in experiment.items.all():
        services.run_item(str(row.id))
    return str(experiment.id)


def test_runs_go_into_a_dataset_and_an_experiment_reads_side_by_side(
    acme, analyst, live_server, tmp_path
):
    from playwright.sync_api import sync_playwright

    runs = recorded_runs(acme)
    first_request_id = Run.objects.get(id=runs[0]).request_id
    screenshots = os.environ.get("HARNESS_SCREENSHOT_DIR", "")
    username, password = analyst

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{live_server.url}/admin/login/?next=/admin/harness/run/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.wait_for_url("**/admin/harness/run/")
        page.locator("#result_list tbody input.action-select").nth(0).check()
        page.locator("#result_list tbody input.action-select").nth(1).check()
        page.locator("#result_list tbody input.action-select").nth(2).check()
        page.select_option("select[name=action]", "add_to_dataset")
        page.click("button[name=index]")
        page.wait_for_selector("#add-to-dataset")
        page.fill("#id_dataset", "from-console")
        page.click("#add-to-dataset input[name=apply]")
        page.wait_for_selector("ul.messagelist")
        added_message = page.locator("ul.messagelist").inner_text()
        browser.close()

    dataset = Dataset.objects.get(name="from-console")
    assert dataset.items.count() == 3
    assert "3 run(s) added to dataset from-console" in added_message
    same = run_experiment("scripted:demo")
    other = run_experiment(demo_variant(tmp_path, lambda s: s["responses"].insert(0, SEARCH_FIRST)))
    first_item = services.get_experiment(Tenant.objects.get(slug="acme"), other).items.first()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(
            f"{live_server.url}/admin/login/?next=/admin/experiments/experiment/{other}/change/"
        )
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.wait_for_selector("#experiment")
        progress = page.locator("#progress-text").inner_text()
        same_count = page.locator("#experiment-summary .n-same").inner_text()
        metrics = page.locator("#distributions .distribution")
        shown_metrics = [
            metrics.nth(i).get_attribute("data-metric") for i in range(metrics.count())
        ]
        candidate_bars = page.locator(".bar-candidate").count()
        verdicts = page.locator("tr.experiment-item").evaluate_all(
            "rows => rows.map(r => r.dataset.verdict)"
        )
        if screenshots:
            Path(screenshots).mkdir(parents=True, exist_ok=True)
            page.locator("#experiment").screenshot(path=str(Path(screenshots) / "experiment.png"))
        shown_verdict = verdicts[0]
        page.click(f"#verdict-filter a.verdict-link:text-is('{shown_verdict}')")
        page.wait_for_url(f"**?verdict={shown_verdict}")
        filtered = page.locator("tr.experiment-item").evaluate_all(
            "rows => rows.map(r => r.dataset.verdict)"
        )

        page.goto(f"{live_server.url}/admin/experiments/experiment/{other}/item/{first_item.id}/")
        page.wait_for_selector("#trajectories")
        divergence = page.locator("tr.first-divergence")
        divergence_step = divergence.get_attribute("data-step")
        divergence_tools = divergence.locator("code.tool").all_inner_texts()
        highlighted = divergence.locator("td").first.evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        diff_added = page.locator("#answer-diff ins").count()
        diff_removed = page.locator("#answer-diff del").count()
        if screenshots:
            page.locator("#experiment-item").screenshot(
                path=str(Path(screenshots) / "experiment-item.png")
            )

        page.goto(f"{live_server.url}/admin/experiments/experiment/{other}/compare/{same}/")
        page.wait_for_selector("#compare-items")
        compared_rows = page.locator("tr.compare-item").count()
        differing = page.locator("tr.compare-item.differs").count()

        with page.expect_download() as download:
            page.goto(f"{live_server.url}/admin/experiments/experiment/{other}/change/")
            page.click("#export")
        exported = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
        browser.close()

    assert progress == "3/3 done"
    assert same_count == "0"
    assert shown_metrics == ["cost_usd", "latency_ms", "steps"]
    assert candidate_bars >= 3
    assert set(verdicts) <= {"diverged", "regression"}
    assert filtered
    assert set(filtered) == {shown_verdict}
    assert divergence_step == "1"
    recorded_first = first_item.score["first_divergence"]["baseline"]
    assert recorded_first in ("get_ticket", "update_ticket")
    assert divergence_tools == [recorded_first, "search_tickets"]
    assert highlighted not in ("rgba(0, 0, 0, 0)", "transparent")
    if first_item.score["answer"]["changed"]:
        assert diff_added + diff_removed > 0
    assert compared_rows == 3
    assert differing == 3  # same (scripted:demo) against diverged/regression on every item
    assert [json.loads(line)["type"] for line in exported] == ["experiment", *["item"] * 3]
    assert first_request_id  # the run list showed the recorded runs
