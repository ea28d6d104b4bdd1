"""The agent loop: one run, step by step, until a final answer or a stop.

It is driven inline for sync runs and by a Celery task for async ones, by whoever claimed the
run's lease (``harness.engine.state``). This module owns the run's lifecycle: opening a drive,
the checks between steps, pausing for approvals, handing off to a worker, finishing, and what
the last transaction of a segment writes. What one step does is ``harness.engine.step``.

A step is at most two fenced transactions:

1. after the model answered and the policy decided its calls: the answer, the decisions, the
   calls about to run (``calls_in_flight``), spans, audit records and events;
2. after the calls ran: their results.

A final answer (or any stop) is written with the run's terminal status in one transaction.
A driver that lost its lease writes nothing and stops quietly; a driver that took a run over
resumes from the last commit: calls answered are not run again, idempotent calls in flight run
again with the same idempotency key (``<run id>:<call id>``), and non-idempotent ones in
flight are reported ``outcome_unknown`` rather than run twice.
"""

from __future__ import annotations

import logging
import threading

from django.db import DatabaseError, transaction
from django.utils import timezone

from core.errors import DomainError
from gateway.messages import Message, ToolCall
from harness import webhooks
from harness.agent_registry import get_agent
from harness.dispatch import enqueue_run
from harness.engine import approvals, planning, retry, state
from harness.engine.conversation import load_run_messages, run_start
from harness.engine.drive import Drive, Driver, StepOutcome, StopReason
from harness.engine.experiment_seam import experiment_setup
from harness.engine.guard import RunGuard
from harness.engine.heartbeat import get_heartbeat
from harness.engine.outcome import OutcomeTally
from harness.engine.step import (
    announce,
    append,
    honesty_guard,
    model_step,
    outcome_fields,
    plan,
    tool_step,
    unanswered_calls,
    usage_fields,
    write_noted,
)
from harness.engine.tool_calls import CallScope, DrivePolicy
from harness.engine.writes import StepWrites
from harness.events import EventType, last_sequence
from harness.models import Run, RunStatus, Session
from tools.services import get_tool_registry, store_kept_outcomes_soon
from traces.services import (
    AuditKind,
    SpanKind,
    SpanStatus,
    TraceRecorder,
    anchor_run,
    seal,
    unseal,
)
from traces.span_records import ActionResponse, AgentSession, ToolCallSpan
from traces.untrusted import clean_text

logger = logging.getLogger(__name__)


def drive_run(run_id: str, driver: Driver, lease: state.Lease) -> Run:
    """Drive a run this driver has claimed until it ends, pauses or is handed off.

    Side effects: model calls, tool executions, the run row (status, conversation, usage),
    its events, trace and callbacks. Never raises for a failure of the model, a tool or a
    policy: those end the run with a status and a message. A driver that lost its lease stops
    without writing anything more. A dependency that stays unreachable (the database past
    the step's retries, ``harness.engine.retry``) ends nothing: the driver gives the run up
    (``_give_up``) and raises ``state.DriveInterrupted`` for its caller to have it driven
    again.

    The model works on the clear conversation (the sealed copy); everything stored readable
    is masked first. The returned run carries the clear answer in memory.
    """
    lost = get_heartbeat().keep(lease)
    try:
        with transaction.atomic():  # what a drive reads first, in one transaction
            drive = _open(run_id, driver, lease, lost)
        try:
            return _drive(drive)
        except state.LeaseLost:
            raise
        except Exception as exc:
            if retry.unreachable(exc) is not None:
                raise
            # A bug of ours must not leave the run "running" forever: it fails, with the error
            # in the trace and the log, and nothing internal in the answer.
            logger.exception("run %s failed with an unexpected error", run_id)
            drive.session_span.set(**AgentSession(error=_error_text(exc)).attributes())
            outcome = StepOutcome(
                RunStatus.FAILED,
                detail=f"The run failed with an internal error (request id "
                f"{drive.run.request_id}).",
                reason="internal_error",
            )
            try:
                return _finish(drive, outcome)
            except state.LeaseLost:
                return _last_resort(drive, outcome)
            except Exception as exc:
                if retry.unreachable(exc) is not None:
                    raise
                # What failed is in the step's own rows (the database refused one of them):
                # writing them again would fail again, leave the run "running" and have it
                # driven again at every lease expiry, each time paying the model unrecorded.
                logger.exception("run %s: its end could not be written; last resort", run_id)
                return _last_resort(drive, outcome)
    except state.LeaseLost:
        logger.info("run %s: lease %s lost, the driver stops", run_id, lease.token)
        return Run.objects.get(id=run_id)
    except Exception as exc:
        if retry.unreachable(exc) is None:
            raise
        raise _give_up(lease, exc) from exc
    finally:
        get_heartbeat().release(lease)


