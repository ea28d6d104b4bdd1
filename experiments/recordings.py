"""A recorded run as a dataset item holds it: the calls with what answered them, sealed."""

from __future__ import annotations

import json
from typing import Any

from experiments.models import Dataset, DatasetItem
from gateway.messages import Message
from harness.models import Run
from tools.errors import ToolErrorCode
from traces.services import seal, unseal

# Tool errors that mean the policy (not the tool) answered: such a call was never executed.
REFUSALS = {
    ToolErrorCode.UNKNOWN_TOOL,
    ToolErrorCode.PERMISSION_DENIED,
    ToolErrorCode.INVALID_ARGUMENTS_JSON,
    ToolErrorCode.INVALID_ARGUMENTS,
    ToolErrorCode.LIMIT_EXCEEDED,
    ToolErrorCode.POLICY_REFUSED,
    ToolErrorCode.APPROVAL_DENIED,
    ToolErrorCode.TOOL_DISABLED,
}


def recording_of(item: DatasetItem) -> dict[str, Any]:
    return unseal(item.recording, None) or {}


def item_of(dataset: Dataset, run: Run, position: int) -> DatasetItem:
    """An unsaved item copying ``run``: masked fields to read, the clear recording sealed."""
    # Replay's reading of the recording: the sealed conversation, else the masked audit.
    from harness.replay.run import _recorded_conversation

    recorded = _recorded_conversation(run)
    messages = recorded.messages[recorded.start :]
    calls = calls_of(messages)
    clear_input = (unseal(run.sealed, None) or {}).get("input", run.input)
    return DatasetItem(
        dataset=dataset,
        run=run,
        position=position,
        agent=run.agent,
        user_id=run.user_id,
        input=run.input,
        status=run.status,
        outcome=run.outcome,
        stop_reason=run.stop_reason,
        answer=run.answer,
        tool_calls=[{"step": c["step"], "tool": c["tool"]} for c in calls],
        recording=seal(
            {
                "input": clear_input,
                "calls": calls,
                "answer": recorded.answer,
                "source": recorded.source,
            }
        ),
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        cost_usd=run.cost_usd,
        latency_ms=latency_ms(run),
        steps=run.steps,
    )


def latency_ms(run: Run) -> float | None:
    if run.finished_at and run.started_at:
        return (run.finished_at - run.started_at).total_seconds() * 1000
    return None


def calls_of(messages: list[Message]) -> list[dict[str, Any]]:
    """Every call the model proposed, in order (``step`` counts calls from 1), with what
    answered it: ``executed`` when a tool (not the policy) answered."""
    results: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.role == "tool" and message.tool_call_id:
            try:
                results[message.tool_call_id] = json.loads(message.content)
            except (TypeError, ValueError):
                results[message.tool_call_id] = {"ok": False, "error": {"code": "unreadable"}}
    calls: list[dict[str, Any]] = []
    for message in messages:
        if message.role != "assistant":
            continue
        for call in message.tool_calls:
            body = results.get(call.id)
            entry: dict[str, Any] = {
                "step": len(calls) + 1,
                "tool": call.name,
                "arguments": call.arguments if call.arguments is not None else call.raw_arguments,
                "ok": bool(body and body.get("ok")),
                "executed": False,
            }
            if body is not None:
                if body.get("ok"):
                    entry |= {"result": body.get("result"), "executed": True}
                else:
                    error = body.get("error") or {}
                    entry |= {"error": error, "executed": error.get("code") not in REFUSALS}
            calls.append(entry)
    return calls
