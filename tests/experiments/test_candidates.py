"""Candidates beyond a model route: a proposed policy change, an agent file, a strategy; and
tools run live (read-only and idempotent ones only, with a permission of their own)."""

from __future__ import annotations

import json
from typing import Any

from experiments import services
from experiments.models import Experiment, ExperimentItem
from harness.agent_registry import get_agent
from harness.models import Run, Tenant
from policy import services as policy
from tests.experiments.helpers import QUESTIONS, demo_variant, desk, make_dataset, recorded_runs
from tests.runs import ADMIN
from traces.models import AuditRecord

DENY_BOB_WRITES = [
    {"op": "add", "permission": {"subject": "bob", "scope": "ticket:write", "effect": "deny"}}
]


def start(client: Any, body: dict[str, Any], **headers: str) -> Any:
    return client.post("/api/v1/experiments", body, **(headers or ADMIN))


def run_all(experiment_id: str) -> list[ExperimentItem]:
    return [
        services.run_item(str(row.id))
        for row in ExperimentItem.objects.filter(experiment_id=experiment_id)
    ]


def test_a_proposed_policy_change_decides_the_experiment_and_is_not_saved(acme):
    dataset = make_dataset(acme, recorded_runs(acme)[:1], "ticket")
    version = policy.current_version("acme")
    started = start(
        acme,
        {
            "dataset": dataset["id"],
            "candidate": {"model": "scripted:demo", "policy_changes": DENY_BOB_WRITES},
        },
    )
    assert started.status_code == 202, started.content
    before = desk()

    (row,) = run_all(started.json()["id"])

    assert row.verdict == "regression", row.score
    assert row.score["trajectory"] == "same"  # the model proposed the same calls
    assert row.score["outcome"]["baseline"]["outcome"] == "clean"
    assert row.score["outcome"]["candidate"]["outcome"] != "clean"
    counts = Run.objects.get(id=row.run_id).outcome_counts
    assert counts.get("refused", 0) + counts.get("denied", 0) == 1, counts  # update_ticket
    assert row.score["tool_calls"] == {"executed": 0, "from_record": 2, "off_record": 0}
    # The proposed change lived in the experiment only.
    assert policy.current_version("acme") == version
    assert policy.authorize_scopes("acme", "bob", ("ticket:write",)).allowed
    assert desk() == before


def test_a_malformed_policy_change_is_refused_before_anything_runs(acme):
    dataset = make_dataset(acme, recorded_runs(acme)[:1], "ticket")
    for change, status, code in (
        ({"op": "remove", "rule": {"name": "default-escalation-approval"}}, 422, None),
        ({"op": "remove", "rule": {"name": "no-such-rule"}}, 404, "rule_not_found"),
        ({"op": "add", "role": {"user": "bob", "role": "x"}, "rule": {}}, 422, None),
    ):
        refused = start(
            acme,
            {"dataset": dataset["id"], "candidate": {"model": "m:x", "policy_changes": [change]}},
        )
        assert refused.status_code == status, refused.content
        assert refused.json()["error"]["code"] == (code or "unsupported_candidate")
        assert refused.json()["error"]["details"].get("field", "policy_changes") == "policy_changes"
    assert not Experiment.objects.exists()


def test_an_agent_file_replaces_the_agent_its_prompt_and_tools(acme):
    dataset = make_dataset(acme, recorded_runs(acme)[:1], "ticket")
    agent = {
        "name": "ticket-assistant",
        "description": "Reads tickets only.",
        "system_prompt": "You only read tickets; you never change them.",
        "tools": ["get_ticket", "notify_user"],
        "model": "scripted:demo",
    }
    started = start(acme, {"dataset": dataset["id"], "candidate": {"agent": agent}})
    assert started.status_code == 202, started.content

    (row,) = run_all(started.json()["id"])

    run = Run.objects.get(id=row.run_id)
    requests = AuditRecord.objects.filter(request_id=run.request_id, kind="model_request")
    assert "You only read tickets" in json.dumps([r.payload for r in requests])
    # update_ticket is not among the candidate's tools: refused, not answered from the record
    assert row.score["tool_calls"]["from_record"] == 2
    assert row.verdict in ("diverged", "regression")