def _give_up(lease: state.Lease, exc: BaseException) -> state.DriveInterrupted:
    """A dependency is down past what a step retries: end nothing (a connection blip is not the
    run's failure), give the lease up at once if the database takes it — so that another
    driver resumes the run from its last commit within seconds, not when the lease runs out —
    and tell the caller (a Celery task retries; a sync request hands the run to a worker)."""
    dependency = retry.unreachable(exc)
    # The outcomes of calls that ran in the step not written are kept in this process: stored
    # at once when the database is back, for the driver that resumes the run to read.
    store_kept_outcomes_soon(f"{lease.run_id}:")
    try:
        retry.drop_connection()
        released = state.release(lease)
    except Exception as error:
        if retry.unreachable(error) is None:
            raise
        released = False
    logger.warning(
        "run %s: %s unreachable (%s); the driver gives the run up, lease %s",
        lease.run_id,
        dependency,
        exc,
        "released" if released else "left to run out or to the next driver's release",
    )
    return state.DriveInterrupted(lease)


def _open(run_id: str, driver: Driver, lease: state.Lease, lost: threading.Event) -> Drive:
    run = Run.objects.select_related("tenant", "session").get(id=run_id)
    tracer = TraceRecorder(run.request_id, run.tenant.slug, buffered=True, new=lease.first)
    history = _session_history(run)
    own = [] if lease.first else load_run_messages(run)
    writes = StepWrites(lease, tracer, last_sequence(run.id) + 1, len(own))
    clear_input = unseal(run.sealed, {}).get("input", run.input)
    resumed = bool(own)
    drive = Drive(
        run=run,
        lease=lease,
        driver=driver,
        lost=lost,
        tracer=tracer,
        writes=writes,
        guard=RunGuard(run),
        tally=OutcomeTally(run.outcome_counts),
        session_span=tracer.start(
            SpanKind.AGENT_SESSION,
            run.agent,
            **AgentSession(
                agent=run.agent,
                user_id=run.user_id,
                tenant=run.tenant.slug,
                run_id=str(run.id),
                resumed=resumed,
                driver=driver.owner,
            ).attributes(),
        ),
        messages=[*history, *own],
        history_length=len(history),
        clear_input=clear_input,
        cancel_requested=run.cancel_requested_at is not None,
        # The plans in clear (stored masked; the sealed copy unreadable: the masked ones).
        plans=unseal(run.sealed_plans, None) or list(run.plans),
    )
    if not own:
        append(drive, Message(role="user", content=clear_input))
    writes.event(EventType.RUN_STARTED, {"resumed": resumed})
    drive.policy = DrivePolicy.load(run.tenant.slug, run.user_id, str(run.id), new=lease.first)
    tracer.chain.head  # noqa: B018 (the run's audit head, read now with the rest)
    return drive


