"""Experiments (docs/experiments.md): an experiment never executes a tool for real — not a
Python handler, not an HTTP endpoint — and datasets and experiments are tenant-scoped (another
tenant's runs, datasets and experiments are not found)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from experiments import services
from experiments.models import Dataset, Experiment
from harness.models import RunMode, Tenant
from harness.runs import RunRequest, create_run, execute_run
from policy import services as policy
from tests.experiments.helpers import make_dataset, recorded_runs
from tests.factories import write_agent, write_script, write_tool
from tests.runs import call, run_script


@pytest.fixture
def orders():
    """A refund service on loopback that records every request it gets."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = json.dumps({"refunded": self.path.rsplit("/", 1)[-1]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


@pytest.fixture
def refund_tool(tmp_path: Path, settings: Any, orders: Any) -> str:
    folder = tmp_path / "tools"
    folder.mkdir()
    settings.HARNESS_TOOL_DIRS = [*settings.HARNESS_TOOL_DIRS, folder]
    return write_tool(
        folder,
        handler={"kind": "http", "method": "GET", "url": orders[0] + "/refund/{order_id}"},
        parameters={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        idempotent=False,
        concurrency_safe=False,
    )["name"]


def test_an_experiment_never_reaches_a_real_http_tool(acme, agent_dir, orders, refund_tool):
    _, seen = orders
    recorded = run_script(
        acme,
        agent_dir,
        [call(refund_tool, order_id="O-1"), {"text": "Refunded O-1."}],
        tools=[refund_tool],
    )
    assert recorded["status"] == "succeeded"
    assert seen == ["/refund/O-1"]
    dataset = make_dataset(acme, [recorded["id"]], "refunds")
    tenant = Tenant.objects.get(slug="acme")
    for order, expected in (("O-1", (1, 0)), ("O-2", (0, 1))):
        script = write_script(
            agent_dir.parent, [call(refund_tool, order_id=order), {"text": "Done."}]
        )
        experiment = services.start_experiment(
            tenant, dataset["id"], {"model": f"scripted:{script}"}, enqueue=False
        )
        row = services.run_item(str(experiment.items.get().id))
        counts = row.score["tool_calls"]
        assert (counts["from_record"], counts["off_record"], counts["executed"]) == (
            *expected,
            0,
        )
    assert seen == ["/refund/O-1"]  # the recorded run's request, and nothing since


def test_an_experiment_run_without_its_recording_fails_and_executes_nothing(
    acme, agent_dir, orders, refund_tool
):
    """A run marked as an experiment but linked to no item (no recording to answer from)
    must not fall back to the real tools: it fails as misconfigured."""
    _, seen = orders
    script = write_script(agent_dir.parent, [call(refund_tool, order_id="O-9"), {"text": "x"}])
    from tests.factories import write_agent

    agent = write_agent(agent_dir, model=f"scripted:{script}", tools=[refund_tool])["name"]
    run, _ = create_run(
        Tenant.objects.get(slug="acme"),
        RunRequest(agent=agent, user_id="alice", input="go", mode=RunMode.SYNC, experiment=True),
    )
    run = execute_run(run.id)
    assert (run.status, run.stop_reason) == ("failed", "configuration")
    assert seen == []


def test_an_experiment_run_with_no_setup_handed_to_the_driver_executes_nothing(
    acme, agent_dir, orders, refund_tool, monkeypatch
):
    """The driver learns how to set up an experiment run from the experiments app at start-up
    (it may not import it); without that, the run fails rather than run the real tools."""
    _, seen = orders
    monkeypatch.setattr("harness.engine.experiment_seam._setups", [])
    script = write_script(agent_dir.parent, [call(refund_tool, order_id="O-9"), {"text": "x"}])
    agent = write_agent(agent_dir, model=f"scripted:{script}", tools=[refund_tool])["name"]
    run, _ = create_run(
        Tenant.objects.get(slug="acme"),
        RunRequest(agent=agent, user_id="alice", input="go", mode=RunMode.SYNC, experiment=True),
    )
    run = execute_run(run.id)
    assert (run.status, run.stop_reason) == ("failed", "configuration")
    assert "no experiment setup is installed" in run.status_detail
    assert seen == []


def test_datasets_and_experiments_are_tenant_scoped(acme, globex):
    runs = recorded_runs(acme)
    created = make_dataset(acme, runs)
    charlie = {"X-Harness-User": "charlie"}
    # globex's client, even with the scopes, cannot take acme's runs or see acme's datasets
    policy.add_permission("globex", "charlie", "dataset:write", "allow", "test")
    policy.add_permission("globex", "charlie", "experiment:run", "allow", "test")
    stolen = globex.post("/api/v1/datasets", {"name": "x", "runs": runs[:1]}, **charlie)
    assert stolen.status_code == 404
    assert stolen.json()["error"]["code"] == "run_not_found"
    assert not Dataset.objects.filter(tenant__slug="globex").exists()
    assert globex.get(f"/api/v1/datasets/{created['id']}").status_code == 404
    assert globex.get("/api/v1/datasets/demo-three").status_code == 404
    assert globex.get("/api/v1/datasets").json()["datasets"] == []
    started = globex.post(
        "/api/v1/experiments",
        {"dataset": created["id"], "candidate": {"model": "scripted:demo"}},
        **charlie,
    )
    assert started.status_code == 404
    mine = acme.post(
        "/api/v1/experiments",
        {"dataset": created["id"], "candidate": {"model": "scripted:demo"}},
        **{"X-Harness-User": "alice"},
    ).json()
    assert globex.get(f"/api/v1/experiments/{mine['id']}").status_code == 404
    cancelled = globex.post(f"/api/v1/experiments/{mine['id']}/cancel", {}, **charlie)
    assert cancelled.status_code == 404
    assert Experiment.objects.get().cancel_requested_at is None


def test_live_tools_never_reach_a_tool_not_declared_read_only(acme, agent_dir, orders, refund_tool):
    """An HTTP tool that changes things cannot be made live in an experiment, whoever asks:
    the request is refused and its server sees nothing beyond the recorded run."""
    _, seen = orders
    recorded = run_script(
        acme,
        agent_dir,
        [call(refund_tool, order_id="O-1"), {"text": "Refunded O-1."}],
        tools=[refund_tool],
    )
    dataset = make_dataset(acme, [recorded["id"]], "refunds")
    for tools in ({"live": [refund_tool]}, "live"):
        refused = acme.post(
            "/api/v1/experiments",
            {"dataset": dataset["id"], "candidate": {"model": "scripted:demo"}, "tools": tools},
            **{"X-Harness-User": "alice"},
        )
        assert refused.status_code == 422, refused.content
        assert refused.json()["error"]["code"] == "live_tool_refused"
        assert refund_tool in refused.json()["error"]["details"]["refused"]
    assert not Experiment.objects.exists()
    assert seen == ["/refund/O-1"]


def test_another_tenant_cannot_list_or_export_experiments(acme, globex):
    created = make_dataset(acme, recorded_runs(acme))
    mine = acme.post(
        "/api/v1/experiments",
        {"dataset": created["id"], "candidate": {"model": "scripted:demo"}},
        **{"X-Harness-User": "alice"},
    ).json()
    assert globex.get("/api/v1/experiments").json()["experiments"] == []
    exported = globex.get(f"/api/v1/experiments/{mine['id']}/export")
    assert exported.status_code == 404
    assert exported.json()["error"]["code"] == "experiment_not_found"
    assert [e["id"] for e in acme.get("/api/v1/experiments").json()["experiments"]] == [mine["id"]]
