"""Typed errors of the trace store."""

from enum import StrEnum


class TraceErrorCode(StrEnum):
    AUDIT_RECORD_IMMUTABLE = "audit_record_immutable"


class TraceError(Exception):
    code: TraceErrorCode
    http_status: int = 400

    def __init__(self, message: str, details: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class AuditRecordImmutable(TraceError):
    """Someone tried to change, delete or side-load an audit record through the ORM."""

    code = TraceErrorCode.AUDIT_RECORD_IMMUTABLE
    http_status = 409

    def __init__(self, operation: str) -> None:
        super().__init__(
            f"Audit records are append-only: {operation} refused.", {"operation": operation}
        )