def _drive(drive: Drive) -> Run:
    run = drive.run
    try:
        drive.agent = get_agent(run.agent)
        registry = get_tool_registry()
        if run.experiment:  # the candidate's agent and policy, tools from the recording
            drive.policy = drive.policy or DrivePolicy.load(
                run.tenant.slug, run.user_id, str(run.id)
            )
            drive.agent, registry, drive.policy = experiment_setup(
                run, drive.agent, registry, drive.policy
            )
    except DomainError as exc:  # an agent or tool file, an experiment's setup
        outcome = StepOutcome(RunStatus.FAILED, detail=str(exc), reason=StopReason.CONFIGURATION)
        return _finish(drive, outcome)
    drive.scope = CallScope(
        tenant=run.tenant.slug,
        user_id=run.user_id,
        run_id=str(run.id),
        agent=drive.agent,
        registry=registry,
        tracer=drive.tracer,
        parent=drive.session_span,
        policy=drive.policy or DrivePolicy.load(run.tenant.slug, run.user_id, str(run.id)),
        guard=drive.guard,
        first_drive=drive.lease.first,
    )
    while True:
        outcome = _between_steps(drive)
        if outcome is not None:
            if outcome.reason == "handoff":
                return _hand_off(drive)
            break
        if planning.wants_plan(drive.agent, drive.plans):
            plan(drive)
        if not unanswered_calls(drive.messages):
            outcome = model_step(drive)
            if outcome.status is not None:
                break
        held = tool_step(drive)
        if held:
            return _pause(drive, held)
        if drive.last_failure and planning.may_replan(drive.agent, drive.plans):
            plan(drive, drive.last_failure)
    if outcome.status == RunStatus.SUCCEEDED:
        outcome = honesty_guard(drive, outcome)
    return _finish(drive, outcome)


def _session_history(run: Run) -> list[Message]:
    sealed = unseal(run.session.sealed_messages, []) if run.session else []
    return [Message.from_dict(m) for m in sealed]


def _between_steps(drive: Drive) -> StepOutcome | None:
    """Stops checked between steps: cancellation, deadline, hand-off, lost lease."""
    if drive.lost.is_set():
        raise state.LeaseLost(drive.lease.run_id)
    if drive.cancel_requested:
        return StepOutcome(
            RunStatus.CANCELLED, detail="The run was cancelled.", reason=StopReason.CANCELLED
        )
    if drive.run.deadline_at and timezone.now() >= drive.run.deadline_at:
        return StepOutcome(
            RunStatus.DEADLINE_EXCEEDED,
            detail="The run reached its deadline before finishing.",
            reason=StopReason.DEADLINE,
        )
    if drive.driver.handoff.is_set():
        return StepOutcome(reason="handoff")
    return None


def _stopped_answer(detail: str, messages: list[Message]) -> str:
    """Why the run stopped, and what it achieved before (the tool calls that succeeded)."""
    done = [m.name for m in messages if m.role == "tool" and not m.is_error and m.name]
    if not done:
        return f"{detail} No action was completed."
    return f"{detail} Completed before stopping: {', '.join(done)}."


def _end_segment(drive: Drive, ended: bool) -> None:
    """What every last transaction of a segment writes besides the run row: the budget (and
    the day's thresholds this run is first to cross), the labels, and the run's audit head
    linked into the tenant's chain (a final link when the run ended: it closes the run's chain)."""
    guard = drive.guard

    def budget() -> None:
        day = guard.end_segment(ended)
        announce(drive, day, guard.limits.alert_url, now=True)

    drive.writes.on_rollback(guard.snapshot())  # written again by the last resort
    drive.writes.inside(budget)
    write_noted(drive)
    tracer = drive.tracer
    drive.writes.inside(
        lambda: anchor_run(tracer.request_id, tracer.tenant, tracer.chain.head, final=ended)
    )
    drive.writes.after_commit(drive.guard.release_slot)


def _hand_off(drive: Drive) -> Run:
    """Give the run back to the queue for a worker (the sync deadline passed)."""
    drive.session_span.set(**AgentSession(handed_off=True).attributes())
    drive.tracer.end(drive.session_span)
    _end_segment(drive, ended=False)
    run_id = drive.run.id
    drive.writes.after_commit(lambda: enqueue_run(run_id))
    drive.writes.commit(transition=lambda: _checked(state.hand_off(drive.lease), drive))
    return Run.objects.get(id=run_id)


def _checked(moved: bool, drive: Drive) -> None:
    if not moved:
        raise state.LeaseLost(drive.lease.run_id)


