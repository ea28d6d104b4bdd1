"""The agent loop: one run, step by step, until a final answer or a stop.

It is driven inline for sync runs and by a Celery task for async ones, by whoever claimed the
run's lease (``harness.engine.state``). A step is at most two fenced transactions:

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

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gateway.errors import GatewayError
from gateway.messages import Message, ModelResponse, StreamEvent, ToolCall
from gateway.services import complete
from harness import webhooks
from harness.agent_registry import AgentSpec, get_agent
from harness.engine import approvals, planning, state
from harness.engine.context import build_context, transcript_for_summary
from harness.engine.conversation import in_call_order, load_run_messages
from harness.engine.decisions import run_start
from harness.engine.guard import RunGuard
from harness.engine.heartbeat import get_heartbeat
from harness.engine.honesty import find_unreported_failures, honest_answer
from harness.engine.tool_calls import (
    CallScope,
    DrivePolicy,
    decide_tool_calls,
    declared_argument_pointers,
    execute_decided,
)
from harness.engine.writes import StepWrites
from harness.errors import HarnessError
from harness.events import EventType, last_sequence
from harness.models import Run, RunStatus, Session
from policy import services as policy
from tools.errors import ToolFilesInvalid
from tools.services import get_tool_registry
from traces.services import (
    AuditKind,
    OpenSpan,
    SpanKind,
    SpanStatus,
    TraceRecorder,
    anchor_run,
    seal,
    under,
    unseal,
)

REPEATED_CALL_LIMIT = 3
logger = logging.getLogger(__name__)


class StopReason:
    FINAL_ANSWER = "final_answer"
    MAX_STEPS = "max_steps"
    REPEATED_CALL = "repeated_call"
    DEADLINE = "deadline"
    CANCELLED = "cancelled"
    MODEL_ERROR = "model_error"
    CONFIGURATION = "configuration"


@dataclass
class StepOutcome:
    """What a step ended with: ``status`` None means "go on"."""

    status: RunStatus | None = None
    answer: str = ""
    detail: str = ""
    reason: str = ""


@dataclass
class Driver:
    """Who drives a run now, and whether they were asked to hand it to a worker."""

    owner: str
    handoff: threading.Event = field(default_factory=threading.Event)


@dataclass
class Drive:
    """Everything one drive of a run keeps in memory between its steps."""

    run: Run
    lease: state.Lease
    driver: Driver
    lost: threading.Event
    tracer: TraceRecorder
    writes: StepWrites
    guard: RunGuard
    session_span: OpenSpan
    messages: list[Message]
    history_length: int
    clear_input: str
    cancel_requested: bool = False
    policy: DrivePolicy | None = None
    # Why the last step's tool call failed (plan, then act: triggers one revision).
    last_failure: str = ""
    scope: CallScope | None = None
    agent: AgentSpec | None = None


def drive_run(run_id: str, driver: Driver, lease: state.Lease) -> Run:
    """Drive a run this driver has claimed until it ends, pauses or is handed off.

    Side effects: model calls, tool executions, the run row (status, conversation, usage),
    its events, trace and callbacks. Never raises for a failure of the model, a tool or a
    policy: those end the run with a status and a message. A driver that lost its lease stops
    without writing anything more.

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
            # A bug of ours must not leave the run "running" forever: it fails, with the error
            # in the trace and the log, and nothing internal in the answer.
            logger.exception("run %s failed with an unexpected error", run_id)
            drive.session_span.set(error=f"{type(exc).__name__}: {exc}")
            outcome = StepOutcome(
                RunStatus.FAILED,
                detail=f"The run failed with an internal error (request id "
                f"{drive.run.request_id}).",
                reason="internal_error",
            )
            return _finish(drive, outcome)
    except state.LeaseLost:
        logger.info("run %s: lease %s lost, the driver stops", run_id, lease.token)
        return Run.objects.get(id=run_id)
    finally:
        get_heartbeat().release(lease)


