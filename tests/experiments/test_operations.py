"""Datasets from a filter; running experiments: their token budget, how many items run at once,
a judge, the audit of who did what, retention, JSON Lines export and the CLI's progress."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from experiments import services
from experiments.models import DatasetItem, Experiment, ExperimentItem
from harness.models import Run, Tenant
from tests.experiments.helpers import make_dataset, recorded_runs
from tests.factories import write_script
from tests.runs import ADMIN
from traces.models import AuditRecord
from traces.services import delete_expired_traces, verify_chain


def dataset_by_filter(client, name: str, run_filter: dict, runs: list[str] | None = None):
    return client.post(
        "/api/v1/datasets", {"name": name, "runs": runs or [], "filter": run_filter}, **ADMIN
    )


def test_a_dataset_is_made_from_a_filter_of_ended_production_runs(acme):
    runs = recorded_runs(acme)  # ticket (clean), parcel (clean), close (corrected)
    cases = [
        ({"agent": "ticket-assistant", "status": ["succeeded"]}, 3),
        ({"outcome": ["corrected"]}, 1),
        ({"outcome": ["clean"], "limit": 1}, 1),
        ({"label": "customer_content"}, 2),  # the runs that read a ticket
        ({"agent": "another-agent"}, 0),
        ({"created_before": "2000-01-01T00:00:00Z"}, 0),
        ({"created_after": "2000-01-01T00:00:00Z"}, 3),
    ]
    for number, (run_filter, expected) in enumerate(cases):
        made = dataset_by_filter(acme, f"f{number}", run_filter)
        assert made.status_code == 201, (run_filter, made.content)
        assert made.json()["items"] == expected, run_filter
    corrected = DatasetItem.objects.get(dataset__name="f1")
    assert str(corrected.run_id) == runs[2]
    # An experiment's runs are not production runs: a filter never takes them.
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"), "f0", {"model": "scripted:demo"}, enqueue=False
    )
    services.run_item(str(experiment.items.first().id))
    assert dataset_by_filter(acme, "again", cases[0][0]).json()["items"] == 3
    # Items can be added by a filter too.
    added = acme.post("/api/v1/datasets/f4/items", {"filter": {"outcome": ["corrected"]}}, **ADMIN)
    assert added.json()["items"] == 1


def test_an_inverted_time_range_is_refused_and_makes_nothing(acme):
    recorded_runs(acme)
    refused = dataset_by_filter(
        acme,
        "bad",
        {"created_after": "2030-01-01T00:00:00Z", "created_before": "2020-01-01T00:00:00Z"},
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "invalid_range"
    assert not DatasetItem.objects.exists()


def test_a_spent_token_budget_stops_the_experiment_clearly(acme):
    dataset = make_dataset(acme, recorded_runs(acme))
    started = acme.post(
        "/api/v1/experiments",
        {"dataset": dataset["id"], "candidate": {"model": "scripted:demo"}, "token_budget": 50},
        **ADMIN,
    )
    assert started.status_code == 202, started.content
    rows = list(ExperimentItem.objects.filter(experiment_id=started.json()["id"]))

    services.run_item(str(rows[0].id))  # the run may spend at most the 50 tokens left
    first = Run.objects.get(experiment=True)
    assert first.status == "budget_exceeded", first.status_detail
    services.run_item(str(rows[1].id))

    report = acme.get(started.json()["links"]["self"]).json()
    assert report["status"] == "budget_exceeded"
    assert report["progress"] == {"done": 3, "total": 3}
    assert report["budget"]["tokens"] == 50
    assert report["budget"]["used"] == first.prompt_tokens + first.completion_tokens
    assert [item["status"] for item in report["items"]] == ["succeeded", "cancelled", "cancelled"]
    assert "token budget is spent" in report["items"][1]["error"]
    assert Run.objects.filter(experiment=True).count() == 1  # nothing ran after it was spent


def test_items_are_sent_a_few_at_a_time_and_each_end_sends_the_next(acme):
    dataset = make_dataset(acme, recorded_runs(acme))
    started = acme.post(
        "/api/v1/experiments",
        {"dataset": dataset["id"], "candidate": {"model": "scripted:demo"}, "concurrency": 2},
        **ADMIN,
    ).json()
    rows = ExperimentItem.objects.filter(experiment_id=started["id"]).order_by("item__position")
    assert [row.sent_at is not None for row in rows] == [True, True, False]

    services.run_item(str(rows[0].id))

    assert all(row.sent_at is not None for row in rows.all())


def test_concurrency_never_exceeds_the_tenants_concurrent_runs(acme, settings):
    from policy.models import TenantLimits

    TenantLimits.objects.update_or_create(tenant="acme", defaults={"max_concurrent_runs": 1})
    dataset = make_dataset(acme, recorded_runs(acme))
    started = acme.post(
        "/api/v1/experiments",
        {"dataset": dataset["id"], "candidate": {"model": "scripted:demo"}, "concurrency": 8},
        **ADMIN,
    ).json()
    assert Experiment.objects.get(id=started["id"]).concurrency == 1
    sent = ExperimentItem.objects.filter(experiment_id=started["id"], sent_at__isnull=False)
    assert sent.count() == 1


def test_a_judge_verdict_is_stored_beside_the_score_and_never_decides_it(acme, tmp_path):
    make_dataset(acme, recorded_runs(acme)[:1], "one")
    verdict = {"verdict": "fail", "reasoning": "It does not say when the SLA was due."}
    judge = write_script(tmp_path, [{"text": json.dumps(verdict)}])
    started = acme.post(
        "/api/v1/experiments",
        {
            "dataset": "one",
            "candidate": {"model": "scripted:demo"},
            "judge": {"model": f"scripted:{judge}", "rubric": "The answer gives the SLA due."},
        },
        **ADMIN,
    ).json()
    row = services.run_item(str(ExperimentItem.objects.get(experiment_id=started["id"]).id))

    assert row.verdict == "same"  # the trajectory and answer are the recording's
    assert row.score["judge"]["verdict"] == "fail"
    assert row.score["judge"]["reasoning"] == verdict["reasoning"]
    report = acme.get(f"/api/v1/experiments/{started['id']}").json()
    assert report["summary"]["judge"] == {"pass": 0, "fail": 1, "other": 0}
    assert report["items"][0]["judge"]["verdict"] == "fail"
    assert report["judge"]["rubric"] == "The answer gives the SLA due."
    assert report["budget"]["used"] > row.run.prompt_tokens + row.run.completion_tokens


def test_a_judge_that_does_not_answer_json_is_unreadable_not_a_verdict(acme, tmp_path):
    dataset = make_dataset(acme, recorded_runs(acme)[:1], "one")
    judge = write_script(tmp_path, [{"text": "Looks fine to me!"}])
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"),
        dataset["id"],
        {"model": "scripted:demo"},
        enqueue=False,
        judge={"model": f"scripted:{judge}", "rubric": "Be right."},
    )
    row = services.run_item(str(experiment.items.get().id))
    assert (row.verdict, row.score["judge"]["verdict"]) == ("same", "unreadable")
    assert row.score["judge"]["reasoning"] == "Looks fine to me!"


def test_who_made_and_ran_what_is_in_the_audit_chain(acme):
    runs = recorded_runs(acme)
    dataset = make_dataset(acme, runs[:2], "audited")
    url = f"/api/v1/datasets/{dataset['id']}"
    acme.post(f"{url}/items", {"runs": runs[2:]}, **ADMIN)
    item = acme.get(url).json()["item_list"][0]["id"]
    acme.send("patch", f"{url}/items/{item}", {"expectations": {"must_call": ["x"]}}, **ADMIN)
    acme.send("delete", f"{url}/items/{item}", **ADMIN)
    started = acme.post(
        "/api/v1/experiments", {"dataset": "audited", "candidate": {"model": "m:x"}}, **ADMIN
    ).json()
    acme.post(f"/api/v1/experiments/{started['id']}/cancel", {}, **ADMIN)
    acme.post(f"/api/v1/experiments/{started['id']}/cancel", {}, **ADMIN)  # once is audited

    records = AuditRecord.objects.filter(tenant="acme", kind="admin_action").order_by("id")
    actions = [(r.payload["action"], r.payload["actor"].split(" via ")[0]) for r in records]
    assert actions == [
        ("dataset.created", "alice"),
        ("dataset.items_added", "alice"),
        ("dataset.expectations_set", "alice"),
        ("dataset.item_removed", "alice"),
        ("experiment.started", "alice"),
        ("experiment.cancelled", "alice"),
    ]
    assert records[0].payload["runs"] == runs[:2]
    assert records[4].payload["candidate"] == {"model": "m:x"}
    report = verify_chain("acme")
    assert report.ok, report.fault


def test_retention_deletes_a_runs_dataset_copies_with_its_traces(acme):
    runs = recorded_runs(acme)
    make_dataset(acme, runs, "kept")
    assert DatasetItem.objects.count() == 3

    delete_expired_traces(now=timezone.now() + timedelta(days=10_000))

    assert not DatasetItem.objects.exists()
    assert Run.objects.filter(id__in=runs).count() == 3  # the runs themselves stay


def test_an_experiment_exports_as_json_lines(acme):
    dataset = make_dataset(acme, recorded_runs(acme))
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"), dataset["id"], {"model": "scripted:demo"}, enqueue=False
    )
    for row in experiment.items.all():
        services.run_item(str(row.id))

    response = acme.get(f"/api/v1/experiments/{experiment.id}/export")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert [line["type"] for line in lines] == ["experiment", "item", "item", "item"]
    assert lines[0]["summary"]["same"] == 3
    assert {line["verdict"] for line in lines[1:]} == {"same"}
    listed = acme.get("/api/v1/experiments").json()["experiments"]
    assert [e["id"] for e in listed] == [str(experiment.id)]
    assert listed[0]["progress"] == {"done": 3, "total": 3}


@pytest.mark.parametrize("budget", [None, "1"])
def test_the_cli_shows_a_progress_bar_and_its_budget(acme, budget):
    make_dataset(acme, recorded_runs(acme), "gate")
    out, err = io.StringIO(), io.StringIO()
    args = ["--tenant", "acme", "--dataset", "gate", "--model", "scripted:demo"]
    try:
        call_command(
            "run_experiment",
            *args,
            *(["--token-budget", budget, "--max-regressions", "3"] if budget else []),
            stdout=out,
            stderr=err,
        )
    except SystemExit as exit_:
        pytest.fail(f"exited {exit_.code}: {out.getvalue()}")
    assert "] 0/3" in err.getvalue()
    assert f"[{'#' * 30}] 3/3" in err.getvalue()
    assert ("status budget_exceeded" in out.getvalue()) == bool(budget), out.getvalue()
