"""Typed gateway errors. Inside the loop they become data (a failed run or a tool error)."""

from enum import StrEnum
from typing import Any


class GatewayErrorCode(StrEnum):
    UNKNOWN_PROVIDER = "unknown_provider"
    INVALID_ROUTE = "invalid_route"
    INVALID_SCRIPT = "invalid_script"
    SCRIPT_NOT_FOUND = "script_not_found"
    PROVIDER_ERROR = "provider_error"


class GatewayError(Exception):
    code: GatewayErrorCode = GatewayErrorCode.PROVIDER_ERROR
    http_status = 502

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


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