def _open(run_id: str, driver: Driver, lease: state.Lease, lost: threading.Event) -> Drive:
    run = Run.objects.select_related("tenant", "session").get(id=run_id)
    tracer = TraceRecorder(run.request_id, run.tenant.slug, buffered=True)
    history = _session_history(run)
    own = load_run_messages(run)
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
        session_span=tracer.start(
            SpanKind.AGENT_SESSION,
            run.agent,
            agent=run.agent,
            user_id=run.user_id,
            tenant=run.tenant.slug,
            run_id=str(run.id),
            resumed=resumed,
            driver=driver.owner,
        ),
        messages=[*history, *own],
        history_length=len(history),
        clear_input=clear_input,
        cancel_requested=run.cancel_requested_at is not None,
    )
    if not own:
        _append(drive, Message(role="user", content=clear_input))
    writes.event(EventType.RUN_STARTED, {"resumed": resumed})
    drive.policy = DrivePolicy.load(run.tenant.slug, run.user_id, str(run.id))
    tracer.chain.head  # noqa: B018 (the run's audit head, read now with the rest)
    return drive


def _drive(drive: Drive) -> Run:
    run = drive.run
    try:
        drive.agent = get_agent(run.agent)
        registry = get_tool_registry()
    except (HarnessError, ToolFilesInvalid) as exc:
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
    )
    while True:
        outcome = _between_steps(drive)
        if outcome is not None:
            if outcome.reason == "handoff":
                return _hand_off(drive)
            break
        if planning.wants_plan(drive.agent, run.plans):
            _plan(drive)
        if not _unanswered_calls(drive.messages):
            outcome = _model_step(drive)
            if outcome.status is not None:
                break
        held = _tool_step(drive)
        if held:
            return _pause(drive, held)
        if drive.last_failure and planning.may_replan(drive.agent, run.plans):
            _plan(drive, drive.last_failure)
    if outcome.status == RunStatus.SUCCEEDED:
        outcome = _honesty_guard(drive, outcome)
    return _finish(drive, outcome)


def _session_history(run: Run) -> list[Message]:
    sealed = unseal(run.session.sealed_messages, []) if run.session else []
    return [Message.from_dict(m) for m in sealed]


def _append(drive: Drive, message: Message) -> None:
    """A new message of the conversation: in memory now, stored with the step."""
    drive.messages.append(message)
    drive.writes.message(message.to_dict())


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