def test_the_candidate_sets_the_strategy_and_the_agent_file_comes_first():
    agent = get_agent("ticket-assistant")
    file = {
        "name": "other",
        "description": "Another agent.",
        "system_prompt": "From the file.",
        "tools": ["get_ticket"],
        "model": "scripted:file",
    }
    changed = services.candidate_agent(
        agent, {"agent": file, "model": "scripted:x", "strategy": "plan_execute"}
    )
    assert (changed.system_prompt, changed.tools, changed.model, changed.strategy) == (
        "From the file.",
        ("get_ticket",),
        "scripted:x",
        "plan_execute",
    )
    assert services.candidate_agent(agent, {"agent": file}).model == "scripted:file"


def test_live_tools_need_their_own_permission(acme):
    dataset = make_dataset(acme, recorded_runs(acme)[:1], "ticket")
    policy.add_permission("acme", "carol", "experiment:run", "allow", "test")
    body = {"dataset": dataset["id"], "candidate": {"model": "scripted:demo"}}
    carol = {"X-Harness-User": "carol"}
    assert start(acme, body, **carol).status_code == 202  # recorded tools: experiment:run
    for tools in ("live", {"live": ["get_ticket"]}):
        refused = start(acme, body | {"tools": tools}, **carol)
        assert refused.status_code == 403, refused.content
        assert refused.json()["error"]["code"] == "permission_denied"
    assert Experiment.objects.count() == 1


def test_live_is_refused_for_a_tool_not_declared_read_only_and_idempotent(acme):
    dataset = make_dataset(acme, recorded_runs(acme)[:1], "ticket")
    body = {"dataset": dataset["id"], "candidate": {"model": "scripted:demo"}}
    for tools, named in (
        ({"live": ["get_ticket", "update_ticket"]}, ["update_ticket"]),
        ({"live": ["no_such_tool"]}, ["no_such_tool"]),
        ("live", ["notify_user", "send_external_email", "update_ticket"]),
    ):
        refused = start(acme, body | {"tools": tools})
        assert refused.status_code == 422, refused.content
        error = refused.json()["error"]
        assert error["code"] == "live_tool_refused"
        assert sorted(error["details"]["refused"]) == named
    assert not Experiment.objects.exists()


def test_a_live_read_only_tool_answers_a_call_off_the_record(acme, tmp_path):
    dataset = make_dataset(acme, recorded_runs(acme)[1:2], "parcel")

    def other_ticket(scenario: dict[str, Any]) -> None:
        if scenario.get("name") == "masking":
            scenario["responses"][0]["tool_calls"][0]["arguments"]["ticket_id"] = "T-20250324-019"

    model = demo_variant(tmp_path, other_ticket)
    before = desk()
    started = start(
        acme,
        {
            "dataset": dataset["id"],
            "candidate": {"model": model},
            "tools": {"live": ["get_ticket"]},
        },
    )
    assert started.status_code == 202, started.content

    (row,) = run_all(started.json()["id"])

    assert row.score["tool_calls"] == {"executed": 1, "from_record": 0, "off_record": 0}
    result = next(json.loads(m["content"]) for m in row.run.messages if m["role"] == "tool")
    assert result["ok"] is True
    assert result["result"]["ticket_id"] == "T-20250324-019"  # the real desk answered
    assert desk() == before
    body = acme.get(f"/api/v1/experiments/{started.json()['id']}").json()
    assert body["tools"] == {"live": ["get_ticket"]}
    assert body["summary"]["executed"] == 1


def test_without_live_the_same_call_is_off_record(acme, tmp_path):
    """The counterpart of the test above: the recording alone cannot answer it."""
    dataset = make_dataset(acme, recorded_runs(acme)[1:2], "parcel")

    def other_ticket(scenario: dict[str, Any]) -> None:
        if scenario.get("name") == "masking":
            scenario["responses"][0]["tool_calls"][0]["arguments"]["ticket_id"] = "T-20250324-019"

    model = demo_variant(tmp_path, other_ticket)
    experiment = services.start_experiment(
        Tenant.objects.get(slug="acme"), dataset["id"], {"model": model}, enqueue=False
    )
    row = services.run_item(str(experiment.items.get().id))
    assert row.score["tool_calls"] == {"executed": 0, "from_record": 0, "off_record": 1}
    assert QUESTIONS[1].startswith("A customer")
