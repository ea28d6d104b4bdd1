"""The agent loop engine: one run, step by step, until a final answer or a stop.

It is driven inline for sync runs and by Celery tasks for async ones. The driver holds a lease
on the run and renews it at every checkpoint; the model's response is checkpointed before any
of its tool calls run, and each tool result as it arrives, so a driver that dies is replaced by
another that resumes exactly where the checkpoint says: calls already answered are not run
again, calls not yet answered run with the same idempotency key.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from gateway.errors import GatewayError
from gateway.messages import Message, ModelResponse, StreamEvent, ToolCall
from gateway.services import complete
from harness import webhooks
from harness.agent_registry import AgentSpec, get_agent
from harness.context import build_context, transcript_for_summary
from harness.errors import HarnessError
from harness.events import EventType, emit
from harness.honesty import find_unreported_failures, honest_answer
from harness.models import Run, RunStatus, Session
from harness.run_policy import RunGuard, pause_run
from harness.tool_calls import (
    CallScope,
    declared_argument_pointers,
    handle_tool_calls,
    visible_tools,
)
from tools.errors import ToolFilesInvalid
from tools.services import get_tool_registry
from traces.services import (
    AuditKind,
    OpenSpan,
    SpanKind,
    SpanStatus,
    TraceRecorder,
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


def claim_run(run_id: str, owner: str) -> bool:
    """Take a queued run, or a running one whose driver's lease ran out. True for one caller."""
    now = timezone.now()
    claimable = Q(status=RunStatus.QUEUED) | Q(status=RunStatus.RUNNING, lease_expires_at__lt=now)
    claimed = Run.objects.filter(claimable, id=run_id).update(
        status=RunStatus.RUNNING,
        lease_owner=owner,
        lease_expires_at=now + timedelta(seconds=settings.HARNESS_RUN_LEASE_S),
    )
    if claimed:
        Run.objects.filter(id=run_id, started_at__isnull=True).update(started_at=now)
    return claimed == 1


def drive_run(run_id: str, driver: Driver) -> Run:
    """Drive a run this driver has claimed until it ends, pauses or is handed off.

    Side effects: model calls, tool executions, the run row (status, messages, usage), its
    events, trace and callbacks. Never raises for a failure of the model, a tool or a policy:
    those end the run with a status and a message.

    The model works on the clear conversation, read from the run's sealed (encrypted) working
    copy; everything stored readable — the run's messages and answer, events, the trace — is
    masked first. The returned run carries the clear answer in memory.
    """
    run = Run.objects.select_related("tenant", "session").get(id=run_id)
    tracer = TraceRecorder(run.request_id, run.tenant.slug)
    guard = RunGuard(run)  # budget, pacing, wall time and the concurrency slot
    state = unseal(run.sealed, {})
    run.clear_input = state.get("input", run.input)
    resumed = bool(state.get("messages"))
    session_span = tracer.start(
        SpanKind.AGENT_SESSION,
        run.agent,
        agent=run.agent,
        user_id=run.user_id,
        tenant=run.tenant.slug,
        run_id=str(run.id),
        resumed=resumed,
        driver=driver.owner,
    )
    emit(run.id, EventType.RUN_STARTED, {"resumed": resumed})
    try:
        agent = get_agent(run.agent)
        registry = get_tool_registry()
    except (HarnessError, ToolFilesInvalid) as exc:
        outcome = StepOutcome(RunStatus.FAILED, detail=str(exc), reason=StopReason.CONFIGURATION)
        return finish_run(run, tracer, session_span, outcome, [], guard)
    scope = CallScope(
        tenant=run.tenant.slug,
        user_id=run.user_id,
        run_id=str(run.id),
        agent=agent,
        registry=registry,
        tracer=tracer,
        parent=session_span,
    )
    messages = [Message.from_dict(m) for m in state.get("messages", [])] or _opening(run)
    try:
        return _drive(run, agent, scope, messages, driver, guard, tracer, session_span)
    except Exception as exc:
        # A bug of ours must not leave the run "running" forever: it fails, with the error
        # in the trace and the log, and nothing internal in the answer.
        logger.exception("run %s failed with an unexpected error", run.id)
        session_span.set(error=f"{type(exc).__name__}: {exc}")
        outcome = StepOutcome(
            RunStatus.FAILED,
            detail=f"The run failed with an internal error (request id {run.request_id}).",
            reason="internal_error",
        )
        return finish_run(run, tracer, session_span, outcome, messages, guard)