def _unanswered_calls(messages: list[Message]) -> list[ToolCall]:
    """Tool calls of the last assistant message that have no result yet (a resumed step)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant":
            answered = {m.tool_call_id for m in messages[index + 1 :] if m.role == "tool"}
            return [c for c in message.tool_calls if c.id not in answered]
        if message.role == "user":
            return []
    return []


def _model_step(drive: Drive) -> StepOutcome:
    run, agent, scope = drive.run, drive.agent, drive.scope
    assert agent is not None
    assert scope is not None
    if run.steps >= run.max_steps:
        return StepOutcome(
            RunStatus.STEP_LIMIT,
            detail=f"The run stopped after {run.max_steps} steps without a final answer.",
            reason=StopReason.MAX_STEPS,
        )
    specs = [tool.spec() for tool in scope.policy.visible_tools(agent, scope.registry)]
    context, stats = _context_for(drive, specs)
    # Budget and pacing, before the call.
    stop = drive.guard.before_model_call(agent, context, specs)
    if stop is not None:
        reason = "budget" if stop.status == RunStatus.BUDGET_EXCEEDED else StopReason.DEADLINE
        return StepOutcome(stop.status, detail=stop.detail, reason=reason)
    run.steps += 1
    tracer, writes = drive.tracer, drive.writes
    span = tracer.start(SpanKind.MODEL_CALL, f"step {run.steps}", scope.parent, step=run.steps)
    span.set(
        context_tokens=stats.context_tokens,
        context_full_tokens=stats.full_tokens,
        context_saved_tokens=stats.saved_tokens,
        context_method=stats.method,
    )
    writes.event(EventType.STEP_STARTED, {"step": run.steps})
    if stats.method != "none":
        writes.event(
            EventType.CONTEXT_TRIMMED, {"method": stats.method, "saved_tokens": stats.saved_tokens}
        )
    tracer.audit_model_request(
        span,
        agent.model or settings.HARNESS_MODEL,
        [tracer.mask_message(m) for m in context],
        [{"name": s.name, "description": s.description, "parameters": s.parameters} for s in specs],
        masked=True,
    )
    try:
        turn = _turn(drive)
        deltas = DeltaEvents(drive)
        response = complete(
            agent.model or None,
            context,
            specs,
            fallbacks=agent.fallback_models,
            on_event=deltas.receive,
            turn=turn,
        )
        deltas.flush()
    except GatewayError as exc:
        drive.guard.after_model_call(None)
        span.fail(error_code=str(exc.code), error=exc.message, attempts=exc.attempts)
        tracer.end(span)
        return StepOutcome(
            RunStatus.FAILED,
            detail=f"The model could not be reached: {exc.message}",
            reason=StopReason.MODEL_ERROR,
        )
    except BaseException as exc:
        span.fail(error=f"{type(exc).__name__}: {exc}")
        tracer.end(span)
        raise
    _record_response(run, span, response)
    span.set(charged_usd=drive.guard.after_model_call(response) / 1_000_000)
    _announce(drive, drive.guard.take_crossings(), run.callback_url)
    tracer.audit(
        span,
        AuditKind.MODEL_RESPONSE,
        response.to_dict(),
        sensitive=declared_argument_pointers(response.tool_calls, scope.registry),
    )
    tracer.end(span)
    for call in response.tool_calls:
        tool = scope.registry.get(call.name)
        declared = under("/arguments", tool.sensitive.get("arguments")) if tool else {}
        proposed = {"call_id": call.id, "tool": call.name, "arguments": call.arguments}
        writes.event(EventType.TOOL_CALL_PROPOSED, tracer.mask(proposed, declared))
    _append(drive, response.to_message())
    if not response.tool_calls:
        return StepOutcome(
            RunStatus.SUCCEEDED, answer=response.text, reason=StopReason.FINAL_ANSWER
        )
    if _repeats(drive.messages):
        call = response.tool_calls[0]
        for pending in response.tool_calls:
            _append(
                drive, _not_executed(pending, "the same call was proposed three times in a row")
            )
        return StepOutcome(
            RunStatus.FAILED,
            detail=(
                f"The run stopped: the model proposed {call.name} with the same arguments "
                f"{REPEATED_CALL_LIMIT} times in a row."
            ),
            reason=StopReason.REPEATED_CALL,
        )
    return StepOutcome()


def _tool_step(drive: Drive) -> list[ToolCall]:
    """Decide the unanswered calls, commit the decisions with the calls about to run, run
    the allowed ones together (in parallel where safe), then commit their results in the
    model's order, whatever order they finish in. Returns the calls held for approval."""
    scope = drive.scope
    assert scope is not None
    calls = sorted(_unanswered_calls(drive.messages), key=lambda c: c.index)
    decided = decide_tool_calls(calls, scope)
    for call in calls:  # refusals, in the model's order
        if call.id in decided.results:
            message, ok = decided.results[call.id]
            _append(drive, message)
            _event_finished(drive, call, message, ok)
    if any(not planned.tool.idempotent for _, planned in decided.allowed):
        # The model's answer is stored before a call that must not run twice: a driver that
        # takes over continues from it (the tool's execution record then says whether the
        # call started) instead of asking the model again and getting other calls.
        _commit(drive)
    drive.last_failure = ""
    if decided.allowed:
        execute_decided(decided, scope)
        drive.writes.inside_blind(decided.store_outcomes)  # UPDATEs whose count nobody reads
        for call, _ in decided.allowed:
            message, ok = decided.results[call.id]
            _append(drive, message)
            _event_finished(drive, call, message, ok)
            if not ok:
                error = json.loads(message.content).get("error") or {}
                drive.last_failure = f"{call.name}: {error.get('message', 'failed')}"
    # Only the results after the last assistant message can be out of the model's order.
    last = max(i for i, m in enumerate(drive.messages) if m.role == "assistant")
    drive.messages[last:] = in_call_order(drive.messages[last:])
    if not decided.held:  # a pause writes the step with the run's new status
        _commit(drive)
    return decided.held


