"""The official SDKs as transport: one client per endpoint and key, errors in our words.

The SDKs' own retries are switched off (``max_retries=0``): the gateway retries itself, so
that every attempt is recorded and ``Retry-After`` is honoured the same way for every
provider. Clients are cached per process (they hold the connection pool); the timeout is
given per request, from the route.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import anthropic
import httpx2
import openai

from gateway.errors import MissingApiKey
from gateway.reliability import ProviderFailure, parse_retry_after
from gateway.routes import Route

_lock = threading.Lock()
_clients: dict[tuple[str, str, str], Any] = {}


def openai_client(route: Route) -> openai.OpenAI:
    return _client(route, lambda: openai.OpenAI(**_client_options(route)))


def anthropic_client(route: Route) -> anthropic.Anthropic:
    # open_telemetry=False: the harness records its own model_call spans.
    return _client(
        route, lambda: anthropic.Anthropic(**_client_options(route), open_telemetry=False)
    )


def translate_error(exc: Exception) -> ProviderFailure | None:
    """An SDK or transport exception as a ``ProviderFailure``; None for anything else."""
    if isinstance(exc, openai.APIStatusError | anthropic.APIStatusError):
        return _status_failure(exc)
    if isinstance(exc, openai.APITimeoutError | anthropic.APITimeoutError):
        return ProviderFailure("timeout", "the provider did not answer in time")
    if isinstance(exc, openai.APIConnectionError | anthropic.APIConnectionError):
        return ProviderFailure("connection_error", f"connection failed: {_cause(exc)}")
    if isinstance(exc, httpx2.TimeoutException):
        return ProviderFailure("timeout", "the provider did not answer in time")
    if isinstance(exc, httpx2.TransportError):
        return ProviderFailure("connection_error", f"connection failed: {exc or type(exc)}")
    if isinstance(exc, openai.APIError | anthropic.APIError):
        return ProviderFailure("server_error", f"the provider reported an error: {exc}")
    return None


def _status_failure(exc: openai.APIStatusError | anthropic.APIStatusError) -> ProviderFailure:
    status = exc.status_code
    retry_after = parse_retry_after(exc.response.headers)
    message = _error_message(exc)
    if status == 429:
        return ProviderFailure("rate_limited", message, status, retry_after)
    if status >= 500:
        return ProviderFailure("server_error", message, status, retry_after)
    return ProviderFailure("rejected", message, status)


def _error_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            status = getattr(exc, "status_code", None)
            return f"HTTP {status}: {inner['message']}" if status else inner["message"]
    return str(exc)


def _cause(exc: Exception) -> str:
    cause = exc.__cause__ or exc.__context__
    return f"{type(cause).__name__}: {cause}" if cause else str(exc)


def _client_options(route: Route) -> dict[str, Any]:
    if not route.api_key:
        variable = "OPENAI_API_KEY" if route.provider == "openai" else "ANTHROPIC_API_KEY"
        raise MissingApiKey(
            f"Route {route.name} has no API key: set {variable} (or {variable}_FILE), or give "
            "the route an api_key_env in HARNESS_ROUTES. A local server that needs no key "
            "still wants some value, e.g. 'unused'.",
            {"route": route.name},
        )
    return {
        "api_key": route.api_key,
        "base_url": route.base_url,
        "max_retries": 0,
        "timeout": route.timeout_s,
    }


def _client(route: Route, build: Any) -> Any:
    key = (route.provider, route.base_url, route.api_key)
    client = _clients.get(key)
    if client is None:
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = build()
    return client


def stream_object(data: str, what: str) -> dict[str, Any]:
    """One server-sent event's JSON object; anything else is a ``bad_response`` failure."""
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise ProviderFailure("bad_response", f"a {what} is not JSON: {data[:200]}") from exc
    if not isinstance(value, dict):
        raise ProviderFailure("bad_response", f"a {what} is not an object: {data[:200]}")
    return value
