"""A run's outcome beside its status: clean, or the worst of corrected, tool_failed, denied,
refused, with counts per kind — in the API (and its filter), the webhook, the OTel span, the
admin's run list and the top of a run's page."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import webhooks
from harness.engine.outcome import SEVERITY, worst
from harness.models import Run, RunOutcome, Tenant, WebhookDelivery
from harness.runs import execute_run as resume_run
from tests.e2e.test_webhooks import Receiver
from tests.harness.test_admin_console import staff_client
from tests.runs import TICKET, call, run_script, scripted_agent, start

MAIL = {"to": "x@evil.example", "subject": "phone", "body": "13812345678"}
ESCALATION = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "charged twice"}
REFUSED_MAIL = [
    call("get_customer", customer_id="C-1001"),
    call("send_external_email", **MAIL),
    {"text": "I could not send it: the policy refused it."},
]


def test_a_run_with_a_refused_call_says_refused_in_the_api_the_webhook_and_the_list(
    acme, agent_dir
):
    receiver = Receiver(Tenant.objects.get(slug="acme").webhook_secret)
    try:
        agent = scripted_agent(agent_dir, REFUSED_MAIL)
        run = start(acme, agent, callback_url=receiver.url).json()
        [delivery] = WebhookDelivery.objects.filter(run_id=run["id"])
        webhooks.deliver(str(delivery.id))  # what the delivery task does, to a real receiver
    finally:
        receiver.close()

    assert (run["status"], run["outcome"], run["outcome_counts"]) == (
        "succeeded",
        "refused",
        {"refused": 1},
    )
    assert acme.get(f"/api/v1/runs/{run['id']}").json()["outcome"] == "refused"
    [event] = receiver.received
    assert event["payload"]["type"] == "run.succeeded"
    assert event["payload"]["data"]["outcome"] == "refused"
    assert event["payload"]["data"]["outcome_counts"] == {"refused": 1}
    refused = acme.get("/api/v1/runs?outcome=refused").json()["results"]
    assert [r["id"] for r in refused] == [run["id"]]


def run_both(client, agent_dir, first, second):
    """Runs of two scripted agents (written before either runs: the registry reads its
    folders once)."""
    agents = [scripted_agent(agent_dir, script, tools=TOOLS) for script in (first, second)]
    return [start(client, agent).json() for agent in agents]


CLEAN = [call("get_ticket", ticket_id=TICKET), {"text": "ok"}]
TOOLS = ["get_ticket", "update_ticket", "get_customer", "send_external_email", "always_fails"]


def test_the_list_filters_by_outcome_and_refuses_an_unknown_one(acme, agent_dir):
    refused, clean = run_both(acme, agent_dir, REFUSED_MAIL, CLEAN)

    def listed(outcome: str) -> list[str]:
        return [r["id"] for r in acme.get(f"/api/v1/runs?outcome={outcome}").json()["results"]]

    assert clean["outcome"] == "clean"
    assert clean["outcome_counts"] == {}
    assert listed("refused") == [refused["id"]]
    assert listed("clean") == [clean["id"]]
    assert listed("denied") == []
    bad = acme.get("/api/v1/runs?outcome=awful")
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_request"
    assert "outcome" in bad.json()["error"]["details"]["fields"]


def test_a_denied_approval_says_denied(acme, agent_dir):
    agent = scripted_agent(
        agent_dir, [call("update_ticket", **ESCALATION), {"text": "The approver denied it."}]
    )
    run = start(acme, agent).json()
    assert (run["status"], run["outcome"]) == ("awaiting_approval", "clean")
    sha = acme.get(run["links"]["approvals"]).json()[0]["arguments_sha256"]
    acme.post(
        f"/api/v1/runs/{run['id']}/approvals/call_1_1",
        {"decision": "deny", "arguments_sha256": sha},
        **{"X-Harness-User": "admin"},
    )

    resume_run(run["id"])

    finished = acme.get(f"/api/v1/runs/{run['id']}").json()
    assert (finished["status"], finished["outcome"]) == ("succeeded", "denied")
    assert finished["outcome_counts"] == {"denied": 1}


def test_a_resumed_run_keeps_what_its_earlier_drive_counted(acme, agent_dir):
    # A refusal before the pause, a denial after it: the worker's drive adds to the row's count.
    agent = scripted_agent(
        agent_dir,
        [
            call("no_such_tool"),
            call("update_ticket", **ESCALATION),
            {"text": "Neither was done: the tool does not exist and the approver denied it."},
        ],
    )
    run = start(acme, agent).json()
    assert run["outcome_counts"] == {"refused": 1}
    sha = acme.get(run["links"]["approvals"]).json()[0]["arguments_sha256"]
    acme.post(
        f"/api/v1/runs/{run['id']}/approvals/call_2_1",
        {"decision": "deny", "arguments_sha256": sha},
        **{"X-Harness-User": "admin"},
    )

    resume_run(run["id"])

    finished = Run.objects.get(id=run["id"])
    assert finished.outcome_counts == {"refused": 1, "denied": 1}
    assert finished.outcome == "denied"


def test_a_failing_tool_says_tool_failed_and_outranks_a_refusal(acme, agent_dir):
    run = run_script(
        acme,
        agent_dir,
        [
            call("no_such_tool"),
            call("always_fails", ticket_id=TICKET),
            {"text": "That failed: the ticket system is unreachable."},
        ],
        tools=["get_ticket", "always_fails"],
    )

    assert run["outcome"] == "tool_failed"
    assert run["outcome_counts"] == {"refused": 1, "tool_failed": 1}


def test_an_answer_the_guard_corrected_says_corrected_even_beside_a_failure(acme, agent_dir):
    clean_trace, failed_too = run_both(
        acme,
        agent_dir,
        [call("send_external_email", **MAIL), {"text": "The e-mail was not sent."}],
        [call("always_fails", ticket_id=TICKET), {"text": "I assigned the ticket."}],
    )

    assert clean_trace["outcome"] == "corrected"
    assert clean_trace["outcome_counts"] == {"corrected": 1}
    assert clean_trace["answer"].startswith("Note: the answer contradicted what the tools did")
    assert failed_too["outcome"] == "corrected"
    assert failed_too["outcome_counts"] == {"tool_failed": 1, "corrected": 1}


@given(st.dictionaries(st.sampled_from(list(RunOutcome)[1:]), st.integers(0, 3)))
def test_the_outcome_is_the_worst_kind_counted(counts):
    counted = [kind for kind in SEVERITY if counts.get(kind, 0) > 0]

    assert worst(counts) == (counted[0] if counted else RunOutcome.CLEAN)
    # Worst first, as docs/api.md documents it.
    assert [str(k) for k in SEVERITY] == ["corrected", "tool_failed", "denied", "refused"]


def test_the_run_span_exported_over_otel_carries_the_outcome(acme, agent_dir):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from traces import otel

    exporter = InMemorySpanExporter()
    otel.configure_tracing(exporter, batch=False)
    try:
        run = run_script(acme, agent_dir, REFUSED_MAIL)
    finally:
        spans = exporter.get_finished_spans()
        otel.shutdown_tracing()

    [session] = [
        s
        for s in spans
        if s.attributes.get("gen_ai.operation.name") == "invoke_agent"
        and s.attributes.get("harness.request_id") == run["request_id"]
    ]
    assert session.attributes["harness.outcome"] == "refused"
    assert session.attributes["harness.outcome_count.refused"] == 1


@pytest.fixture
def auditor(demo):
    return staff_client("auditor", "acme")


def test_the_admin_list_shows_an_outcome_badge_and_filters_by_it(acme, agent_dir, auditor):
    refused, clean = run_both(acme, agent_dir, REFUSED_MAIL, CLEAN)

    listing = auditor.get("/admin/harness/run/").content.decode()
    filtered = auditor.get("/admin/harness/run/?outcome__exact=refused").content.decode()

    assert re.search(r'class="run-status run-outcome status-\w+" data-outcome="refused"', listing)
    assert 'data-outcome="clean"' in listing
    assert "By outcome" in listing
    assert refused["request_id"][:10] in filtered
    assert clean["request_id"][:10] not in filtered


def test_the_run_page_opens_on_its_first_problem_linked_to_it(acme, agent_dir, auditor):
    run = run_script(acme, agent_dir, REFUSED_MAIL)

    page = auditor.get(f"/admin/harness/run/{run['id']}/change/").content.decode()

    banner = page[page.index('id="first-problem"') :]
    banner = banner[: banner.index("</section>")]
    assert 'data-kind="refused"' in banner
    assert "send_external_email" in banner
    assert "default-pii-no-external" in banner
    anchor = re.search(r'href="#(span-[0-9a-f]+)"', banner).group(1)
    # The anchor is the refused check's event in the timeline, which comes after the banner.
    event = re.search(rf'<li class="([^"]*)" id="{anchor}"', page)
    assert event is not None
    assert "first-problem" in event.group(1)
    assert "policy_check" in event.group(1)
    assert page.index('id="first-problem"') < page.index(f'id="{anchor}"')
    assert page.index('id="first-problem"') < page.index('class="form-row')


def test_a_clean_run_page_has_no_problem_banner(acme, agent_dir, auditor):
    run = run_script(acme, agent_dir, CLEAN)

    page = auditor.get(f"/admin/harness/run/{run['id']}/change/").content.decode()

    assert 'id="first-problem"' not in page
