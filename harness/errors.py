"""Typed errors of the run API. Each carries a stable code, an HTTP status and details."""

from datetime import datetime
from enum import StrEnum
from typing import Any

from core.errors import DomainError


class ErrorCode(StrEnum):
    MALFORMED_JSON = "malformed_json"
    REQUEST_TOO_LARGE = "request_too_large"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    INVALID_REQUEST = "invalid_request"
    UNAUTHENTICATED = "unauthenticated"
    INVALID_API_KEY = "invalid_api_key"
    API_KEY_EXPIRED = "api_key_expired"
    API_KEY_NOT_FOUND = "api_key_not_found"
    UNKNOWN_KEY_SCOPE = "unknown_key_scope"
    RECEIPT_UNAVAILABLE = "receipt_unavailable"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    UNKNOWN_AGENT = "unknown_agent"
    RUN_NOT_FOUND = "run_not_found"
    UNKNOWN_TENANT = "unknown_tenant"
    SESSION_NOT_FOUND = "session_not_found"
    SESSION_MISMATCH = "session_mismatch"
    SESSION_BUSY = "session_busy"
    REPLAY_UNAVAILABLE = "replay_unavailable"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    THROTTLED = "throttled"
    INTERNAL_ERROR = "internal_error"
    SERVICE_UNAVAILABLE = "service_unavailable"
    INVALID_AGENT_FILE = "invalid_agent_file"


class HarnessError(DomainError):
    """Base of the run API's domain errors; rendered as ``{"error": {...}}`` by the API."""

    code: ErrorCode = ErrorCode.INVALID_REQUEST
    http_status: int = 400


class ApiKeyExpired(HarnessError):
    """The key's secret is right but it expired (or its rotation's grace period ended)."""

    code = ErrorCode.API_KEY_EXPIRED
    http_status = 401

    def __init__(self, prefix: str, expired_at: datetime) -> None:
        super().__init__(
            f"The API key {prefix}… expired at {expired_at.isoformat()}; use its replacement "
            "or ask for a new key.",
            {"key_prefix": prefix, "expired_at": expired_at.isoformat()},
        )
        self.headers = {"WWW-Authenticate": 'Bearer realm="harness", error="invalid_token"'}


class ApiKeyNotFound(HarnessError):
    code = ErrorCode.API_KEY_NOT_FOUND
    http_status = 404

    def __init__(self, tenant: str, name: str) -> None:
        super().__init__(
            f"Tenant {tenant!r} has no live API key named {name!r}.",
            {"tenant": tenant, "name": name},
        )


class UnknownKeyScope(HarnessError):
    code = ErrorCode.UNKNOWN_KEY_SCOPE

    def __init__(self, unknown: list[str], known: list[str]) -> None:
        super().__init__(
            f"Unknown API key scope(s) {', '.join(unknown)}; known: {', '.join(known)}.",
            {"unknown": unknown, "known": known},
        )


class UnknownAgent(HarnessError):
    code = ErrorCode.UNKNOWN_AGENT
    http_status = 404

    def __init__(self, name: str, available: list[str]) -> None:
        super().__init__(
            f"No agent named {name!r}. Agents that exist: {', '.join(available) or 'none'}.",
            {"agent": name, "available": available},
        )


class RunNotFound(HarnessError):
    code = ErrorCode.RUN_NOT_FOUND
    http_status = 404

    def __init__(self, run_id: str) -> None:
        super().__init__(f"No run {run_id} for this tenant.", {"run_id": run_id})


class UnknownTenant(HarnessError):
    code = ErrorCode.UNKNOWN_TENANT
    http_status = 404

    def __init__(self, slug: str) -> None:
        super().__init__(f"No tenant {slug!r}.", {"tenant": slug})


class SessionNotFound(HarnessError):
    code = ErrorCode.SESSION_NOT_FOUND
    http_status = 404

    def __init__(self, session_id: str) -> None:
        super().__init__(f"No session {session_id} for this tenant.", {"session_id": session_id})


class SessionMismatch(HarnessError):
    code = ErrorCode.SESSION_MISMATCH
    http_status = 409

    def __init__(self, session: Any, agent: str, user: str) -> None:
        super().__init__(
            f"Session {session.id} belongs to agent {session.agent!r} and user "
            f"{session.user_id!r}, not {agent!r} and {user!r}.",
            {"session_id": str(session.id), "agent": session.agent, "user": session.user_id},
        )


class SessionBusy(HarnessError):
    code = ErrorCode.SESSION_BUSY
    http_status = 409

    def __init__(self, session: Any) -> None:
        super().__init__(
            f"Session {session.id} has a run that has not finished; wait for it or cancel it.",
            {"session_id": str(session.id)},
        )


class InvalidAgentFile(DomainError):
    """An agent file is unreadable or malformed; stops start-up naming the file and the fault.

    A fault of the server's files, not of a request: never shown to an API client."""

    code = ErrorCode.INVALID_AGENT_FILE
    http_status = 500
    exposed = False

    def __init__(self, path: str, fault: str) -> None:
        super().__init__(f"{path}: {fault}", {"path": path, "fault": fault})
        self.path = path
        self.fault = fault


class ReplayUnavailable(HarnessError):
    """A recorded run cannot be replayed today (e.g. its agent file is gone)."""

    code = ErrorCode.REPLAY_UNAVAILABLE
    http_status = 409


class IdempotencyKeyReused(HarnessError):
    code = ErrorCode.IDEMPOTENCY_KEY_REUSED
    http_status = 422

    def __init__(self, key: str, run_id: str) -> None:
        super().__init__(
            f"Idempotency-Key {key!r} was used for another request (run {run_id}); use a new "
            "key for a different request.",
            {"idempotency_key": key, "run_id": run_id},
        )


class ReceiptUnavailable(HarnessError):
    """A receipt is issued for an ended run only (its chain is closed)."""

    code = ErrorCode.RECEIPT_UNAVAILABLE
    http_status = 409

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"No receipt for run {run_id}: {reason}.", {"run_id": run_id})
