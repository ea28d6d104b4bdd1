"""The agent loop engine: one run, step by step, until a final answer or a stop.

It is driven inline for sync runs and by a Celery task for async ones. Each step is
checkpointed (messages, step count, usage) before the next begins, and the run's status is
persisted before it is acted on, so another worker can pick the run up.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from gateway.errors import GatewayError
from gateway.messages import Message, ModelResponse
from gateway.services import complete
from harness.agent_registry import AgentSpec, get_agent
from harness.errors import HarnessError
from harness.models import Run, RunStatus
from harness.run_policy import RunGuard, pause_run
from harness.tool_calls import CallScope, answer_held_calls, handle_tool_call, visible_tools
from tools.errors import ToolFilesInvalid
from tools.services import get_tool_registry
from traces.services import AuditKind, OpenSpan, SpanKind, SpanStatus, TraceRecorder


@dataclass
class StepOutcome:
    """What one model step ended with: ``None`` status means "go on"."""

    status: RunStatus | None = None
    answer: str = ""
    detail: str = ""


def claim_run(run_id: str) -> bool:
    """Move a queued run to running; True for exactly one caller (safe under redelivery)."""
    claimed = Run.objects.filter(id=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=timezone.now()
    )
    return claimed == 1


def drive_run(run_id: str) -> Run:
    """Run the loop of a run already claimed (status running) to its end.

    Side effects: model calls, tool executions, the run row (status, messages, usage) and its
    trace. Never raises for a failure of the model, a tool or a policy: those end the run with
    a status and a message.
    """
    run = Run.objects.select_related("tenant").get(id=run_id)
    guard = RunGuard(run)
    tracer = TraceRecorder(run.request_id, run.tenant.slug)
    session = tracer.start(
        SpanKind.AGENT_SESSION,
        run.agent,
        agent=run.agent,
        user_id=run.user_id,
        tenant=run.tenant.slug,
        run_id=str(run.id),
    )
    try:
        agent = get_agent(run.agent)
        registry = get_tool_registry()
    except (HarnessError, ToolFilesInvalid) as exc:
        outcome = StepOutcome(RunStatus.FAILED, detail=str(exc))
        return _finish(run, tracer, session, outcome, guard)
    scope = CallScope(
        tenant=run.tenant.slug,
        user_id=run.user_id,
        run_id=str(run.id),
        agent=agent,
        registry=registry,
        tracer=tracer,
        parent=session,
    )
    messages = [Message.from_dict(m) for m in run.messages] or _opening(agent, run)
    # Resuming after approvals: the held calls are executed or refused, never re-proposed.
    if answer_held_calls(messages, scope):
        _checkpoint(run, messages)
        return _finish(run, tracer, session, StepOutcome(RunStatus.AWAITING_APPROVAL), guard)
    while True:
        if run.steps >= run.max_steps:
            outcome = StepOutcome(
                RunStatus.STEP_LIMIT,
                detail=f"The run stopped after {run.max_steps} steps without a final answer.",
            )
            break
        outcome = _step(run, agent, scope, messages, guard)
        _checkpoint(run, messages)
        if outcome.status is not None:
            break
    return _finish(run, tracer, session, outcome, guard)


def _opening(agent: AgentSpec, run: Run) -> list[Message]:
    return [
        Message(role="system", content=agent.system_prompt),
        Message(role="user", content=run.input),
    ]


def _step(
    run: Run, agent: AgentSpec, scope: CallScope, messages: list[Message], guard: RunGuard
) -> StepOutcome:
    tools = visible_tools(agent, scope.registry, scope.tenant, scope.user_id)
    specs = [tool.spec() for tool in tools]
    stop = guard.before_model_call(agent, messages, specs)
    if stop is not None:
        return StepOutcome(stop.status, detail=stop.detail)
    run.steps += 1
    tracer = scope.tracer
    with tracer.span(
        SpanKind.MODEL_CALL, f"step {run.steps}", scope.parent, step=run.steps
    ) as span:
        tracer.audit(
            span,
            AuditKind.MODEL_REQUEST,
            {
                "route": run.model_route or None,
                "messages": [m.to_dict() for m in messages],
                "tools": [
                    {"name": s.name, "description": s.description, "parameters": s.parameters}
                    for s in specs
                ],
            },
        )
        try:
            response = complete(agent.model or None, messages, specs)
        except GatewayError as exc:
            guard.after_model_call(None)
            span.fail(error_code=str(exc.code), error=exc.message)
            return StepOutcome(
                RunStatus.FAILED, detail=f"The model could not be reached: {exc.message}"
            )
        _record_response(run, span, response)
        span.set(cost_usd=guard.after_model_call(response) / 1_000_000)
        tracer.audit(span, AuditKind.MODEL_RESPONSE, response.to_dict())
    messages.append(response.to_message())
    if not response.tool_calls:
        return StepOutcome(RunStatus.SUCCEEDED, answer=response.text)
    # Results are appended in the model's order, whatever order they finish in.
    held = False
    for call in sorted(response.tool_calls, key=lambda c: c.index):
        result_message, _ = handle_tool_call(call, scope)
        if result_message is None:  # held for a human's approval
            held = True
        else:
            messages.append(result_message)
    return StepOutcome(RunStatus.AWAITING_APPROVAL) if held else StepOutcome()


def _record_response(run: Run, span: OpenSpan, response: ModelResponse) -> None:
    usage = response.usage
    run.model_route = response.route
    run.prompt_tokens += usage.prompt_tokens
    run.completion_tokens += usage.completion_tokens
    span.set(
        route=response.route,
        model=response.model,
        finish_reason=response.finish_reason,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        tool_calls=[c.name for c in response.tool_calls],
    )


def _checkpoint(run: Run, messages: list[Message]) -> None:
    run.messages = [m.to_dict() for m in messages]
    Run.objects.filter(id=run.id).update(
        messages=run.messages,
        steps=run.steps,
        model_route=run.model_route,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        updated_at=timezone.now(),
    )


def _finish(
    run: Run, tracer: TraceRecorder, session: OpenSpan, outcome: StepOutcome, guard: RunGuard
) -> Run:
    status = outcome.status or RunStatus.FAILED
    guard.end_segment()
    if status == RunStatus.AWAITING_APPROVAL:
        return pause_run(run, tracer, session)
    answer = outcome.answer or outcome.detail
    with tracer.span(SpanKind.ACTION_RESPONSE, status, session, status=status) as span:
        span.set(answer=answer, detail=outcome.detail)
    Run.objects.filter(id=run.id).update(
        status=status,
        answer=answer,
        status_detail=outcome.detail,
        finished_at=timezone.now(),
        updated_at=timezone.now(),
    )
    session.set(
        status=status,
        steps=run.steps,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
    )
    if status != RunStatus.SUCCEEDED:
        session.fail(SpanStatus.ERROR)
    tracer.end(session)
    run.refresh_from_db()
    return run
