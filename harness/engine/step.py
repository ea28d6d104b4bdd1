"""One step of the agent loop: what it does, and what it adds to the step's writes.

The model step builds the context (trimming or summarizing older turns), asks the model
(streaming its text to the run's events), records the response and its usage, and stops a
run that repeats itself; the tool step decides, runs and records the calls the model proposed.
Plans (plan, then act), the final answer's honesty guard and the announcement of budget
thresholds crossed (``announce``, which the driver also uses at a segment's end) live here too.
Everything goes into the drive's step buffer (``harness.engine.writes``) and is written by
``commit`` in one fenced transaction; the run's lifecycle around the steps is
``harness.engine.driver``.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal

from django.conf import settings

from gateway.errors import GatewayError
from gateway.messages import Message, ModelResponse, StreamEvent, ToolCall
from gateway.services import complete
from harness import webhooks
from harness.agent_registry import AgentSpec
from harness.engine import planning
from harness.engine.context import build_context, transcript_for_summary
from harness.engine.conversation import in_call_order, run_start
from harness.engine.drive import Drive, StepOutcome, StopReason
from harness.engine.honesty import check_answer
from harness.engine.outcome import Outcome
from harness.engine.tool_calls import (
    decide_tool_calls,
    declared_argument_pointers,
    execute_decided,
)
from harness.events import EventType
from harness.models import Run, RunStatus, Session
from policy import services as policy
from traces.services import AuditKind, OpenSpan, SpanKind, SpanStatus, seal, under
from traces.span_records import HonestyCheck, ModelCall

REPEATED_CALL_LIMIT = 3


def append(drive: Drive, message: Message) -> None:
    """A new message of the conversation: in memory now, stored with the step."""
    drive.messages.append(message)
    drive.writes.message(message.to_dict())
    if message.role == "tool":
        drive.tally.note(message)


def unanswered_calls(messages: list[Message]) -> list[ToolCall]:
    """Tool calls of the last assistant message that have no result yet (a resumed step)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant":
            answered = {m.tool_call_id for m in messages[index + 1 :] if m.role == "tool"}
            return [c for c in message.tool_calls if c.id not in answered]
        if message.role == "user":
            return []
    return []


def model_step(drive: Drive) -> StepOutcome:
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
    opened = ModelCall(step=run.steps)
    span = tracer.start(
        SpanKind.MODEL_CALL, f"step {run.steps}", scope.parent, **opened.attributes()
    )
    sent = ModelCall(
        context_tokens=stats.context_tokens,
        context_full_tokens=stats.full_tokens,
        context_saved_tokens=stats.saved_tokens,
        context_method=stats.method,
    )
    span.set(**sent.attributes())
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
        failed = ModelCall(error_code=str(exc.code), error=exc.message, attempts=exc.attempts)
        span.fail(**failed.attributes())
        tracer.end(span)
        return StepOutcome(
            RunStatus.FAILED,
            detail=f"The model could not be reached: {exc.message}",
            reason=StopReason.MODEL_ERROR,
        )
    except BaseException as exc:
        span.fail(**ModelCall(error=f"{type(exc).__name__}: {exc}").attributes())
        tracer.end(span)
        raise
    _record_response(run, span, response)
    charged = ModelCall(charged_usd=drive.guard.after_model_call(response) / 1_000_000)
    span.set(**charged.attributes())
    announce(drive, drive.guard.take_crossings(), run.callback_url)
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
    append(drive, response.to_message())
    if not response.tool_calls:
        return StepOutcome(
            RunStatus.SUCCEEDED, answer=response.text, reason=StopReason.FINAL_ANSWER
        )
    if _repeats(drive.messages):
        call = response.tool_calls[0]
        for pending in response.tool_calls:
            append(drive, _not_executed(pending, "the same call was proposed three times in a row"))
        return StepOutcome(
            RunStatus.FAILED,
            detail=(
                f"The run stopped: the model proposed {call.name} with the same arguments "
                f"{REPEATED_CALL_LIMIT} times in a row."
            ),
            reason=StopReason.REPEATED_CALL,
        )
    return StepOutcome()