def _event_finished(drive: Drive, call: ToolCall, message: Message, ok: bool) -> None:
    finished = {
        "call_id": call.id,
        "tool": call.name,
        "ok": ok,
        "error": None if ok else json.loads(message.content).get("error"),
    }
    drive.writes.event(EventType.TOOL_CALL_FINISHED, drive.tracer.mask(finished))


def _commit(drive: Drive, **fields: object) -> None:
    """Write the step so far in one fenced transaction; notes a cancellation request."""
    run = drive.run
    if drive.scope is not None:
        drive.writes.inside(drive.scope.policy.write_labels)
    fence = drive.writes.commit(
        {
            "steps": run.steps,
            "model_route": run.model_route,
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
            "cost_usd": run.cost_usd,
            "plans": run.plans,
            **drive.guard.counters(),
            **fields,
        }
    )
    if fence is None:
        return
    if fence.cancel_requested:
        drive.cancel_requested = True
    if drive.scope is not None:
        drive.scope.policy.moved_to(fence.policy_version)


def _turn(drive: Drive) -> int:
    """Which model call of the conversation this is (plans count: each took a call)."""
    return sum(1 for m in drive.messages if m.role == "assistant") + len(drive.run.plans)


def _plan(drive: Drive, failure: str = "") -> None:
    """Plan, then act: ask for a plan (or, after ``failure``, a revised one), record it —
    span, audit, event, ``Run.plans`` — and commit it. A plan that cannot be had (budget,
    the model unreachable) is skipped: the loop goes on, and stops there if it must."""
    run, agent, scope, tracer = drive.run, drive.agent, drive.scope, drive.tracer
    assert agent is not None
    assert scope is not None
    tools = [tool.name for tool in scope.policy.visible_tools(agent, scope.registry)]
    own = drive.messages[run_start(drive.messages, drive.history_length) :]
    messages = planning.planning_messages(agent, own, tools, failure)
    if drive.guard.before_model_call(agent, messages, []) is not None:
        return
    span = tracer.start(
        SpanKind.MODEL_CALL, "plan", scope.parent, plan=True, revision=bool(failure)
    )
    route = agent.model or settings.HARNESS_MODEL
    tracer.audit_model_request(span, route, [m.to_dict() for m in messages], [])
    try:
        response, steps = planning.request_plan(agent, messages, _turn(drive))
    except GatewayError as exc:
        drive.guard.after_model_call(None)
        span.fail(error_code=str(exc.code), error=exc.message)
        tracer.end(span)
        return
    _record_response(run, span, response)
    span.set(charged_usd=drive.guard.after_model_call(response) / 1_000_000, plan_steps=steps)
    tracer.audit(span, AuditKind.MODEL_RESPONSE, response.to_dict())
    tracer.end(span)
    _announce(drive, drive.guard.take_crossings(), run.callback_url)
    run.plans = [*run.plans, {"steps": steps, "reason": failure or "first plan"}]
    event = EventType.PLAN_REVISED if failure else EventType.PLAN_CREATED
    drive.writes.event(event, tracer.mask({"steps": steps, "reason": failure or "first plan"}))
    _commit(drive)


def _context_for(drive: Drive, specs: list) -> tuple[list[Message], object]:
    run, agent = drive.run, drive.agent
    assert agent is not None
    session = run.session
    cached = (session.summary, session.summary_covers) if session else ("", 0)

    def summarize(older: list[Message]) -> str | None:
        return _summarize(agent, older)

    context, stats = build_context(
        agent.system_prompt + planning.plan_instructions(run.plans),
        drive.messages,
        specs,
        agent.context_tokens or settings.HARNESS_CONTEXT_TOKENS,
        summarize,
        cached,
    )
    if session and stats.method == "summary" and stats.summary != session.summary:
        covers = len(drive.messages) - (len(context) - 1)
        summary = stats.summary
        session_id = session.id
        drive.writes.inside(
            lambda: Session.objects.filter(id=session_id).update(
                summary=summary, summary_covers=covers
            )
        )
        session.summary, session.summary_covers = summary, covers
    return context, stats


