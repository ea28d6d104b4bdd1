"""Typed gateway errors. Inside the loop they become data (a failed run or a tool error)."""

from enum import StrEnum
from typing import Any

from core.errors import DomainError


class GatewayErrorCode(StrEnum):
    UNKNOWN_PROVIDER = "unknown_provider"
    INVALID_ROUTE = "invalid_route"
    INVALID_SCRIPT = "invalid_script"
    SCRIPT_NOT_FOUND = "script_not_found"
    PROVIDER_ERROR = "provider_error"
    MISSING_API_KEY = "missing_api_key"
    PROVIDER_RATE_LIMITED = "provider_rate_limited"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    PROVIDER_TIMEOUT = "provider_timeout"
    PROVIDER_REJECTED = "provider_rejected"
    STREAM_INTERRUPTED = "stream_interrupted"
    CLIENT_RATE_LIMITED = "client_rate_limited"


class GatewayError(DomainError):
    """A route could not deliver a response.

    ``attempts`` lists every attempt made (on every route tried) before giving up, in the
    shape of ``ModelResponse.attempts``, so the caller can record them.
    """

    code: GatewayErrorCode = GatewayErrorCode.PROVIDER_ERROR
    http_status = 502

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details)
        self.attempts: list[dict[str, Any]] = []


class InvalidRoute(GatewayError):
    code = GatewayErrorCode.INVALID_ROUTE
    http_status = 500


class UnknownProvider(GatewayError):
    code = GatewayErrorCode.UNKNOWN_PROVIDER
    http_status = 500


class ScriptNotFound(GatewayError):
    code = GatewayErrorCode.SCRIPT_NOT_FOUND
    http_status = 500


class InvalidScript(GatewayError):
    code = GatewayErrorCode.INVALID_SCRIPT
    http_status = 500


class MissingApiKey(GatewayError):
    code = GatewayErrorCode.MISSING_API_KEY
    http_status = 500


class ProviderRateLimited(GatewayError):
    """The provider kept answering 429 until the route's retries ran out."""

    code = GatewayErrorCode.PROVIDER_RATE_LIMITED
    http_status = 503


class ProviderUnavailable(GatewayError):
    """5xx answers or connection failures until the route's retries ran out."""

    code = GatewayErrorCode.PROVIDER_UNAVAILABLE
    http_status = 503


class ProviderTimeout(GatewayError):
    code = GatewayErrorCode.PROVIDER_TIMEOUT
    http_status = 504


class ProviderRejected(GatewayError):
    """A 4xx other than 429: the request itself is wrong (bad key, bad model, too long)."""

    code = GatewayErrorCode.PROVIDER_REJECTED
    http_status = 502


class StreamInterrupted(GatewayError):
    """A stream broke after part of it had been handed on, so it cannot be replayed."""

    code = GatewayErrorCode.STREAM_INTERRUPTED
    http_status = 502


class ClientRateLimited(GatewayError):
    """The route's own requests/min or tokens/min limit would need a longer wait than allowed."""

    code = GatewayErrorCode.CLIENT_RATE_LIMITED
    http_status = 503