def _drive(
    run: Run,
    agent: AgentSpec,
    scope: CallScope,
    messages: list[Message],
    driver: Driver,
    guard: RunGuard,
    tracer: TraceRecorder,
    session_span: OpenSpan,
) -> Run:
    run_start = _first_index_of_this_run(run, messages)
    while True:
        outcome = _guard(run, driver)
        if outcome is None:
            pass
        elif outcome.reason == "handoff":
            guard.end_segment()
            return _hand_off(run, tracer, session_span, driver)
        elif outcome.reason == "lease_lost":
            tracer.end(session_span)
            return Run.objects.get(id=run.id)
        else:
            break
        pending = _unanswered_calls(messages)
        if pending:
            held = _run_tool_calls(run, scope, messages, pending, driver)
            if held:
                guard.end_segment()
                return _pause(run, tracer, session_span, held)
            continue
        outcome = _model_step(run, agent, scope, messages, guard)
        if not _checkpoint(run, messages, driver, tracer):
            tracer.end(session_span)
            return Run.objects.get(id=run.id)
        if outcome.status is not None:
            break
    if outcome.status == RunStatus.SUCCEEDED:
        outcome = _honesty_guard(outcome, messages[run_start:], tracer, session_span)
    return finish_run(run, tracer, session_span, outcome, messages, guard)


def _opening(run: Run) -> list[Message]:
    history = [Message.from_dict(m) for m in _session_history(run)]
    return [*history, Message(role="user", content=run.clear_input)]


def _session_history(run: Run) -> list[dict]:
    return unseal(run.session.sealed_messages, []) if run.session else []


def _first_index_of_this_run(run: Run, messages: list[Message]) -> int:
    """Where this run's own messages begin (after the session's earlier turns)."""
    return min(len(_session_history(run)), len(messages))


def _guard(run: Run, driver: Driver) -> StepOutcome | None:
    """Stops checked between steps: cancellation, deadline, hand-off, lost lease, max steps."""
    fresh = Run.objects.filter(id=run.id).values("cancel_requested_at", "lease_owner").get()
    if fresh["lease_owner"] != driver.owner:
        return StepOutcome(reason="lease_lost")
    if fresh["cancel_requested_at"] is not None:
        return StepOutcome(
            RunStatus.CANCELLED, detail="The run was cancelled.", reason=StopReason.CANCELLED
        )
    if run.deadline_at and timezone.now() >= run.deadline_at:
        return StepOutcome(
            RunStatus.DEADLINE_EXCEEDED,
            detail="The run reached its deadline before finishing.",
            reason=StopReason.DEADLINE,
        )
    if driver.handoff.is_set():
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


