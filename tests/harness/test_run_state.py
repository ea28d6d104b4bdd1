"""The run's state machine: each transition, each illegal one, and fencing of a stale
driver (one whose lease another driver claimed): it can write nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from harness.engine import state, step
from harness.engine.drive import Driver
from harness.engine.driver import drive_run
from harness.engine.writes import StepWrites
from harness.models import Run, RunEvent, RunMessage, RunStatus, Tenant
from harness.runs import RunRequest, create_run
from policy.models import ToolApproval
from tests.runs import TICKET, call, scripted_agent
from traces.models import AuditRecord, Span
from traces.services import SpanKind, TraceRecorder


@pytest.fixture
def queued(demo) -> Run:
    tenant = Tenant.objects.get(slug="acme")
    run, _ = create_run(
        tenant, RunRequest(agent="ticket-assistant", user_id="bob", input="hi", mode="async")
    )
    return run


def status_of(run: Run) -> str:
    return Run.objects.get(id=run.id).status


def expire(run: Run) -> None:
    Run.objects.filter(id=run.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_claim_takes_a_queued_run_and_increments_the_fencing_token(queued):
    lease = state.claim(str(queued.id), "a")

    assert lease is not None
    assert lease.token == 1
    row = Run.objects.get(id=queued.id)
    assert (row.status, row.lease_owner, row.lease_token) == ("running", "a", 1)
    assert row.started_at is not None


def test_a_run_with_a_live_lease_cannot_be_claimed(queued):
    state.claim(str(queued.id), "a")

    assert state.claim(str(queued.id), "b") is None
    assert Run.objects.get(id=queued.id).lease_owner == "a"


def test_a_run_whose_lease_ran_out_is_claimed_with_a_higher_token(queued):
    state.claim(str(queued.id), "a")
    expire(queued)

    lease = state.claim(str(queued.id), "b")

    assert lease is not None
    assert lease.token == 2


def test_finished_and_paused_runs_cannot_be_claimed(queued):
    lease = state.claim(str(queued.id), "a")
    state.pause(lease, "waiting")
    assert state.claim(str(queued.id), "b") is None
    assert state.resume(str(queued.id))
    lease = state.claim(str(queued.id), "c")
    state.finish(lease, RunStatus.SUCCEEDED, {"answer": "done"})

    assert state.claim(str(queued.id), "d") is None
    assert status_of(queued) == "succeeded"


def test_checkpoint_renews_the_lease_and_reports_a_cancel_request(queued):
    lease = state.claim(str(queued.id), "a")
    Run.objects.filter(id=queued.id).update(lease_expires_at=timezone.now())
    state.request_cancel(str(queued.id))

    fence = state.checkpoint(lease, {"steps": 3})

    row = Run.objects.get(id=queued.id)
    assert fence.cancel_requested
    assert row.steps == 3
    assert row.lease_expires_at > timezone.now() + timedelta(seconds=30)


def test_checkpoint_refuses_fields_that_are_not_a_steps(queued):
    lease = state.claim(str(queued.id), "a")

    with pytest.raises(ValueError, match="not a step field: status"):
        state.checkpoint(lease, {"status": "succeeded"})


def test_pause_then_resume_queues_the_run_once(queued):
    lease = state.claim(str(queued.id), "a")

    state.pause(lease, "waiting for approval")

    row = Run.objects.get(id=queued.id)
    assert (row.status, row.status_detail, row.lease_owner) == (
        "awaiting_approval",
        "waiting for approval",
        "",
    )
    assert state.resume(str(queued.id)) is True
    assert state.resume(str(queued.id)) is False
    assert status_of(queued) == "queued"


def test_resume_of_a_run_that_is_not_paused_does_nothing(queued):
    assert state.resume(str(queued.id)) is False
    assert status_of(queued) == "queued"


def test_hand_off_queues_a_running_run(queued):
    lease = state.claim(str(queued.id), "a")

    assert state.hand_off(lease) is True
    assert status_of(queued) == "queued"


def test_finish_refuses_a_status_that_is_not_terminal(queued):
    lease = state.claim(str(queued.id), "a")

    with pytest.raises(ValueError, match="not a terminal status"):
        state.finish(lease, RunStatus.QUEUED, {})


def test_cancel_idle_cancels_queued_and_paused_runs_only(queued):
    assert state.cancel_idle(str(queued.id)) is True
    assert status_of(queued) == "cancelled"
    assert state.cancel_idle(str(queued.id)) is False  # already terminal


def test_cancel_idle_leaves_a_running_run_to_its_driver(queued):
    state.claim(str(queued.id), "a")

    assert state.cancel_idle(str(queued.id)) is False
    assert status_of(queued) == "running"


def test_stalled_runs_are_listed_for_requeue(queued):
    state.claim(str(queued.id), "a")
    assert state.list_stalled(timezone.now()) == []
    expire(queued)

    assert state.list_stalled(timezone.now()) == [queued.id]


@pytest.fixture
def stale_and_current(queued) -> tuple[state.Lease, state.Lease]:
    stale = state.claim(str(queued.id), "stale")
    expire(queued)
    current = state.claim(str(queued.id), "current")
    return stale, current


def test_a_stale_driver_cannot_checkpoint_pause_hand_off_or_finish(queued, stale_and_current):
    stale, _ = stale_and_current

    with pytest.raises(state.LeaseLost):
        state.checkpoint(stale, {"steps": 9})
    with pytest.raises(state.LeaseLost):
        state.pause(stale, "x")
    with pytest.raises(state.LeaseLost):
        state.finish(stale, RunStatus.FAILED, {"answer": "overwritten"})
    assert state.hand_off(stale) is False
    assert state.renew(stale) is False
    row = Run.objects.get(id=queued.id)
    assert (row.status, row.lease_owner, row.steps, row.answer) == ("running", "current", 0, "")


def test_a_stale_driver_writes_nothing_of_its_step(queued, stale_and_current):
    stale, _ = stale_and_current
    tracer = TraceRecorder(queued.request_id, "acme", buffered=True)
    writes = StepWrites(stale, tracer, next_event=100, next_message=0)
    with tracer.span(SpanKind.MODEL_CALL, "step 1") as span:
        tracer.audit(span, "model_response", {"text": "hi"})
    writes.event("step.started", {"step": 1})
    writes.message({"role": "assistant", "content": "hi"})
    spans_before = Span.objects.filter(request_id=queued.request_id).count()

    with pytest.raises(state.LeaseLost):
        writes.commit({"steps": 1})

    assert Span.objects.filter(request_id=queued.request_id).count() == spans_before
    assert not AuditRecord.objects.filter(request_id=queued.request_id).exists()
    assert not RunEvent.objects.filter(run_id=queued.id, sequence=100).exists()
    assert not RunMessage.objects.filter(run_id=queued.id).exists()


def test_the_current_driver_writes_its_step_in_one_go(queued, stale_and_current):
    _, current = stale_and_current
    tracer = TraceRecorder(queued.request_id, "acme", buffered=True)
    writes = StepWrites(current, tracer, next_event=100, next_message=0)
    with tracer.span(SpanKind.MODEL_CALL, "step 1") as span:
        tracer.audit(span, "model_response", {"text": "hi"})
    writes.event("step.started", {"step": 1})
    writes.message({"role": "assistant", "content": "hi"})

    writes.commit({"steps": 1})

    assert AuditRecord.objects.filter(request_id=queued.request_id).count() == 1
    assert RunEvent.objects.filter(run_id=queued.id, sequence=100).exists()
    assert RunMessage.objects.get(run_id=queued.id).data == {"role": "assistant", "content": "hi"}
    assert Run.objects.get(id=queued.id).steps == 1


def test_a_stale_driver_that_reaches_a_hold_writes_no_approval(demo, agent_dir, monkeypatch):
    escalation = {"ticket_id": TICKET, "action": "escalate", "escalate_reason": "charged twice"}
    agent = scripted_agent(agent_dir, [call("update_ticket", **escalation), {"text": "ok"}])
    tenant = Tenant.objects.get(slug="acme")
    run, _ = create_run(tenant, RunRequest(agent=agent, user_id="alice", input="go", mode="async"))
    stale = state.claim(str(run.id), "stale")
    ask_the_model = step.complete

    def taken_over_while_the_model_answers(*args, **kwargs):
        expire(run)
        state.claim(str(run.id), "current")
        return ask_the_model(*args, **kwargs)

    monkeypatch.setattr(step, "complete", taken_over_while_the_model_answers)
    approvals_before = ToolApproval.objects.filter(run_id=str(run.id)).count()

    drive_run(str(run.id), Driver(owner="stale"), stale)

    assert approvals_before == 0
    assert ToolApproval.objects.filter(run_id=str(run.id)).count() == 0
    row = Run.objects.get(id=run.id)
    assert (row.status, row.lease_owner, row.steps) == ("running", "current", 0)


DRIVER_WRITTEN = ("harness_runmessage", "traces_span", "traces_auditrecord", "policy_toolapproval")


def _reads_of_driver_written_tables(run_id: str, lease: state.Lease) -> list[str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        drive_run(run_id, Driver("bench"), lease)
    return [
        q["sql"]
        for q in queries
        if q["sql"].lstrip().upper().startswith("SELECT")
        and any(f'FROM "{table}"' in q["sql"] for table in (*DRIVER_WRITTEN, "policy_runlabel"))
    ]


def test_a_runs_first_drive_reads_nothing_only_a_driver_could_have_written(queued):
    lease = state.claim(str(queued.id), "a")

    reads = _reads_of_driver_written_tables(str(queued.id), lease)

    assert lease.first
    assert reads == []
    assert status_of(queued) == "succeeded"


def test_a_later_drive_reads_what_earlier_drivers_wrote(queued):
    state.claim(str(queued.id), "a")
    expire(queued)  # the first driver died before writing anything
    lease = state.claim(str(queued.id), "b")

    reads = _reads_of_driver_written_tables(str(queued.id), lease)

    assert not lease.first
    assert {table for table in DRIVER_WRITTEN if any(table in sql for sql in reads)} == set(
        DRIVER_WRITTEN
    )
    assert status_of(queued) == "succeeded"