def tool_step(drive: Drive) -> list[ToolCall]:
    """Decide the unanswered calls, commit the decisions with the calls about to run, run
    the allowed ones together (in parallel where safe), then commit their results in the
    model's order, whatever order they finish in. Returns the calls held for approval."""
    scope = drive.scope
    assert scope is not None
    calls = sorted(unanswered_calls(drive.messages), key=lambda c: c.index)
    decided = decide_tool_calls(calls, scope)
    for call in calls:  # refusals, in the model's order
        if call.id in decided.results:
            message, ok = decided.results[call.id]
            append(drive, message)
            _event_finished(drive, call, message, ok)
    if any(not planned.tool.idempotent for _, planned in decided.allowed):
        # The model's answer is stored before a call that must not run twice: a driver that
        # takes over continues from it (the tool's execution record then says whether the
        # call started) instead of asking the model again and getting other calls.
        _commit(drive)
    drive.last_failure = ""
    if decided.allowed:
        execute_decided(decided, scope)
        drive.writes.taking(decided, "outcomes")
        drive.writes.inside_blind(decided.store_outcomes)  # UPDATEs whose count nobody reads
        for call, _ in decided.allowed:
            message, ok = decided.results[call.id]
            append(drive, message)
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
    outcome = outcome_fields(drive)
    write_noted(drive)
    fence = drive.writes.commit({**usage_fields(drive), **outcome, **fields})
    if fence is None:
        return
    if fence.cancel_requested:
        drive.cancel_requested = True
    if drive.scope is not None:
        drive.scope.policy.moved_to(fence.policy_version)


def write_noted(drive: Drive) -> None:
    """The labels and held approvals noted since the last commit, written with the step."""
    if drive.scope is not None:
        drive.writes.taking(drive.scope.policy, "new_labels", "new_approvals")
        drive.writes.inside(drive.scope.policy.write_noted)


def usage_fields(drive: Drive) -> dict[str, object]:
    """What the run's row says of its use so far: steps, route, tokens, cost, counters."""
    run = drive.run
    return {
        "steps": run.steps,
        "model_route": run.model_route,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "cost_usd": run.cost_usd,
        "unpriced_calls": run.unpriced_calls,
        **drive.guard.counters(),
    }


def outcome_fields(drive: Drive) -> dict[str, object]:
    """The run's outcome as counted so far: set on the run in memory (webhooks queued with
    the step read it there) and returned as the columns the step's UPDATE writes."""
    fields = drive.tally.fields()
    drive.run.outcome, drive.run.outcome_counts = fields["outcome"], fields["outcome_counts"]
    return fields


def _turn(drive: Drive) -> int:
    """Which model call of the conversation this is (plans count: each took a call)."""
    return sum(1 for m in drive.messages if m.role == "assistant") + len(drive.plans)


