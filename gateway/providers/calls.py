"""What a call of every provider shares: the request's common fields, and the SDK's errors
in our words. Each adapter adds what its wire format says differently (messages, tools,
``tool_choice``, ``max_tokens``) and reads the answer its own way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.messages import ModelResponse
from gateway.providers.clients import translate_error
from gateway.reliability import ProviderFailure
from gateway.routes import Route


def base_request(route: Route, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The model, the messages (in the provider's shape), the route's timeout, and the route's
    extra parameters (``params``, sent as the SDK's ``extra_body``)."""
    request: dict[str, Any] = {
        "model": route.model,
        "messages": messages,
        "timeout": route.timeout_s,
    }
    if route.params:
        request["extra_body"] = route.params
    return request


def call_provider(send: Callable[[], ModelResponse]) -> ModelResponse:
    """``send()``, an SDK's or the transport's error turned into a ``ProviderFailure`` (which
    the reliability layer retries or gives up on); any other exception passes as it is."""
    try:
        return send()
    except ProviderFailure:
        raise
    except Exception as exc:
        failure = translate_error(exc)
        if failure is None:
            raise
        raise failure from exc
