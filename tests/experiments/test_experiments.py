"""Experiments: dataset items re-executed by the real engine with a candidate model route,
tools answered from the recording (docs/experiments.md)."""

from __future__ import annotations

from typing import Any

import pytest

from experiments import services
from experiments.models import DatasetItem, ExperimentItem
from harness.models import Run, Tenant
from harness.reports import CostFilter, cost_report
from tests.experiments.helpers import (
    SEARCH_FIRST,
    demo_variant,
    desk,
    make_dataset,
    recorded_runs,
)
from tests.runs import ADMIN


def run_experiment(client: Any, dataset: str, model: str) -> dict[str, Any]:
    """POST the experiment (202), then do a worker's job in this process: each item."""
    response = client.post(
        "/api/v1/experiments",
        {"dataset": dataset, "candidate": {"model": model}, "tools": "recorded"},
        **ADMIN,
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued"
    queued = client.get(body["links"]["self"]).json()
    assert queued["progress"] == {"done": 0, "total": 3}
    for row in ExperimentItem.objects.filter(experiment_id=body["id"]):
        services.run_item(str(row.id))
    return client.get(body["links"]["self"]).json()


def test_the_same_model_gives_three_same_and_executes_nothing(acme, tmp_path):
    dataset = make_dataset(acme, recorded_runs(acme))
    assert dataset["items"] == 3
    before = desk()

    report = run_experiment(acme, dataset["id"], "scripted:demo")

    assert report["status"] == "succeeded"
    assert report["progress"] == {"done": 3, "total": 3}
    summary = report["summary"]
    assert (summary["same"], summary["regressions"], summary["errors"]) == (3, 0, 0)
    assert summary["off_record"] == 0
    assert summary["executed"] == 0
    for item in report["items"]:
        assert item["verdict"] == "same", item
        assert item["trajectory"] == "same"
        assert item["tool_calls"]["executed"] == 0
        assert item["answer"]["changed"] is False
    # The first item's recorded calls (get_ticket, update_ticket, notify_user) came from
    # the record; the failing update_ticket of the third came back as its recorded failure.
    assert [i["tool_calls"]["from_record"] for i in report["items"]] == [3, 1, 1]
    assert report["items"][2]["outcome"]["candidate"]["outcome"] == "corrected"
    assert desk() == before  # update_ticket and notify_user ran again on nothing real
    runs = Run.objects.filter(experiment=True)
    assert runs.count() == 3
    assert {run.model_route for run in runs} == {"scripted:demo"}


def test_a_model_that_calls_another_tool_first_diverges_at_step_one(acme, tmp_path):
    dataset = make_dataset(acme, recorded_runs(acme))
    model = demo_variant(tmp_path, lambda s: s["responses"].insert(0, SEARCH_FIRST))
    before = desk()

    report = run_experiment(acme, dataset["name"], model)

    for item in report["items"]:
        assert item["verdict"] in ("diverged", "regression"), item
        assert item["first_divergence"]["step"] == 1
        assert item["first_divergence"]["candidate"] == "search_tickets"
        assert item["tool_calls"]["executed"] == 0
        assert item["tool_calls"]["off_record"] == 1
    assert report["summary"]["off_record"] == 3
    assert report["summary"]["same"] == 0
    assert desk() == before


def test_calls_match_by_canonical_arguments(acme, tmp_path):
    """The candidate sends the recorded arguments with keys in another order and a number
    written 1.0: still the recorded call, answered from the record."""
    dataset = make_dataset(acme, recorded_runs(acme)[:1], "one")

    def reorder(scenario: dict[str, Any]) -> None:
        for response in scenario["responses"]:
            for call in response.get("tool_calls", []):
                call["arguments"] = dict(reversed(list(call["arguments"].items())))

    model = demo_variant(tmp_path, reorder)
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"), dataset["id"], {"model": model}, enqueue=False
    )
    row = services.run_item(str(experiment.items.get().id))
    assert row.verdict == "same", row.score
    assert row.score["tool_calls"] == {"executed": 0, "from_record": 3, "off_record": 0}


def test_an_off_record_call_is_a_tool_error_and_counted(acme, tmp_path):
    dataset = make_dataset(acme, recorded_runs(acme)[:1], "one")

    def other_ticket(scenario: dict[str, Any]) -> None:
        first = scenario["responses"][0]["tool_calls"][0]
        if first["name"] == "get_ticket":
            first["arguments"] = {"ticket_id": "T-20250324-019"}

    model = demo_variant(tmp_path, other_ticket)
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"), dataset["id"], {"model": model}, enqueue=False
    )
    row = services.run_item(str(experiment.items.get().id))
    assert row.score["tool_calls"] == {"executed": 0, "from_record": 2, "off_record": 1}
    assert row.score["first_divergence"] == {
        "step": 1,
        "baseline": "get_ticket",
        "candidate": "get_ticket",
    }
    result = next(m for m in row.run.messages if m["role"] == "tool")
    assert '"off_record"' in result["content"]
    assert row.verdict in ("diverged", "regression")