def plan(drive: Drive, failure: str = "") -> None:
    """Plan, then act: ask for a plan (or, after ``failure``, a revised one), bounded, and
    record it — span, audit, event, ``Run.plans`` (masked) and ``Run.sealed_plans`` (the clear
    copy the next steps follow) — and commit it. A plan that cannot be had (budget,
    the model unreachable) is skipped: the loop goes on, and stops there if it must."""
    run, agent, scope, tracer = drive.run, drive.agent, drive.scope, drive.tracer
    assert agent is not None
    assert scope is not None
    failure = planning.bounded_reason(failure)
    tools = [tool.name for tool in scope.policy.visible_tools(agent, scope.registry)]
    own = drive.messages[run_start(drive.messages, drive.history_length) :]
    messages = planning.planning_messages(agent, own, tools, failure)
    if drive.guard.before_model_call(agent, messages, []) is not None:
        return
    planning_call = ModelCall(plan=True, revision=bool(failure))
    span = tracer.start(SpanKind.MODEL_CALL, "plan", scope.parent, **planning_call.attributes())
    route = agent.model or settings.HARNESS_MODEL
    tracer.audit_model_request(span, route, [m.to_dict() for m in messages], [])
    try:
        response, steps, truncated = planning.request_plan(agent, messages, _turn(drive))
    except GatewayError as exc:
        drive.guard.after_model_call(None)
        span.fail(**ModelCall(error_code=str(exc.code), error=exc.message).attributes())
        tracer.end(span)
        return
    _record_response(run, span, response)
    charged_usd = drive.guard.after_model_call(response) / 1_000_000
    span.set(**ModelCall(charged_usd=charged_usd, plan_steps=steps).attributes())
    entry: dict[str, object] = {"steps": steps, "reason": failure or "first plan"}
    if truncated:  # the model's plan was over the bounds: what is kept, and that it was cut
        span.set(**ModelCall(plan_truncated=True).attributes())
        entry["truncated"] = True
    tracer.audit(span, AuditKind.MODEL_RESPONSE, response.to_dict())
    tracer.end(span)
    announce(drive, drive.guard.take_crossings(), run.callback_url)
    # Stored like the conversation: masked where it is read, in clear only sealed.
    drive.plans = [*drive.plans, entry]
    masked = tracer.mask(entry)
    run.plans = [*run.plans, masked]
    event = EventType.PLAN_REVISED if failure else EventType.PLAN_CREATED
    drive.writes.event(event, masked)
    _commit(drive, plans=run.plans, sealed_plans=seal(drive.plans))


def _context_for(drive: Drive, specs: list) -> tuple[list[Message], object]:
    run, agent = drive.run, drive.agent
    assert agent is not None
    session = run.session
    cached = (session.summary, session.summary_covers) if session else ("", 0)

    def summarize(older: list[Message]) -> str | None:
        return _summarize(agent, older)

    context, stats = build_context(
        agent.system_prompt + planning.plan_instructions(drive.plans),
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
    if response.cost_usd is None:
        run.unpriced_calls += 1
    else:
        run.cost_usd += Decimal(str(response.cost_usd))
    span.set(**_answered(response).attributes())


def _answered(response: ModelResponse) -> ModelCall:
    """The answer's part of a ``model_call`` span, field for field from the response (a
    keyword list: docs/architecture.md, "Repetition left on purpose")."""
    usage = response.usage
    return ModelCall(
        route=response.route,
        model=response.model,
        finish_reason=response.finish_reason,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        tool_calls=[c.name for c in response.tool_calls],
        attempts=response.attempts,
        cost_usd=response.cost_usd,
        normalised=response.normalised or None,
    )


def honesty_guard(drive: Drive, outcome: StepOutcome) -> StepOutcome:
    """The final answer checked against the run's calls, both ways; a contradiction is
    corrected, recorded (a ``policy_check`` span named "honesty guard") and counted."""
    own = drive.messages[run_start(drive.messages, drive.history_length) :]
    verdict = check_answer(outcome.answer, own)
    if not verdict.corrected:
        return outcome
    check = HonestyCheck(
        original_answer=outcome.answer,
        replaced_answer=verdict.answer,
        failures=[f.__dict__ for f in verdict.findings if f.kind != "claimed_inaction"],
        contradictions=[f.__dict__ for f in verdict.findings if f.sentence],
    )
    tracer = drive.tracer
    span = tracer.start(SpanKind.POLICY_CHECK, "honesty guard", drive.session_span)
    span.fail(SpanStatus.REFUSED, **check.attributes())
    tracer.end(span)
    drive.tally.add(Outcome.CORRECTED)
    outcome.answer = verdict.answer
    return outcome


def announce(drive: Drive, crossings: list, url: str, now: bool = False) -> None:
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
