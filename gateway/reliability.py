"""Calling one route patiently: rate limits, retries with backoff, Retry-After, attempt records.

Retried: 429, 5xx, timeouts, connection failures and broken streams (when nothing of the
response was handed on yet). Not retried: any other 4xx, and a response that cannot be read.
The wait before a retry is the provider's ``Retry-After`` (``retry-after-ms`` too) plus up to
10% jitter, or else exponential backoff with jitter; a wait longer than the route's
``max_wait_s`` ends the route at once so that the next route can be tried.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from gateway import ratelimit
from gateway.errors import (
    ClientRateLimited,
    GatewayError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
    StreamInterrupted,
)
from gateway.messages import ModelResponse
from gateway.routes import Route
from gateway.streaming import EventSink

RETRYABLE = frozenset(
    {"rate_limited", "server_error", "timeout", "connection_error", "stream_broken"}
)


@dataclass
class ProviderFailure(Exception):
    """One failed attempt, in the gateway's words (adapters translate SDK errors into it).

    ``status`` is one of ``rate_limited``, ``server_error``, ``timeout``, ``connection_error``,
    ``stream_broken``, ``rejected``, ``bad_response``.
    """

    status: str
    message: str
    http_status: int | None = None
    retry_after_s: float | None = None

    def __str__(self) -> str:
        return self.message

    @property
    def retryable(self) -> bool:
        return self.status in RETRYABLE


def call_with_retries(
    route: Route,
    attempt: Callable[[], ModelResponse],
    sink: EventSink,
    estimated_tokens: int,
    attempts: list[dict[str, Any]],
) -> ModelResponse:
    """Run ``attempt`` until it succeeds or the route gives up; append a record per attempt.

    Raises a ``GatewayError`` naming why the route gave up; ``StreamInterrupted`` when a
    stream broke after something was handed on (the caller must not try another route).
    """
    for number in range(1, route.retries + 2):
        record: dict[str, Any] = {"attempt": len(attempts) + 1, "route": route.name}
        attempts.append(record)
        try:
            limited_s = ratelimit.acquire(route, estimated_tokens)
        except ClientRateLimited as exc:
            record.update(status="client_rate_limited", error=exc.message)
            raise
        if limited_s:
            record["limited_s"] = round(limited_s, 3)
        started = time.perf_counter()
        try:
            response = attempt()
        except GatewayError as exc:
            # Not the provider's answer but ours (no key, no script): no retry helps.
            record.update(status=str(exc.code), latency_ms=_ms_since(started), error=exc.message)
            raise
        except ProviderFailure as failure:
            record.update(_failure_record(failure, started))
            if sink.handed_on:
                raise StreamInterrupted(
                    f"The response from {route.name} broke off after part of it was handed "
                    f"on ({failure.message}); it was not retried.",
                    {"route": route.name},
                ) from failure
            if not failure.retryable or number > route.retries:
                raise _route_error(route, failure, number) from failure
            wait = _wait_before_retry(route, failure, number)
            if wait is None:
                note = f"; waiting longer than max_wait_s ({route.max_wait_s:g}s) was not allowed"
                raise _route_error(route, failure, number, note) from failure
            record["wait_s"] = round(wait, 3)
            time.sleep(wait)
            continue
        record.update(status="ok", latency_ms=_ms_since(started))
        ratelimit.settle(route, estimated_tokens, response.usage.total_tokens)
        return response
    raise AssertionError("unreachable: the last attempt returns or raises")


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _wait_before_retry(route: Route, failure: ProviderFailure, number: int) -> float | None:
    if failure.retry_after_s is not None:
        # Honour the provider; a little jitter keeps replicas from coming back in lockstep.
        wait = failure.retry_after_s * (1 + random.uniform(0, 0.1))  # noqa: S311
    else:
        ceiling = min(route.backoff_max_s, route.backoff_s * 2 ** (number - 1))
        wait = ceiling / 2 + random.uniform(0, ceiling / 2)  # noqa: S311
    return wait if wait <= route.max_wait_s else None


def _failure_record(failure: ProviderFailure, started: float) -> dict[str, Any]:
    record: dict[str, Any] = {
        "status": failure.status,
        "latency_ms": _ms_since(started),
        "error": failure.message[:300],
    }
    if failure.http_status is not None:
        record["http_status"] = failure.http_status
    if failure.retry_after_s is not None:
        record["retry_after_s"] = failure.retry_after_s
    return record


def _route_error(
    route: Route, failure: ProviderFailure, tries: int, note: str = ""
) -> GatewayError:
    kind: type[GatewayError] = {
        "rate_limited": ProviderRateLimited,
        "server_error": ProviderUnavailable,
        "connection_error": ProviderUnavailable,
        "stream_broken": ProviderUnavailable,
        "timeout": ProviderTimeout,
        "rejected": ProviderRejected,
    }.get(failure.status, GatewayError)
    detail = f" after {tries} attempts" if tries > 1 else ""
    details: dict[str, Any] = {"route": route.name, "status": failure.status}
    if failure.http_status is not None:
        details["http_status"] = failure.http_status
    return kind(f"{route.name} failed{detail}: {failure.message}{note}", details)


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