def _summarize(agent: AgentSpec, older: list[Message]) -> str | None:
    """Ask the agent's summary route for a summary; None when it gives no usable text."""
    prompt = [
        Message(
            role="system",
            content=(
                "Summarise this conversation between a user and an assistant that uses tools. "
                "Keep every fact the assistant may need later: ids, decisions, results, errors."
            ),
        ),
        Message(role="user", content=transcript_for_summary(older)),
    ]
    try:
        response = complete(agent.summary_model or agent.model or None, prompt, [])
    except GatewayError:
        return None
    if response.tool_calls or not response.text.strip():
        return None
    return response.text


def _repeats(messages: list[Message]) -> bool:
    """The last REPEATED_CALL_LIMIT assistant turns proposed the very same calls."""
    signatures = []
    for message in reversed(messages):
        if message.role == "assistant":
            if not message.tool_calls:
                break
            signatures.append(
                tuple((c.name, json.dumps(c.arguments, sort_keys=True)) for c in message.tool_calls)
            )
            if len(signatures) == REPEATED_CALL_LIMIT:
                break
    return len(signatures) == REPEATED_CALL_LIMIT and len(set(signatures)) == 1


def _not_executed(call: ToolCall, why: str) -> Message:
    body = {
        "ok": False,
        "error": {"code": "not_executed", "message": f"Not executed: {why}.", "details": {}},
    }
    return Message(
        role="tool", content=json.dumps(body), tool_call_id=call.id, name=call.name, is_error=True
    )


class DeltaEvents:
    """Streams text and reasoning deltas to the run's events, coalesced (one row per ~100 ms
    rather than one per token) and masked; what is left at the end goes with the step."""

    FLUSH_INTERVAL_S = 0.1

    def __init__(self, drive: Drive) -> None:
        self.drive = drive
        self.pending: dict[str, list[str]] = {"text": [], "reasoning": []}
        self.last_flush = time.monotonic()

    def receive(self, event: StreamEvent) -> None:
        if event.kind not in self.pending or not event.text:
            return  # complete tool calls are announced once the response is checkpointed
        self.pending[event.kind].append(event.text)
        if time.monotonic() - self.last_flush >= self.FLUSH_INTERVAL_S:
            self.flush()
            # A slow stream: send what came so far now (fenced, like every write).
            self.drive.writes.commit({})

    def flush(self) -> None:
        for kind, parts in self.pending.items():
            if parts:
                event_type = EventType.TEXT_DELTA if kind == "text" else EventType.REASONING_DELTA
                text = self.drive.tracer.mask("".join(parts))
                self.drive.writes.event(event_type, {"text": text})
                parts.clear()
        self.last_flush = time.monotonic()


def _record_response(run: Run, span: OpenSpan, response: ModelResponse) -> None:
    usage = response.usage
    run.model_route = response.route
    run.prompt_tokens += usage.prompt_tokens
    run.completion_tokens += usage.completion_tokens
    run.cost_usd += Decimal(str(response.cost_usd or 0))
    span.set(
        route=response.route,
        model=response.model,
        finish_reason=response.finish_reason,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        tool_calls=[c.name for c in response.tool_calls],
        attempts=response.attempts,
        cost_usd=response.cost_usd,
    )


def _honesty_guard(drive: Drive, outcome: StepOutcome) -> StepOutcome:
    own = drive.messages[run_start(drive.messages, drive.history_length) :]
    failures = find_unreported_failures(outcome.answer, own)
    if not failures:
        return outcome
    replaced = honest_answer(outcome.answer, failures)
    with drive.tracer.span(
        SpanKind.POLICY_CHECK, "honesty guard", drive.session_span, check="honesty"
    ) as span:
        span.fail(
            SpanStatus.REFUSED,
            original_answer=outcome.answer,
            replaced_answer=replaced,
            failures=[f.__dict__ for f in failures],
        )
    outcome.answer = replaced
    return outcome


