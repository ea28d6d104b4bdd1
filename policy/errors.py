"""Typed policy errors."""

from enum import StrEnum
from typing import Any


class PolicyErrorCode(StrEnum):
    INVALID_RULE = "invalid_rule"


class PolicyError(Exception):
    code: PolicyErrorCode = PolicyErrorCode.INVALID_RULE
    http_status = 400

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidRule(PolicyError):
    code = PolicyErrorCode.INVALID_RULE