def _pause(drive: Drive, held: list[ToolCall]) -> Run:
    """Wait for approvals: persist ``awaiting_approval``, announce it, free the lease."""
    run, tracer, writes, scope = drive.run, drive.tracer, drive.writes, drive.scope
    assert scope is not None
    for call in held:
        writes.event(EventType.APPROVAL_NEEDED, {"call_id": call.id, "tool": call.name})
    # From memory: the approvals just held are written with this very transaction.
    detail = approvals.waiting_detail(scope.policy.waiting())
    paused = AgentSession(
        status=RunStatus.AWAITING_APPROVAL, steps=run.steps, waiting_for=[c.id for c in held]
    )
    drive.session_span.set(**paused.attributes())
    tracer.end(drive.session_span)
    _end_segment(drive, ended=False)
    run.status = RunStatus.AWAITING_APPROVAL
    outcome = outcome_fields(drive)
    calls = [{"call_id": c.id, "tool": c.name} for c in held]
    writes.inside(
        lambda: webhooks.queue_run_event(
            run, "run.awaiting_approval", extra={"awaiting": calls}, mask=tracer.mask
        )
    )

    def transition() -> None:
        # The step that held the calls is written here, its model call's usage with it.
        state.checkpoint(drive.lease, {**usage_fields(drive), **outcome})
        state.pause(drive.lease, detail)

    writes.commit(transition=transition)
    approvals.resume_if_decided(str(run.id))
    run.refresh_from_db()
    return run


def _finish(drive: Drive, outcome: StepOutcome) -> Run:
    """Write the terminal status with the step that led to it, then tell the world (event,
    callback) once it is committed."""
    run, tracer, writes = drive.run, drive.tracer, drive.writes
    status = outcome.status or RunStatus.FAILED
    own = drive.messages[run_start(drive.messages, drive.history_length) :]
    answer = outcome.answer or _stopped_answer(outcome.detail, own)
    response = ActionResponse(status, answer, outcome.detail, outcome.reason)
    tracer.end(
        tracer.start(SpanKind.ACTION_RESPONSE, status, drive.session_span, **response.attributes())
    )
    outcome_now = outcome_fields(drive)  # sets the run's outcome and counts
    ended = AgentSession(
        status=status,
        outcome=run.outcome,
        outcome_counts=run.outcome_counts,
        steps=run.steps,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
    )
    drive.session_span.set(**ended.attributes())
    if status != RunStatus.SUCCEEDED:
        drive.session_span.fail(SpanStatus.ERROR)
    tracer.end(drive.session_span)
    _end_segment(drive, ended=True)
    clear = [m.to_dict() for m in drive.messages]
    fields = {
        "answer": tracer.mask(answer),
        "status_detail": tracer.mask(outcome.detail),
        "stop_reason": outcome.reason,
        "messages": tracer.mask([m.to_dict() for m in own]),
        "sealed": seal({"input": drive.clear_input, "answer": answer}),
        **usage_fields(drive),
        **outcome_now,
    }
    if run.session_id:
        session_id = run.session_id
        masked_session = tracer.mask(clear)
        writes.inside_blind(  # an UPDATE whose count nobody reads
            lambda: Session.objects.filter(id=session_id).update(
                messages=masked_session, sealed_messages=seal(clear), updated_at=timezone.now()
            )
        )
    finished = {"status": status, "answer": answer, "stop_reason": outcome.reason}
    writes.event(EventType.RUN_FINISHED, tracer.mask(finished))
    run.status, run.answer, run.stop_reason = status, answer, outcome.reason
    writes.inside(
        lambda: webhooks.queue_run_event(run, f"run.{status}", answer=answer, mask=tracer.mask)
    )
    writes.commit(transition=lambda: state.finish(drive.lease, status, fields))
    run.refresh_from_db()
    run.answer = answer  # clear in memory only; stored masked
    return run


