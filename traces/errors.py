"""Typed errors of the trace store."""

from enum import StrEnum

from core.errors import DomainError


class TraceErrorCode(StrEnum):
    AUDIT_RECORD_IMMUTABLE = "audit_record_immutable"
    NON_FINITE_NUMBER = "non_finite_number"
    MASKING_PATTERN_INVALID = "masking_pattern_invalid"
    MASKING_PATTERN_NOT_FOUND = "masking_pattern_not_found"


class TraceError(DomainError):
    code: TraceErrorCode
    http_status: int = 400


class AuditRecordImmutable(TraceError):
    """Someone tried to change, delete or side-load an audit record through the ORM."""

    code = TraceErrorCode.AUDIT_RECORD_IMMUTABLE
    http_status = 409

    def __init__(self, operation: str) -> None:
        super().__init__(
            f"Audit records are append-only: {operation} refused.", {"operation": operation}
        )


class NonFiniteNumber(TraceError):
    """A value to store holds NaN or ±Infinity, which JSON (and PostgreSQL's jsonb) cannot hold.

    ``details["path"]`` is the JSON pointer of the first such number (``""`` for the root).
    The engine turns a model's tool arguments holding one into an ``invalid_arguments`` error.
    """

    code = TraceErrorCode.NON_FINITE_NUMBER
    http_status = 400

    def __init__(self, path: str, value: float) -> None:
        super().__init__(
            f"{value!r} at {path or '/'} is not a finite number: JSON cannot hold it.",
            {"path": path, "value": repr(value)},
        )
        self.path = path


class MaskingPatternInvalid(TraceError):
    """A tenant's custom masking pattern was refused: ``field`` says which part and why."""

    code = TraceErrorCode.MASKING_PATTERN_INVALID
    http_status = 400

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, {"field": field})
        self.field = field


class MaskingPatternNotFound(TraceError):
    code = TraceErrorCode.MASKING_PATTERN_NOT_FOUND
    http_status = 404

    def __init__(self, tenant: str, kind: str) -> None:
        super().__init__(
            f"Tenant {tenant!r} has no masking pattern {kind!r}.", {"tenant": tenant, "kind": kind}
        )