def _model_step(
    run: Run, agent: AgentSpec, scope: CallScope, messages: list[Message], guard: RunGuard
) -> StepOutcome:
    if run.steps >= run.max_steps:
        return StepOutcome(
            RunStatus.STEP_LIMIT,
            detail=f"The run stopped after {run.max_steps} steps without a final answer.",
            reason=StopReason.MAX_STEPS,
        )
    tools = visible_tools(agent, scope.registry, scope.tenant, scope.user_id)
    specs = [tool.spec() for tool in tools]
    context, stats = _context_for(run, agent, messages, specs)
    # Budget and pacing: reserve from an estimate before the call, settle after it.
    stop = guard.before_model_call(agent, context, specs)
    if stop is not None:
        reason = "budget" if stop.status == RunStatus.BUDGET_EXCEEDED else StopReason.DEADLINE
        return StepOutcome(stop.status, detail=stop.detail, reason=reason)
    run.steps += 1
    tracer = scope.tracer
    span = tracer.start(SpanKind.MODEL_CALL, f"step {run.steps}", scope.parent, step=run.steps)
    span.set(
        context_tokens=stats.context_tokens,
        context_full_tokens=stats.full_tokens,
        context_saved_tokens=stats.saved_tokens,
        context_method=stats.method,
    )
    # Each write commits on its own, on purpose: grouping a step's writes in one transaction
    # held the tenant's audit-chain head lock across budget and event writes, and concurrent
    # runs of one tenant deadlocked on it (measured with bench/loop.py, two workers).
    emit(run.id, EventType.STEP_STARTED, {"step": run.steps})
    if stats.method != "none":
        emit(
            run.id,
            EventType.CONTEXT_TRIMMED,
            {"method": stats.method, "saved_tokens": stats.saved_tokens},
        )
    tracer.audit(
        span,
        AuditKind.MODEL_REQUEST,
        {
            "route": agent.model or settings.HARNESS_MODEL,
            "messages": [m.to_dict() for m in context],
            "tools": [
                {"name": s.name, "description": s.description, "parameters": s.parameters}
                for s in specs
            ],
        },
    )
    try:
        turn = sum(1 for m in messages if m.role == "assistant")
        deltas = DeltaEvents(run.id, tracer)
        try:
            response = complete(
                agent.model or None,
                context,
                specs,
                fallbacks=agent.fallback_models,
                on_event=deltas.receive,
                turn=turn,
            )
        finally:
            deltas.flush()
    except GatewayError as exc:
        guard.after_model_call(None)
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
    span.set(charged_usd=guard.after_model_call(response) / 1_000_000)
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
        emit(run.id, EventType.TOOL_CALL_PROPOSED, tracer.mask(proposed, declared))
    messages.append(response.to_message())
    if not response.tool_calls:
        return StepOutcome(
            RunStatus.SUCCEEDED, answer=response.text, reason=StopReason.FINAL_ANSWER
        )
    if _repeats(messages):
        call = response.tool_calls[0]
        for pending in response.tool_calls:
            messages.append(
                _not_executed(pending, "the same call was proposed three times in a row")
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


def _context_for(run, agent, messages, specs):
    session = run.session
    cached = (session.summary, session.summary_covers) if session else ("", 0)

    def summarize(older: list[Message]) -> str | None:
        return _summarize(agent, older)

    context, stats = build_context(
        agent.system_prompt,
        messages,
        specs,
        agent.context_tokens or settings.HARNESS_CONTEXT_TOKENS,
        summarize,
        cached,
    )
    if session and stats.method == "summary" and stats.summary != session.summary:
        covers = len(messages) - (len(context) - 1)
        Session.objects.filter(id=session.id).update(summary=stats.summary, summary_covers=covers)
        session.summary, session.summary_covers = stats.summary, covers
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


def _run_tool_calls(
    run: Run, scope: CallScope, messages: list[Message], calls: list[ToolCall], driver: Driver
) -> list[ToolCall]:
    """Decide each call, run the allowed ones together (in parallel where safe), append the
    results in the model's order, whatever order they finish in, then checkpoint.

    Returns the calls held for a human's approval (they have no result yet).
    """
    ordered = sorted(calls, key=lambda c: c.index)
    held = []
    results = handle_tool_calls(ordered, scope)
    for call, (result, ok) in zip(ordered, results, strict=True):
        if result is None:
            held.append(call)
            continue
        messages.append(result)
        finished = {
            "call_id": call.id,
            "tool": call.name,
            "ok": ok,
            "error": None if ok else json.loads(result.content).get("error"),
        }
        emit(run.id, EventType.TOOL_CALL_FINISHED, scope.tracer.mask(finished))
    _put_results_in_call_order(messages)
    _checkpoint(run, messages, driver, scope.tracer)
    return held


def _put_results_in_call_order(messages: list[Message]) -> None:
    """Results answered after an approval come later than their neighbours: restore the
    model's order among the results of the last assistant message."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    if last < 0:
        return
    order = {call.id: call.index for call in messages[last].tool_calls}
    messages[last + 1 :] = sorted(
        messages[last + 1 :], key=lambda m: order.get(m.tool_call_id or "", len(order))
    )


def _pause(run: Run, tracer: TraceRecorder, session_span: OpenSpan, held: list[ToolCall]) -> Run:
    """Wait for approvals: persist ``awaiting_approval``, announce it, free the lease."""
    Run.objects.filter(id=run.id).update(lease_owner="", lease_expires_at=None)
    for call in held:
        emit(run.id, EventType.APPROVAL_NEEDED, {"call_id": call.id, "tool": call.name})
    paused = pause_run(run, tracer, session_span)
    if paused.status == RunStatus.AWAITING_APPROVAL:
        calls = [{"call_id": c.id, "tool": c.name} for c in held]
        webhooks.queue_run_event(
            paused, "run.awaiting_approval", extra={"awaiting": calls}, mask=tracer.mask
        )
    return paused


class DeltaEvents:
    """Streams text and reasoning deltas to the run's events, coalesced (one row per ~100 ms
    rather than one per token) and masked."""

    FLUSH_INTERVAL_S = 0.1

    def __init__(self, run_id: object, tracer: TraceRecorder) -> None:
        self.run_id = run_id
        self.tracer = tracer
        self.pending: dict[str, list[str]] = {"text": [], "reasoning": []}
        self.last_flush = time.monotonic()

    def receive(self, event: StreamEvent) -> None:
        if event.kind not in self.pending or not event.text:
            return  # complete tool calls are announced once the response is checkpointed
        self.pending[event.kind].append(event.text)
        if time.monotonic() - self.last_flush >= self.FLUSH_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        for kind, parts in self.pending.items():
            if parts:
                event_type = EventType.TEXT_DELTA if kind == "text" else EventType.REASONING_DELTA
                emit(self.run_id, event_type, {"text": self.tracer.mask("".join(parts))})
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


def _checkpoint(run: Run, messages: list[Message], driver: Driver, tracer: TraceRecorder) -> bool:
    """Persist the conversation (masked, and sealed in clear) and renew the lease.

    False if another driver took the run.
    """
    clear = [m.to_dict() for m in messages]
    run.messages = tracer.mask(clear)
    now = timezone.now()
    return (
        Run.objects.filter(id=run.id, lease_owner=driver.owner, status=RunStatus.RUNNING).update(
            messages=run.messages,
            sealed=seal({"input": run.clear_input, "messages": clear}),
            steps=run.steps,
            model_route=run.model_route,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
            cost_usd=run.cost_usd,
            lease_expires_at=now + timedelta(seconds=settings.HARNESS_RUN_LEASE_S),
            updated_at=now,
        )
        == 1
    )


def _hand_off(run: Run, tracer: TraceRecorder, session: OpenSpan, driver: Driver) -> Run:
    """Give the run back to the queue for a worker (the sync deadline passed)."""
    released = Run.objects.filter(
        id=run.id, lease_owner=driver.owner, status=RunStatus.RUNNING
    ).update(status=RunStatus.QUEUED, lease_owner="", lease_expires_at=None)
    session.set(handed_off=True)
    tracer.end(session)
    if released:
        from harness.dispatch import enqueue_run

        enqueue_run(run.id)
    return Run.objects.get(id=run.id)


def _honesty_guard(
    outcome: StepOutcome, messages: list[Message], tracer: TraceRecorder, parent: OpenSpan
) -> StepOutcome:
    failures = find_unreported_failures(outcome.answer, messages)
    if not failures:
        return outcome
    replaced = honest_answer(outcome.answer, failures)
    with tracer.span(SpanKind.POLICY_CHECK, "honesty guard", parent, check="honesty") as span:
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


def finish_run(
    run: Run,
    tracer: TraceRecorder,
    session_span: OpenSpan,
    outcome: StepOutcome,
    messages: list[Message],
    guard: RunGuard,
) -> Run:
    """Persist the terminal status first, then tell the world (span, event, callback)."""
    guard.end_segment()
    status = outcome.status or RunStatus.FAILED
    answer = outcome.answer or _stopped_answer(
        outcome.detail, messages[_first_index_of_this_run(run, messages) :]
    )
    now = timezone.now()
    clear = [m.to_dict() for m in messages]
    Run.objects.filter(id=run.id).update(
        status=status,
        answer=tracer.mask(answer),
        status_detail=tracer.mask(outcome.detail),
        sealed=seal({"input": run.clear_input, "messages": clear, "answer": answer}),
        stop_reason=outcome.reason,
        finished_at=now,
        updated_at=now,
        lease_owner="",
        lease_expires_at=None,
    )
    if run.session_id and messages:
        Session.objects.filter(id=run.session_id).update(
            messages=tracer.mask(clear), sealed_messages=seal(clear), updated_at=now
        )
    with tracer.span(SpanKind.ACTION_RESPONSE, status, session_span, status=status) as span:
        span.set(answer=answer, detail=outcome.detail, stop_reason=outcome.reason)
    session_span.set(
        status=status,
        steps=run.steps,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
    )
    if status != RunStatus.SUCCEEDED:
        session_span.fail(SpanStatus.ERROR)
    tracer.end(session_span)
    run.refresh_from_db()
    finished = {"status": status, "answer": answer, "stop_reason": outcome.reason}
    emit(run.id, EventType.RUN_FINISHED, tracer.mask(finished))
    webhooks.queue_run_event(run, f"run.{status}", answer=answer, mask=tracer.mask)
    run.answer = answer  # clear in memory only; stored masked
    return run
