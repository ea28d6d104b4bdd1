"""Findings H1 and M4 of the second review: text and numbers no database column can store (NUL,
lone surrogates, NaN, ±Infinity) coming from a model or a tool.

Everything that enters from a model (text, tool-call arguments and their keys), a tool or an
MCP server is normalised once, where it enters (``traces.untrusted``): NUL and lone surrogates
become U+FFFD, NaN and ±Infinity the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``; the
span and the audit record say so (``normalised``). The run goes on with the normalised values,
is driven once, and its spend is recorded. NUL only fails on PostgreSQL: run these with
``DATABASE_URL`` naming one.

And when a step cannot be written at all (here: a CHECK constraint the database enforces), the
driver's last resort ends the run ``failed`` / ``internal_error`` in the same drive, with its
spend and the tool effects that happened — never a run left ``running`` to be driven again.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from harness.models import Run, RunEvent, RunMessage
from policy.models import BudgetLedger
from tests.conftest import ApiClient
from tests.factories import write_agent, write_script, write_tool
from tests.fake_providers import (
    FakeProvider,
    openai_completion,
    openai_error,
    openai_text_stream,
    openai_usage,
)
from tests.runs import wait_until
from tools.demo.models import Notification
from traces.models import AuditRecord, Span
from traces.recorder import new_masker
from traces.services import verify_chain

USAGE = openai_usage(prompt=100, completion=10)


@pytest.fixture
def served_model(settings: Any):
    """An OpenAI-compatible model served locally; it counts the calls it answers."""
    server = FakeProvider("openai")
    settings.OPENAI_BASE_URL = server.url
    settings.OPENAI_API_KEY = "sk-test-openai"
    settings.HARNESS_ROUTES = {
        "openai:model-test": {
            "stream": False,
            "backoff_s": 0.01,
            "retries": 0,
            "price": {"input": 2.5, "output": 10.0},  # USD per million tokens: 350 µUSD a call
        }
    }
    yield server
    server.close()


@pytest.fixture
def untrusted_tool(tmp_path: Path, settings: Any) -> str:
    """An idempotent tool that acts (a notification), then answers with unstorable values."""
    folder = tmp_path / "tool-files"
    folder.mkdir()
    settings.HARNESS_TOOL_DIRS = [*settings.HARNESS_TOOL_DIRS, folder]
    return write_tool(
        folder,
        name="untrusted_result",
        handler="tests.support.handlers.untrusted_result",
        access=["ticket:read"],
        parameters={
            "type": "object",
            "properties": {"kind": {"type": "string"}, "tag": {"type": "string"}},
        },
    )["name"]


def openai_agent(agent_dir: Path, **agent: Any) -> str:
    return write_agent(agent_dir, model="openai:model-test", max_steps=4, **agent)["name"]


def start_run(client: ApiClient, agent: str) -> dict[str, Any]:
    response = client.post("/api/v1/runs", {"agent": agent, "user": "alice", "input": "go"})
    assert response.status_code == 200, response.content
    return response.json()


def assert_driven_once_with_its_spend(run_id: str, calls: int, linked: bool = True) -> Run:
    run = Run.objects.get(id=run_id)
    assert run.status in {"succeeded", "failed"}, run.status
    assert run.lease_token == 1  # one claim, one drive
    assert run.prompt_tokens == 100 * calls
    assert run.completion_tokens == 10 * calls
    ledger = BudgetLedger.objects.get(key=f"run:{run.id}")
    assert (ledger.tokens_used, ledger.model_calls) == (110 * calls, calls)
    assert ledger.cost_used_micros == 350 * calls
    assert run.cost_usd == Decimal("0.00035") * calls
    report = verify_chain("acme")
    if linked:
        assert report.ok, report.broken
    else:  # the database refused the run's final link: the audit says so, never "ok"
        assert not report.ok
        assert report.broken.request_id == run.request_id
        assert "no final link" in report.broken.reason
    return run


def normalised_of(run: Run, kind: str) -> list[Any]:
    spans = Span.objects.filter(request_id=run.request_id, kind=kind)
    return [s.attributes["normalised"] for s in spans if "normalised" in s.attributes]


# --- from the model -----------------------------------------------------------------------------


ANSWERS = {
    "nul in the answer": ("Done\x00 at last.", "nul"),
    "lone surrogate in the answer": ("Done \ud800 at last.", "lone_surrogate"),
}


@pytest.mark.parametrize("case", ANSWERS)
def test_an_answer_holding_nul_or_a_lone_surrogate_is_stored_normalised(
    acme, agent_dir, served_model, case
):
    text, kind = ANSWERS[case]
    served_model.queue(openai_completion(text, usage=USAGE))

    body = start_run(acme, openai_agent(agent_dir))

    assert body["status"] == "succeeded", Run.objects.get(id=body["id"]).status_detail
    assert body["answer"] == "Done\ufffd at last." if kind == "nul" else "Done \ufffd at last."
    run = assert_driven_once_with_its_spend(body["id"], calls=1)
    assert len(served_model.requests) == 1
    assert "\ufffd" in run.answer
    assert normalised_of(run, "model_call") == [[kind]]
    response = AuditRecord.objects.get(request_id=run.request_id, kind="model_response")
    assert response.payload["normalised"] == [kind]


def test_a_streamed_answer_holding_nul_is_streamed_and_stored_normalised(
    acme, agent_dir, served_model, settings
):
    settings.HARNESS_ROUTES["openai:model-test"]["stream"] = True
    served_model.queue(openai_text_stream("Done\x00 at last.", pieces=4, usage=USAGE))

    body = start_run(acme, openai_agent(agent_dir))

    assert body["status"] == "succeeded", Run.objects.get(id=body["id"]).status_detail
    run = assert_driven_once_with_its_spend(body["id"], calls=1)
    deltas = RunEvent.objects.filter(run_id=run.id, type="text.delta")
    streamed = "".join(event.data["text"] for event in deltas)
    assert streamed == "Done\ufffd at last."
    assert run.answer == streamed


def test_a_provider_error_holding_nul_ends_the_run_as_a_model_error(acme, agent_dir, served_model):
    served_model.queue(openai_error(400, "bad\x00request"))

    body = start_run(acme, openai_agent(agent_dir))

    assert (body["status"], body["stop_reason"]) == ("failed", "model_error")
    run = Run.objects.get(id=body["id"])
    assert "bad\ufffdrequest" in run.status_detail
    assert run.lease_token == 1
    assert len(served_model.requests) == 1


ARGUMENTS = {
    "nul in a value": ('{"ticket_id": "T-20250318-007\\u0000"}', "nul"),
    "nul in a key": ('{"ticket_id": "T-20250318-007", "no\\u0000te": "x"}', "nul"),
    "lone surrogate in a value": ('{"ticket_id": "T-\\ud800"}', "lone_surrogate"),
    "lone surrogate in a key": ('{"ticket_id": "T-1", "\\udc00": 1}', "lone_surrogate"),
}


@pytest.mark.parametrize("case", ARGUMENTS)
def test_tool_call_arguments_holding_nul_or_a_lone_surrogate_are_normalised(
    acme, agent_dir, served_model, case
):
    arguments, kind = ARGUMENTS[case]
    served_model.queue(
        openai_completion(calls=[("call_a", "get_ticket", arguments)], usage=USAGE),
        openai_completion("Looked it up.", usage=USAGE),
    )

    body = start_run(acme, openai_agent(agent_dir))

    assert body["status"] == "succeeded", body
    run = assert_driven_once_with_its_spend(body["id"], calls=2)
    assert len(served_model.requests) == 2
    stored = RunMessage.objects.filter(run_id=run.id).order_by("index")[1].data
    call = stored["tool_calls"][0]
    assert "\ufffd" in json.dumps(call["arguments"], ensure_ascii=False)
    assert normalised_of(run, "model_call") == [[kind]]
    # The call itself was decided and answered, with its span and audit record.
    tool_spans = Span.objects.filter(request_id=run.request_id, kind__in=["tool_call"])
    checks = Span.objects.filter(request_id=run.request_id, kind="policy_check")
    assert tool_spans.exists() or checks.exists()


# --- from a tool ------------------------------------------------------------------------------


RESULTS = {
    "nul": ("nul", ["before\ufffdafter"]),
    "surrogate": ("lone_surrogate", ["lone \ufffd surrogate"]),
    "nan": ("non_finite", ["NaN"]),
    "infinity": ("non_finite", ["Infinity", "-Infinity"]),
}


@pytest.mark.parametrize("kind", RESULTS)
def test_a_tool_result_with_unstorable_values_is_audited_normalised_and_the_run_goes_on(
    acme, agent_dir, served_model, untrusted_tool, kind
):
    what, expected = RESULTS[kind]
    served_model.queue(
        openai_completion(
            calls=[("call_a", untrusted_tool, json.dumps({"kind": kind}))], usage=USAGE
        ),
        openai_completion("The tool answered.", usage=USAGE),
    )
    agent = openai_agent(agent_dir, tools=[untrusted_tool])

    body = start_run(acme, agent)

    assert body["status"] == "succeeded", body
    run = assert_driven_once_with_its_spend(body["id"], calls=2)
    assert Notification.objects.filter(idempotency_key=f"{run.id}:call_a").count() == 1
    span = Span.objects.get(request_id=run.request_id, kind="tool_call")
    assert span.status == "ok"
    assert span.attributes["normalised"] == [what]
    record = AuditRecord.objects.get(request_id=run.request_id, kind="tool_io")
    assert record.payload["status"] == "ok"
    assert record.payload["normalised"] == [what]
    stored = json.dumps(record.payload["result"], ensure_ascii=False)
    for value in expected:
        assert value in stored
    # What the model was shown next is the normalised result too.
    shown = served_model.requests[1].body["messages"][-1]["content"]
    for value in expected:
        assert value in json.loads(json.dumps(shown))


# --- the last resort: a step the database refuses ----------------------------------------------


REFUSED = {
    # The conversation refuses it: the last resort writes the run, its spend, and a span and
    # an audit record for the call that ran.
    "conversation": ["harness_runmessage.data", "harness_run.messages"],
    # The trace too (the error's text quotes the refused row): the run and its spend only.
    "conversation and trace": [
        "harness_runmessage.data",
        "harness_run.messages",
        "traces_span.attributes",
    ],
}


@pytest.fixture
def refusing_database(request, transactional_db: None):
    """A real database condition: the columns named by the test's case may not hold the word
    ``poison`` (CHECK constraints, dropped after the test)."""
    if connection.vendor != "postgresql":
        pytest.skip("a CHECK constraint on a jsonb column's text: PostgreSQL")
    columns = [column.split(".") for column in REFUSED[request.param]]
    with connection.cursor() as cursor:
        for table, column in columns:
            cursor.execute(
                f"ALTER TABLE {table} ADD CONSTRAINT test_no_poison "
                f"CHECK ({column}::text NOT LIKE '%%poison%%') NOT VALID"
            )
    yield request.param
    with connection.cursor() as cursor:
        for table, _ in columns:
            cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS test_no_poison")


@pytest.mark.parametrize("refusing_database", REFUSED, indirect=True)
def test_a_step_the_database_refuses_ends_the_run_in_one_drive_with_its_spend_and_effects(
    acme, agent_dir, served_model, untrusted_tool, refusing_database
):
    served_model.queue(
        openai_completion(
            calls=[("call_a", untrusted_tool, json.dumps({"kind": "nan", "tag": "poison"}))],
            usage=USAGE,
        ),
        openai_completion("Never asked for.", usage=USAGE),
    )
    agent = openai_agent(agent_dir, tools=[untrusted_tool])

    response = acme.post("/api/v1/runs", {"agent": agent, "user": "alice", "input": "go"})

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["stop_reason"]) == ("failed", "internal_error")
    assert len(served_model.requests) == 1  # the model was called once, never again
    run = assert_driven_once_with_its_spend(body["id"], calls=1)
    assert untrusted_tool in run.answer  # the effect that happened is named
    assert Notification.objects.filter(idempotency_key=f"{run.id}:call_a").count() == 1
    day = BudgetLedger.objects.get(key__startswith="tenant:acme:")
    assert (day.tokens_used, day.cost_used_micros) == (110, 350)
    if refusing_database == "conversation":
        span = Span.objects.get(request_id=run.request_id, kind="tool_call")
        assert span.name == untrusted_tool
        record = AuditRecord.objects.get(request_id=run.request_id, kind="tool_io")
        assert (record.payload["tool"], record.payload["call_id"]) == (untrusted_tool, "call_a")
        assert record.payload["kept"] is False
        session = Span.objects.get(request_id=run.request_id, kind="agent_session")
        assert session.attributes["stop_reason"] == "internal_error"


@pytest.fixture
def refusing_links(transactional_db: None):
    """The tenant's audit chain refuses every new link (a CHECK constraint, dropped after)."""
    if connection.vendor != "postgresql":
        pytest.skip("a CHECK constraint added for the test: PostgreSQL")
    with connection.cursor() as cursor:
        cursor.execute(
            "ALTER TABLE traces_auditrunlink ADD CONSTRAINT test_no_link "
            "CHECK (run_sequence < 0) NOT VALID"
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE traces_auditrunlink DROP CONSTRAINT IF EXISTS test_no_link")


def test_an_end_the_database_refuses_after_the_budget_is_written_loses_no_spend(
    acme, agent_dir, served_model, untrusted_tool, refusing_links
):
    # The run's end writes the budget, then links the audit head, which fails: the budget's
    # counters the failed transaction had taken are put back, and the last resort writes them.
    served_model.queue(
        openai_completion(
            calls=[("call_a", untrusted_tool, json.dumps({"kind": "nul"}))], usage=USAGE
        ),
        openai_completion("The tool answered.", usage=USAGE),
    )
    agent = openai_agent(agent_dir, tools=[untrusted_tool])

    body = start_run(acme, agent)

    assert (body["status"], body["stop_reason"]) == ("failed", "internal_error")
    assert len(served_model.requests) == 2
    assert_driven_once_with_its_spend(body["id"], calls=2, linked=False)
    day = BudgetLedger.objects.get(key__startswith="tenant:acme:")
    assert (day.tokens_used, day.cost_used_micros) == (220, 700)


# --- from a client ------------------------------------------------------------------------------


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_a_client_request_with_a_non_finite_number_is_invalid_request_naming_where(acme, number):
    # Python's JSON reader takes these; no JSON column stores them (this was a 500).
    body = (
        '{"name": "no-nan", "kind": "call", "effect": "refuse", "tool": "update_ticket", '
        f'"match": {{"action": {number}}}}}'
    )

    response = acme.client.post(
        "/api/v1/policies/rules",
        data=body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {acme.key}",
        HTTP_X_HARNESS_USER="alice",
    )

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "/match/action" in json.dumps(error["details"])


# --- behind the boundary ------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "value",
    [
        "lone \ud800 next to 13812345678 and zhang.wei@example.com",
        {"k\udfff": ["sk-abcdefabcdefabcdefabcdef \ud800", "13812345678"]},
    ],
)
def test_masking_a_value_that_did_not_come_through_the_boundary_masks_it_rather_than_failing(
    value,
):
    # Defence in depth (M4 failed here, in the masker's needle scan): text from elsewhere than
    # a model or a tool (a session, a file) is masked even with a lone surrogate in it.
    masked = new_masker("acme").mask(value)

    text = json.dumps(masked)
    assert "13812345678" not in text
    assert "zhang.wei@example.com" not in text
    assert "abcdefabcdefabcdefabcdef" not in text


