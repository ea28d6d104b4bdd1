"""Building what the model sees: system prompt, a summary of older turns, the recent window.

The whole conversation stays stored; only the model's view is trimmed to the route's context
budget. Older turns are summarised by the agent's summary route, with every tool called and
its arguments listed by the harness itself (a summariser may drop them; the list cannot).
When a summary would not save at least 40 % of what it replaces, the older turns are dropped
instead, with a note saying how many.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from gateway.messages import Message, ToolSpec
from gateway.tokens import estimate_tokens

HARNESS_INSTRUCTIONS = (
    "When a tool returns an error, tell the user which tool failed and the error as it is. "
    "Never say an action succeeded unless its tool call succeeded."
)
RECENT_WINDOW_SHARE = 0.5
MIN_SUMMARY_SAVING = 0.4
MAX_ARGUMENT_CHARS = 60

Summarizer = Callable[[list[Message]], str | None]


@dataclass
class ContextStats:
    context_tokens: int
    full_tokens: int
    saved_tokens: int = 0
    method: str = "none"  # "none", "summary" or "truncate"
    dropped_messages: int = 0
    summary: str = ""


def system_message(system_prompt: str, summary: str = "") -> Message:
    # An agent file that already carries the instructions gets them once, not twice.
    if HARNESS_INSTRUCTIONS in system_prompt:
        content = system_prompt
    else:
        content = f"{system_prompt}\n\n{HARNESS_INSTRUCTIONS}"
    if summary:
        content += f"\n\nSummary of the earlier conversation:\n{summary}"
    return Message(role="system", content=content)


def build_context(
    system_prompt: str,
    history: list[Message],
    tools: list[ToolSpec],
    budget_tokens: int,
    summarize: Summarizer,
    cached_summary: tuple[str, int] = ("", 0),
) -> tuple[list[Message], ContextStats]:
    """The messages to send; ``cached_summary`` is (text, number of messages it covers)."""
    full = [system_message(system_prompt), *history]
    full_tokens = estimate_tokens(full, tools)
    if full_tokens <= budget_tokens:
        return full, ContextStats(context_tokens=full_tokens, full_tokens=full_tokens)
    older, recent = _split(history, tools, budget_tokens)
    summary_text, covers = cached_summary
    if covers != len(older) or not summary_text:
        summary_text = _summary_with_tool_list(older, summarize)
    older_tokens = estimate_tokens(older)
    summary_tokens = estimate_tokens(summary_text or "")
    if summary_text and summary_tokens <= (1 - MIN_SUMMARY_SAVING) * older_tokens:
        messages = [system_message(system_prompt, summary_text), *recent]
        stats = ContextStats(0, full_tokens, method="summary", summary=summary_text)
    else:
        note = f"({len(older)} earlier messages were omitted to fit the context.)"
        messages = [system_message(system_prompt, note), *recent]
        stats = ContextStats(0, full_tokens, method="truncate", dropped_messages=len(older))
    stats.context_tokens = estimate_tokens(messages, tools)
    stats.saved_tokens = full_tokens - stats.context_tokens
    return messages, stats


def _split(
    history: list[Message], tools: list[ToolSpec], budget_tokens: int
) -> tuple[list[Message], list[Message]]:
    """(older, recent): the recent window fits half the budget and never splits a tool call
    from its results; the last user message (the task at hand) is always in it."""
    start = _window_start(history, tools, budget_tokens)
    last_user = max((i for i, m in enumerate(history) if m.role == "user"), default=-1)
    if 0 <= last_user < start:
        older = history[:last_user] + history[last_user + 1 : start]
        return older, [history[last_user], *history[start:]]
    return history[:start], history[start:]


def _window_start(history: list[Message], tools: list[ToolSpec], budget_tokens: int) -> int:
    """Where the recent window begins: as many recent messages as fit in half the budget."""
    allowance = budget_tokens * RECENT_WINDOW_SHARE - estimate_tokens([], tools)
    start = len(history)
    used = 0
    while start > 0:
        cost = estimate_tokens([history[start - 1]])
        if used + cost > allowance and start < len(history):
            break
        used += cost
        start -= 1
    while 0 < start < len(history) and history[start].role == "tool":
        start -= 1  # take the assistant message that asked for these results too
    return start


def _summary_with_tool_list(older: list[Message], summarize: Summarizer) -> str:
    summary = (summarize(older) or "").strip()
    calls = [
        f"- {call.name}({_arguments(call.arguments)})"
        for message in older
        for call in message.tool_calls
    ]
    if not summary and not calls:
        return ""
    parts = [summary] if summary else []
    if calls:
        parts.append("Tools called earlier:\n" + "\n".join(calls))
    return "\n".join(parts)


def _arguments(arguments: dict | None) -> str:
    if not arguments:
        return ""
    shown = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if len(text) > MAX_ARGUMENT_CHARS:
            text = text[: MAX_ARGUMENT_CHARS - 1] + "…"
        shown.append(f"{key}={text}")
    return ", ".join(shown)


def transcript_for_summary(messages: list[Message]) -> str:
    """Plain text of older turns, as the summary route reads them."""
    lines = []
    for message in messages:
        if message.role == "tool":
            lines.append(f"[{message.name} result] {message.content[:500]}")
        elif message.tool_calls:
            names = ", ".join(c.name for c in message.tool_calls)
            lines.append(f"assistant: {message.content} (called {names})".strip())
        else:
            lines.append(f"{message.role}: {message.content}")
    return "\n".join(lines)
