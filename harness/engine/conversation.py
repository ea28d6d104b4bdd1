"""A run's conversation as stored: its own messages, appended one row each (``RunMessage``).

The driver resumes from it and replay reads it; both get the messages in the same order."""

from __future__ import annotations

from typing import Any

from gateway.messages import Message
from harness.models import Run, RunMessage
from traces.services import unseal


def load_run_messages(run: Run | Any) -> list[Message]:
    """The run's own messages in clear (from its input on), results in the model's order;
    empty when there is no readable clear copy (none yet, or its rows were erased)."""
    rows = (
        RunMessage.objects.filter(run_id=getattr(run, "id", run))
        .order_by("index")
        .values_list("sealed", flat=True)
    )
    clear = [unseal(sealed, None) for sealed in rows]
    if not all(clear):
        return []
    return in_call_order([Message.from_dict(message) for message in clear])


def run_start(messages: list[Message], history_length: int | None = None) -> int:
    """Where a run's own messages begin in its conversation: after its session's earlier turns
    (``history_length`` messages, as the driver knows them); in a conversation stored whole
    with them (a run checkpointed before conversations were appended), at the run's input,
    the last user message."""
    if history_length is not None:
        return min(history_length, len(messages))
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    return users[-1] if users else 0


def in_call_order(messages: list[Message]) -> list[Message]:
    """Results answered later (after an approval) are stored after their neighbours: put the
    results that follow each assistant message back in the model's order of its calls."""
    ordered: list[Message] = []
    order: dict[str, int] = {}
    results: list[Message] = []

    def flush() -> None:
        ordered.extend(sorted(results, key=lambda m: order.get(m.tool_call_id or "", len(order))))
        results.clear()

    for message in messages:
        if message.role == "tool":
            results.append(message)
            continue
        flush()
        ordered.append(message)
        if message.role == "assistant":
            order = {call.id: call.index for call in message.tool_calls}
    flush()
    return ordered