def _stopped_answer(detail: str, messages: list[Message]) -> str:
    """Why the run stopped, and what it achieved before (the tool calls that succeeded)."""
    done = [m.name for m in messages if m.role == "tool" and not m.is_error and m.name]
    if not done:
        return f"{detail} No action was completed."
    return f"{detail} Completed before stopping: {', '.join(done)}."


def _announce(drive: Drive, crossings: list, url: str, now: bool = False) -> None:
    """Budget thresholds crossed: a ``budget.threshold`` event on the run's stream and a
    signed webhook (to the run's callback for its own budget, to the tenant's alert URL for
    the day's), each written with the step; ``now``: from inside its transaction."""
    run, tracer, writes = drive.run, drive.tracer, drive.writes
    for crossing in crossings:
        data = crossing.event()
        if now:
            writes.event_now(EventType.BUDGET_THRESHOLD, data)
            webhooks.queue_run_event(run, "budget.threshold", extra=data, mask=tracer.mask, url=url)
            continue
        writes.event(EventType.BUDGET_THRESHOLD, data)
        writes.inside(
            lambda data=data: webhooks.queue_run_event(
                run, "budget.threshold", extra=data, mask=tracer.mask, url=url
            )
        )
    if crossings and not now:  # the day's were recorded when they were claimed
        writes.inside(lambda: policy.record_run_crossings(crossings))


def _end_segment(drive: Drive, ended: bool) -> None:
    """What every last transaction of a segment writes besides the run row: the budget (and
    the day's thresholds this run is first to cross), the labels, and the run's audit head
    linked into the tenant's chain."""
    guard = drive.guard

    def budget() -> None:
        day = guard.end_segment(ended)
        _announce(drive, day, guard.limits.alert_url, now=True)

    drive.writes.inside(budget)
    if drive.scope is not None:
        drive.writes.inside(drive.scope.policy.write_labels)
    tracer = drive.tracer
    drive.writes.inside(lambda: anchor_run(tracer.request_id, tracer.tenant, tracer.chain.head))
    drive.writes.after_commit(drive.guard.release_slot)


def _hand_off(drive: Drive) -> Run:
    """Give the run back to the queue for a worker (the sync deadline passed)."""
    from harness.dispatch import enqueue_run

    drive.session_span.set(handed_off=True)
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
    run, tracer, writes = drive.run, drive.tracer, drive.writes
    for call in held:
        writes.event(EventType.APPROVAL_NEEDED, {"call_id": call.id, "tool": call.name})
    detail = approvals.waiting_detail(run)
    drive.session_span.set(
        status=RunStatus.AWAITING_APPROVAL, steps=run.steps, waiting_for=[c.id for c in held]
    )
    tracer.end(drive.session_span)
    _end_segment(drive, ended=False)
    run.status = RunStatus.AWAITING_APPROVAL
    calls = [{"call_id": c.id, "tool": c.name} for c in held]
    writes.inside(
        lambda: webhooks.queue_run_event(
            run, "run.awaiting_approval", extra={"awaiting": calls}, mask=tracer.mask
        )
    )

    def transition() -> None:
        state.checkpoint(drive.lease, {"steps": run.steps, **drive.guard.counters()})
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
    with tracer.span(SpanKind.ACTION_RESPONSE, status, drive.session_span, status=status) as span:
        span.set(answer=answer, detail=outcome.detail, stop_reason=outcome.reason)
    drive.session_span.set(
        status=status,
        steps=run.steps,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
    )
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
        "steps": run.steps,
        "model_route": run.model_route,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "cost_usd": run.cost_usd,
        **drive.guard.counters(),
    }
    if run.session_id:
        session_id = run.session_id
        masked_session = tracer.mask(clear)
        writes.inside(
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