# --- as deployed: an async run, a worker and beat re-queuing runs whose lease ran out ------------


@pytest.mark.worker
def test_an_async_run_with_nul_everywhere_is_driven_once_by_a_worker(
    acme, start_worker, tmp_path, settings
):
    agents = tmp_path / "nul-agents"
    agents.mkdir()
    nul_call = {
        "name": "get_ticket",
        "arguments": '{"ticket_id": "T-20250318-007\\u0000", "no\\u0000te": "\\ud800"}',
    }
    script = write_script(tmp_path, [{"tool_calls": [nul_call]}, {"text": "Done\u0000."}])
    name = write_agent(agents, model=f"scripted:{script}", tools=["get_ticket"])["name"]
    settings.HARNESS_AGENT_DIRS = [*settings.HARNESS_AGENT_DIRS, agents]
    lease = {"HARNESS_RUN_LEASE_S": "2", "HARNESS_SWEEP_INTERVAL_S": "1"}
    start_worker(beat=True, env=lease | {"HARNESS_AGENT_DIRS": str(agents)})

    body = {"agent": name, "user": "alice", "input": "go", "mode": "async"}
    run = acme.post("/api/v1/runs", body).json()
    wait_until(lambda: Run.objects.get(id=run["id"]).is_terminal, timeout_s=90)
    time.sleep(5)  # past two leases: a run left running would have been claimed again

    finished = Run.objects.get(id=run["id"])
    assert finished.status == "succeeded", finished.status_detail
    assert finished.lease_token == 1  # one drive
    assert finished.answer.endswith("Done\ufffd.")
    ledger = BudgetLedger.objects.get(key=f"run:{finished.id}")
    assert ledger.model_calls == 2
    assert ledger.tokens_used == finished.prompt_tokens + finished.completion_tokens > 0
    assert verify_chain("acme").ok
