"""An experiment's items go through the broker to a real worker process
(``experiments.run_item``)."""

import pytest

from tests.experiments.helpers import desk, make_dataset, recorded_runs
from tests.runs import ADMIN, wait_until

pytestmark = pytest.mark.worker


def test_a_worker_runs_each_item_of_an_experiment(acme, celery_worker):
    dataset = make_dataset(acme, recorded_runs(acme))
    before = desk()

    started = acme.post(
        "/api/v1/experiments",
        {"dataset": dataset["name"], "candidate": {"model": "scripted:demo"}},
        **ADMIN,
    )

    assert started.status_code == 202
    url = started.json()["links"]["self"]
    report = wait_until(
        lambda: (body := acme.get(url).json())["status"] in ("succeeded", "failed") and body,
        timeout_s=90,
    )
    assert report["status"] == "succeeded", celery_worker.log()
    assert report["progress"] == {"done": 3, "total": 3}
    assert report["summary"]["same"] == 3, report
    assert report["summary"]["executed"] == 0
    assert desk() == before
    assert "experiments.run_item" in celery_worker.log()
