"""The gateway's entry point: send a conversation to a route (and its fallbacks), get one
response back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings

from gateway.arguments import non_finite_path, parse_tool_arguments
from gateway.errors import GatewayError, StreamInterrupted
from gateway.messages import EventCallback, Message, ModelResponse, ToolCall, ToolSpec, Usage
from gateway.pricing import call_cost
from gateway.providers import anthropic_messages, openai_chat, scripted
from gateway.reliability import call_with_retries
from gateway.routes import Route, parse_route
from gateway.streaming import EventSink
from gateway.tokens import estimate_tokens
from traces.untrusted import clean, clean_text

__all__ = [
    "complete",
    "estimate_cost_usd",
    "non_finite_path",
    "parse_route",
    "parse_tool_arguments",
]

USD_PLACES = Decimal("0.00000001")  # the 8 decimals of Run.cost_usd

ProviderCall = Callable[
    [Route, list[Message], list[ToolSpec], str | None, EventSink], ModelResponse
]


def _scripted(
    route: Route,
    messages: list[Message],
    tools: list[ToolSpec],
    tool_choice: str | None,
    sink: EventSink,
    turn: int | None = None,
) -> ModelResponse:
    response = scripted.complete(route.model, messages, tools, turn=turn)
    sink.text(response.text)
    for call in response.tool_calls:
        sink.tool_call(call)
    return response


PROVIDERS: dict[str, ProviderCall] = {
    "scripted": _scripted,
    "openai": openai_chat.complete,
    "anthropic": anthropic_messages.complete,
}


def complete(
    route: str | None,
    messages: list[Message],
    tools: list[ToolSpec],
    *,
    fallbacks: Sequence[str] = (),
    on_event: EventCallback | None = None,
    tool_choice: str | None = None,
    turn: int | None = None,
) -> ModelResponse:
    """Call the model behind ``route`` (empty: the default route), then each fallback in turn.

    ``turn`` is the index of this model call in the whole conversation (0-based), which the
    messages alone do not tell once older turns were trimmed; the scripted model plays by it.

    Each route is tried with its own retries, timeout and rate limits; when it gives up the
    next one is tried. ``on_event`` receives text and reasoning deltas and each tool call as
    soon as it is complete. ``tool_choice``: ``auto``, ``none``, ``required`` or a tool name.
    Every attempt is listed in ``response.attempts`` (and in ``error.attempts`` on failure).

    Raises a ``GatewayError`` when the route is bad or every route failed (the last route's
    error); ``StreamInterrupted`` at once when a stream broke after part of it was handed on.
    Side effects: the provider calls, and the rate-limit buckets they take from.
    """
    names = list(dict.fromkeys([route or settings.HARNESS_MODEL, *fallbacks]))
    attempts: list[dict[str, Any]] = []
    failure: GatewayError | None = None
    for name in names:
        resolved = parse_route(name)
        try:
            response = _call_route(resolved, messages, tools, tool_choice, on_event, attempts, turn)
        except StreamInterrupted as exc:
            exc.attempts = attempts
            raise
        except GatewayError as exc:
            failure = exc
            continue
        response.attempts = attempts
        return response
    assert failure is not None
    failure.attempts = attempts
    # A provider's error text is the provider's: storable text only (it reaches the run).
    failure.message = clean_text(failure.message)
    failure.details = clean(failure.details)[0]
    failure.details.setdefault("routes", names)
    raise failure


def _call_route(
    route: Route,
    messages: list[Message],
    tools: list[ToolSpec],
    tool_choice: str | None,
    on_event: EventCallback | None,
    attempts: list[dict[str, Any]],
    turn: int | None = None,
) -> ModelResponse:
    provider = PROVIDERS[route.provider]
    # Only the scripted model plays by the turn; real models read the conversation.
    extra = {"turn": turn} if provider is _scripted else {}
    sink = EventSink(route.name, on_event)
    limited = bool(route.tokens_per_minute)
    estimate = estimate_tokens(messages, tools) if limited else 0
    response = call_with_retries(
        route,
        lambda: provider(route, messages, tools, tool_choice, sink, **extra),
        sink,
        estimate,
        attempts,
    )
    response.route = route.name
    response.model = response.model or route.model
    if response.usage.estimated:
        response.usage = _estimated_usage(messages, tools, response)
    response.cost_usd = _cost(route, response.usage)
    return _normalised(response)


def _normalised(response: ModelResponse) -> ModelResponse:
    """The boundary for what a model says: NUL, lone surrogates and non-finite numbers in its
    text, reasoning and tool calls (names, argument values and keys) replaced once, here
    (``traces.untrusted``), and ``response.normalised`` naming what was."""
    said = {
        "text": response.text,
        "reasoning": response.reasoning,
        "signature": response.reasoning_signature,
        "model": response.model,
        "finish": response.provider_finish_reason,
        "calls": [call.to_dict() for call in response.tool_calls],
    }
    cleaned, found = clean(said)
    if not found:
        return response
    response.text, response.reasoning = cleaned["text"], cleaned["reasoning"]
    response.reasoning_signature, response.model = cleaned["signature"], cleaned["model"]
    response.provider_finish_reason = cleaned["finish"]
    response.tool_calls = [ToolCall.from_dict(call) for call in cleaned["calls"]]
    response.normalised = found
    return response


def _estimated_usage(
    messages: list[Message], tools: list[ToolSpec], response: ModelResponse
) -> Usage:
    completion = estimate_tokens(response.text) + sum(
        estimate_tokens(c.raw_arguments) for c in response.tool_calls
    )
    return Usage(
        prompt_tokens=estimate_tokens(messages, tools),
        completion_tokens=completion,
        estimated=True,
    )


def estimate_cost_usd(route: str | None, prompt_tokens: int, completion_tokens: int) -> float:
    """What a call of this size would cost on ``route`` (0 without a price): for budgets,
    before the call is sent."""
    try:
        resolved = parse_route(route or settings.HARNESS_MODEL)
    except GatewayError:
        return 0.0  # the call itself will fail with the route's error
    cost = _cost(resolved, Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens))
    return cost or 0.0


def _cost(route: Route, usage: Usage) -> float | None:
    """US dollars (``gateway.pricing``), to the 8 decimals a run's cost keeps; None when the
    route has no price."""
    priced = call_cost(route, usage)
    if priced is None:
        return None
    return float(priced.usd.quantize(USD_PLACES, rounding=ROUND_HALF_UP))
