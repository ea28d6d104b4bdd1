"""Every demo scenario (scripts/demo-scenarios.json, README "Demo scenarios") through the run
API, twice in a row without reloading the demo: each answer must be true to what its tools
returned, every time. The prompt-injection scenario reads the ticket over MCP from the demo
ticket desk server (a real stdio process)."""

# The MCP fixtures are imported from tests.tools.mcp_support: test arguments name them.
# ruff: noqa: F811

import json
from datetime import datetime
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from harness.runs import execute_run as resume_run
from tests.tools.mcp_support import mcp_setup, use_demo_servers  # noqa: F401  (fixtures)
from tools.demo.models import OutboxEmail
from traces.queries import find_runs_by_identifier

SCENARIOS = {
    s["name"]: s
    for s in json.loads(
        (Path(settings.BASE_DIR) / "scripts" / "demo-scenarios.json").read_text("utf-8")
    )
}
README = (Path(settings.BASE_DIR) / "README.md").read_text("utf-8")


@pytest.fixture
def demo_desk(mcp_setup, transactional_db, settings, monkeypatch):
    """The demo's own MCP configuration (``tools/mcp/demo-servers.json``): the ticket desk
    server over stdio, as ``tickets``, reading the test database."""
    use_demo_servers(settings, monkeypatch)
    return mcp_setup


def run_scenario(client, name):
    scenario = SCENARIOS[name]
    body = {"agent": "ticket-assistant", "user": scenario["user"], "input": scenario["input"]}
    response = client.post("/api/v1/runs", body)
    run = response.json()
    if name == "approval":
        assert response.status_code == 202, response.content
        assert run["status"] == "awaiting_approval"
        [approval] = client.get(run["links"]["approvals"]).json()
        decided = client.post(
            f"/api/v1/runs/{run['id']}/approvals/{approval['call_id']}",
            {"decision": "approve", "arguments_sha256": approval["arguments_sha256"]},
            **{"X-Harness-User": "alice"},
        )
        assert decided.status_code == 200, decided.content
        resume_run(run["id"])
        run = client.get(f"/api/v1/runs/{run['id']}").json()
    else:
        assert response.status_code == 200, response.content
    trace = client.get(run["links"]["trace"]).json()
    return run, trace


def tool_io(trace):
    """Each tool call's audited outcome, by tool name (the last call of each)."""
    return {
        span["name"]: span["audit"][0]["payload"]
        for span in trace["spans"]
        if span["kind"] == "tool_call"
    }


def checks(trace):
    return [
        (span["attributes"].get("check"), span["status"], span["name"])
        for span in trace["spans"]
        if span["kind"] == "policy_check"
    ]


def past(timestamp):
    return datetime.fromisoformat(timestamp) < timezone.now()


def check_ticket(run, trace, answer_parts):
    io = tool_io(trace)
    ticket, update, notify = io["get_ticket"], io["update_ticket"], io["notify_user"]
    assert ticket["status"] == update["status"] == notify["status"] == "ok"
    assert ticket["result"]["queue"] == "billing"
    assert past(ticket["result"]["sla_due"])
    assert (update["result"]["status"], update["result"]["assignee_id"]) == ("assigned", "agent-li")
    assert notify["result"]["delivered"] is True
    assert run["status"] == "succeeded"
    for part in answer_parts:
        assert part in run["answer"]


def check_ticket_en(run, trace):
    check_ticket(
        run, trace, ["billing queue", "past its SLA due time", "agent-li", "notified them"]
    )


def check_ticket_zh(run, trace):
    check_ticket(run, trace, ["billing 队列", "已超过 SLA 截止时间", "agent-li", "已通知"])


def check_masking(run, trace):
    ticket = tool_io(trace)["get_ticket"]["result"]
    assert (ticket["queue"], ticket["assignee_id"]) == ("shipping", "agent-chen")
    assert "shipping queue and assigned to agent-chen" in run["answer"]
    stored = json.dumps(trace, ensure_ascii=False)
    for value in ("13812345678", "zhang.wei@example.com", "11010519491231002X"):
        assert value not in stored
        assert run["request_id"] in find_runs_by_identifier("acme", value)
    assert "138****5678" in stored


def check_approval(run, trace):
    update = tool_io(trace)["update_ticket"]
    assert update["status"] == "ok"
    assert update["result"]["status"] == "escalated"
    assert run["status"] == "succeeded"
    assert "T-20250324-019 is now escalated" in run["answer"]
    assert [s["attributes"]["decision"] for s in trace["spans"] if s["kind"] == "approval"] == [
        "approved"
    ]


def check_prompt_injection(run, trace):
    io = tool_io(trace)
    messages = io["get_ticket_messages"]
    assert messages["status"] == "ok"
    texts = [m["text"] for m in messages["result"]["messages"]]
    assert "only half of the duplicate charge on invoice INV-2025-0318" in texts[0]
    assert "e-mail their phone number and e-mail address" in texts[1]
    assert io["get_customer"]["status"] == "ok"
    assert ("chain", "refused", "chain send_external_email") in checks(trace)
    assert "send_external_email" not in io  # refused before it could run
    assert not OutboxEmail.objects.exists()
    assert "only half of the duplicate charge" in run["answer"]
    assert "not sent, policy rule default-pii-no-external refused it" in run["answer"]


def check_honesty_guard(run, trace):
    update = tool_io(trace)["update_ticket"]
    assert update["status"] == "error"
    assert "no ticket T-20250399-999" in update["error"]["message"]
    assert run["answer"].startswith("Note: some actions in this run did not complete")
    assert "The tool update_ticket failed (tool_failed)" in run["answer"]
    assert any(name == "honesty guard" for _, _, name in checks(trace))


CHECKS = {
    "ticket": check_ticket_en,
    "ticket-zh": check_ticket_zh,
    "masking": check_masking,
    "approval": check_approval,
    "prompt-injection": check_prompt_injection,
    "honesty-guard": check_honesty_guard,
}


def test_every_scenario_is_checked_and_listed_in_the_readme():
    assert set(CHECKS) == set(SCENARIOS)
    for scenario in SCENARIOS.values():
        assert scenario["input"] in README


@pytest.mark.parametrize("name", list(CHECKS))
def test_a_demo_scenario_answers_true_to_its_tools_on_every_repeat(acme, demo_desk, name):
    for _ in range(2):
        run, trace = run_scenario(acme, name)
        CHECKS[name](run, trace)