def _error_text(exc: BaseException) -> str:
    """An exception for the trace: storable text, bounded (a database error quotes the whole
    row it refused)."""
    text = clean_text(f"{type(exc).__name__}: {exc}")
    return text if len(text) <= ERROR_TEXT_LIMIT else f"{text[:ERROR_TEXT_LIMIT]}…"


ERROR_TEXT_LIMIT = 1000


def _last_resort(drive: Drive, outcome: StepOutcome) -> Run:
    """End a run whose step cannot be written: ``failed`` / ``internal_error`` in a
    transaction of its own, with what the run spent (tokens, cost, model calls: the run row
    and its budget ledger) and the tool calls that ran — named in the answer, each with a
    ``tool_call`` span and a ``tool_io`` audit record that says its arguments and result were
    not kept — but none of the step's rows, which the database refused. If even that cannot be
    written, the run row and the ledger alone."""
    run, tracer, writes = drive.run, drive.tracer, drive.writes
    writes.discard()
    tracer.discard()
    own = drive.messages[run_start(drive.messages, drive.history_length) :]
    stored = own[: writes.next_message]  # the messages committed before
    answer = _stopped_answer(outcome.detail, own)
    fields = {
        "answer": tracer.mask(answer),
        "status_detail": outcome.detail,
        "stop_reason": outcome.reason,
        "sealed": seal({"input": drive.clear_input, "answer": answer}),
        **usage_fields(drive),
    }
    try:
        for message in own[writes.next_message :]:
            if message.role == "tool":
                _unkept_call(drive, message)
        last = AgentSession(status=RunStatus.FAILED, stop_reason=outcome.reason, last_resort=True)
        drive.session_span.set(**last.attributes())
        drive.session_span.fail(SpanStatus.ERROR)
        tracer.end(drive.session_span)
        _end_segment(drive, ended=True)
        finished = {"status": RunStatus.FAILED, "answer": answer, "stop_reason": outcome.reason}
        writes.event(EventType.RUN_FINISHED, tracer.mask(finished))
        run.status, run.answer, run.stop_reason = RunStatus.FAILED, answer, outcome.reason
        writes.inside(
            lambda: webhooks.queue_run_event(
                run, f"run.{RunStatus.FAILED}", answer=answer, mask=tracer.mask
            )
        )
        messages = {"messages": tracer.mask([m.to_dict() for m in stored])}
        writes.commit(
            transition=lambda: state.finish(drive.lease, RunStatus.FAILED, fields | messages)
        )
    except state.LeaseLost:
        raise
    except Exception as exc:
        if retry.unreachable(exc) is not None:
            raise
        logger.exception("run %s: the last resort ends it with its spend only", run.id)
        writes.discard()
        tracer.discard()
        with transaction.atomic():
            state.finish(drive.lease, RunStatus.FAILED, fields)
            drive.guard.end_segment(ended=True)
            try:  # link what is stored of the run's chain, if the database lets it
                with transaction.atomic():
                    anchor_run(tracer.request_id, tracer.tenant, tracer.chain.head, final=True)
            except DatabaseError:
                logger.exception("run %s: its audit head could not be linked", run.id)
            transaction.on_commit(drive.guard.release_slot)
    run.refresh_from_db()
    run.answer = answer
    return run


def _unkept_call(drive: Drive, message: Message) -> None:
    """A call that ran in the step the database refused: its span and audit record, without
    the arguments and result (the step's rows held them)."""
    scope, tracer = drive.scope, drive.tracer
    parent = scope.parent if scope is not None else drive.session_span
    status = "error" if message.is_error else "ok"
    unkept = ToolCallSpan(call_id=message.tool_call_id, tool=message.name, last_resort=True)
    span = tracer.start(SpanKind.TOOL_CALL, message.name or "tool", parent, **unkept.attributes())
    if message.is_error:
        span.fail(SpanStatus.ERROR)
    tracer.audit(
        span,
        AuditKind.TOOL_IO,
        {
            "tool": message.name,
            "call_id": message.tool_call_id,
            "status": status,
            "kept": False,
            "detail": "The step that ran this call could not be written; its arguments and "
            "result were not kept.",
        },
    )
    tracer.end(span)
