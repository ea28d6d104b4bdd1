"""One typed record per span kind: the engine writes each span's attributes through its record
(``traces.span_records``) and the console, replay, the OpenTelemetry export and the SIEM feed
read them back through it. A key one side writes and the other does not know fails here,
rather than showing a step with no tokens or a refusal as allowed."""

from __future__ import annotations

from decimal import Decimal

import pytest

from harness.console.reads import run_timeline
from harness.models import Run
from harness.runs import execute_run
from tests.runs import TICKET, agent_with, call, demo_run, scripted_agent, start
from traces import span_records as records
from traces.models import Span, SpanKind

FAIL = call("always_fails", ticket_id=TICKET)
ESCALATION = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "charged twice"}


@pytest.fixture
def spans_of_every_kind(acme, agent_dir) -> list[Span]:
    """The spans of two runs that write every kind the engine writes: a refused call (the tool
    is not the agent's), a call that ran, one that failed, the honesty guard correcting the
    answer that hid it; then a held call, approved, the run resumed and finished."""
    agent = agent_with(
        agent_dir,
        [
            call("update_ticket", ticket_id=TICKET, action="close"),
            call("get_ticket", ticket_id=TICKET),
            FAIL,
            {"text": "I assigned the ticket to agent-li."},
        ],
    )
    # Both agents written before the first run (the registry reads the folder once).
    escalator = scripted_agent(agent_dir, [call("update_ticket", **ESCALATION), {"text": "Done."}])
    first = start(acme, agent).json()
    assert first["status"] == "succeeded", first
    assert first["outcome"] == "corrected", first
    held = start(acme, escalator).json()
    assert held["status"] == "awaiting_approval", held
    [approval] = acme.get(held["links"]["approvals"]).json()
    decided = acme.post(
        f"/api/v1/runs/{held['id']}/approvals/call_1_1",
        {"decision": "approve", "arguments_sha256": approval["arguments_sha256"]},
        **{"X-Harness-User": "admin"},
    )
    assert decided.status_code == 200, decided.content
    assert execute_run(held["id"]).status == "succeeded"
    return list(Span.objects.filter(request_id__in=[first["request_id"], held["request_id"]]))


def test_every_attribute_the_engine_writes_is_a_field_of_its_kinds_record(spans_of_every_kind):
    kinds = {span.kind for span in spans_of_every_kind}
    assert kinds == set(SpanKind.values) - {SpanKind.CALLBACK}  # callback: never written

    for span in spans_of_every_kind:
        record = records.record_of(span.kind, span.attributes)
        # Read back whole and written again, nothing is lost, renamed or added.
        assert record is not None
        assert record.attributes() == span.attributes, (span.kind, span.name)


def test_each_kind_is_read_as_its_own_record_with_what_the_run_did(spans_of_every_kind):
    by_kind: dict[str, list] = {}
    for span in spans_of_every_kind:
        by_kind.setdefault(span.kind, []).append(
            (span, records.record_of(span.kind, span.attributes))
        )

    sessions = [record for _, record in by_kind["agent_session"]]
    assert all(isinstance(s, records.AgentSession) and s.driver for s in sessions)
    assert sorted(bool(s.resumed) for s in sessions) == [False, False, True]
    assert [s.waiting_for for s in sessions if s.waiting_for] == [["call_1_1"]]
    [corrected] = [s for s in sessions if s.outcome == "corrected"]
    assert corrected.prompt_tokens
    calls = [record for _, record in by_kind["model_call"]]
    assert all(isinstance(c, records.ModelCall) and c.route for c in calls)
    tools = {record.tool: record for _, record in by_kind["tool_call"]}
    assert isinstance(tools["always_fails"], records.ToolCallSpan)
    assert tools["always_fails"].error_code == "tool_failed"
    assert tools["get_ticket"].error_code is None
    assert tools["get_ticket"].attempts == 1
    checks = [record for _, record in by_kind["policy_check"]]
    [honesty] = [c for c in checks if isinstance(c, records.HonestyCheck)]
    assert honesty.original_answer == "I assigned the ticket to agent-li."
    refused = [c for c in checks if isinstance(c, records.PolicyCheck) and c.refused]
    assert [(c.tool, c.check) for c in refused] == [("update_ticket", "tool_enabled")]
    [(_, decision)] = by_kind["approval"]
    assert isinstance(decision, records.ApprovalDecision)
    assert (decision.decision, decision.decided_by, decision.tool) == (
        "approved",
        "admin",
        "update_ticket",
    )
    answers = [record for _, record in by_kind["action_response"]]
    assert all(isinstance(a, records.ActionResponse) for a in answers)
    assert {(a.status, a.stop_reason) for a in answers} == {("succeeded", "final_answer")}
    assert "Done." in [a.answer for a in answers]


def test_every_attribute_of_a_model_call_span_is_a_field_of_its_record(acme, settings):
    settings.HARNESS_ROUTES = {"scripted:demo": {"price": {"input": 1.0, "output": 2.0}}}
    run = Run.objects.get(id=demo_run(acme)["id"])

    spans = list(Span.objects.filter(request_id=run.request_id, kind="model_call"))

    assert spans
    for span in spans:
        record = records.ModelCall.from_attributes(span.attributes)
        assert record.attributes() == span.attributes
        assert record.step is not None
        assert record.prompt_tokens
        assert record.context_method


def test_the_console_reads_each_steps_tokens_and_cost_from_the_record(acme, settings):
    settings.HARNESS_ROUTES = {"scripted:demo": {"price": {"input": 1.0, "output": 2.0}}}
    run = Run.objects.get(id=demo_run(acme)["id"])

    timeline = run_timeline(run)

    assert [step.number for step in timeline.steps] == list(range(1, run.steps + 1))
    assert timeline.prompt_tokens == run.prompt_tokens > 0
    assert timeline.completion_tokens == run.completion_tokens > 0
    assert timeline.cost_usd == run.cost_usd > Decimal(0)
    assert [step.call.route for step in timeline.steps] == [run.model_route] * run.steps
    assert timeline.sessions[0]["record"].run_id == str(run.id)
    assert timeline.outcome is not None
    assert timeline.outcome["record"].answer == run.answer


def test_a_part_says_only_its_own_fields_and_the_answer_says_an_unknown_cost():
    assert records.ModelCall(step=3).attributes() == {"step": 3}
    assert records.ModelCall(plan=True, revision=False).attributes() == {
        "plan": True,
        "revision": False,
    }
    answered = records.ModelCall(route="scripted:demo", prompt_tokens=5).attributes()
    assert answered == {"route": "scripted:demo", "prompt_tokens": 5, "cost_usd": None}