def test_experiment_runs_are_left_out_of_cost_reports(acme):
    dataset = make_dataset(acme, recorded_runs(acme))
    report_before = cost_report([], CostFilter(tenants=["acme"]))["totals"]["runs"]
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"), dataset["id"], {"model": "scripted:demo"}, enqueue=False
    )
    for row in experiment.items.all():
        services.run_item(str(row.id))
    assert Run.objects.filter(tenant__slug="acme").count() == report_before + 3
    assert cost_report([], CostFilter(tenants=["acme"]))["totals"]["runs"] == report_before


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (
            {"dataset": "demo-three", "candidate": {"model": "scripted:demo"}, "tools": "live"},
            422,
            "live_tool_refused",
        ),
        ({"dataset": "demo-three", "candidate": {"prompt": "x"}}, 400, "invalid_request"),
        ({"dataset": "demo-three", "candidate": {}}, 422, "unsupported_candidate"),
        (
            {"dataset": "demo-three", "candidate": {"agent": {"name": "x"}}},
            422,
            "unsupported_candidate",
        ),
        (
            {
                "dataset": "demo-three",
                "candidate": {"model": "m"},
                "judge": {"model": "nope:x", "rubric": "r"},
            },
            422,
            "invalid_judge",
        ),
        ({"dataset": "nope", "candidate": {"model": "scripted:demo"}}, 404, "dataset_not_found"),
    ],
)
def test_unsupported_experiments_are_refused_clearly(acme, body, status, code):
    make_dataset(acme, recorded_runs(acme)[:1])
    response = acme.post("/api/v1/experiments", body, **ADMIN)
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]
    assert not ExperimentItem.objects.exists()


def test_a_cancelled_experiment_runs_no_more_items(acme):
    dataset = make_dataset(acme, recorded_runs(acme))
    started = acme.post(
        "/api/v1/experiments",
        {"dataset": dataset["id"], "candidate": {"model": "scripted:demo"}},
        **ADMIN,
    ).json()
    rows = list(ExperimentItem.objects.filter(experiment_id=started["id"]))
    services.run_item(str(rows[0].id))  # one item done before the cancel
    runs_before = Run.objects.filter(experiment=True).count()

    cancelled = acme.post(f"/api/v1/experiments/{started['id']}/cancel", {}, **ADMIN)

    assert cancelled.status_code == 200
    body = cancelled.json()
    assert body["status"] == "cancelled"
    assert body["progress"] == {"done": 3, "total": 3}
    assert [item["status"] for item in body["items"]] == ["succeeded", "cancelled", "cancelled"]
    for row in rows[1:]:  # a redelivered task finds nothing to do
        services.run_item(str(row.id))
    assert Run.objects.filter(experiment=True).count() == runs_before == 1


def test_a_broken_expectation_is_a_regression(acme):
    dataset = make_dataset(acme, recorded_runs(acme)[:1], "one")
    item = acme.get(f"/api/v1/datasets/{dataset['id']}").json()["item_list"][0]["id"]
    expectations = {
        "must_not_call": ["notify_user"],
        "assertions": [{"type": "contains", "value": "SLA"}],
    }
    edited = acme.send(
        "patch",
        f"/api/v1/datasets/{dataset['id']}/items/{item}",
        {"expectations": expectations},
        **ADMIN,
    )
    assert edited.status_code == 200, edited.content
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"), "one", {"model": "scripted:demo"}, enqueue=False
    )
    row = services.run_item(str(experiment.items.get().id))
    assert row.score["trajectory"] == "same"
    assert row.verdict == "regression"
    assert [(a["type"], a["passed"]) for a in row.score["assertions"]] == [
        ("must_not_call", False),
        ("contains", True),
    ]


def test_the_candidate_replaces_the_model_and_the_system_prompt():
    from harness.agent_registry import get_agent

    agent = get_agent("ticket-assistant")
    changed = services.candidate_agent(agent, {"model": "scripted:x", "system_prompt": "Be brief."})
    assert (changed.model, changed.system_prompt, changed.fallback_models) == (
        "scripted:x",
        "Be brief.",
        (),
    )
    assert services.candidate_agent(agent, {"model": "m"}).system_prompt == agent.system_prompt


def test_an_item_that_cannot_run_is_an_error_and_the_experiment_still_ends(acme, agent_dir):
    from tests.runs import call, run_script

    recorded = run_script(acme, agent_dir, [call("get_ticket", ticket_id="T-1"), {"text": "ok"}])
    dataset = make_dataset(acme, [recorded["id"], recorded["id"]], "gone")
    assert dataset["items"] == 1  # the same run once
    DatasetItem.objects.update(agent="retired-agent")  # its agent no longer exists
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"), "gone", {"model": "scripted:demo"}, enqueue=False
    )
    row = services.run_item(str(experiment.items.get().id))
    assert (row.status, row.verdict) == ("failed", "error")
    assert "agent" in row.error
    report = acme.get(f"/api/v1/experiments/{experiment.id}").json()
    assert report["status"] == "succeeded"
    assert report["summary"]["errors"] == 1


def test_the_demo_candidate_model_differs_on_the_parcel_question_only(acme):
    """`make run`'s experiment: scripted:demo-candidate searches first on the parcel question
    (scenario 3) and plays the demo everywhere else."""
    runs = recorded_runs(acme)
    made = acme.post(
        "/api/v1/datasets",
        {"name": "demo-scenarios", "filter": {"agent": "ticket-assistant"}},
        **ADMIN,
    )
    assert made.json()["items"] == 3
    before = desk()
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"),
        "demo-scenarios",
        {"model": "scripted:demo-candidate"},
        enqueue=False,
    )
    verdicts = {
        str(row.item.run_id): services.run_item(str(row.id)).verdict
        for row in experiment.items.select_related("item")
    }
    assert verdicts.pop(runs[1]) in ("diverged", "regression")
    assert set(verdicts.values()) == {"same"}
    assert desk() == before
