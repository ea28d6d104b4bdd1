"""Typed tool errors: the file faults that stop start-up, and the call errors the model sees."""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from core.errors import DomainError


class ToolErrorCode(StrEnum):
    UNKNOWN_TOOL = "unknown_tool"
    PERMISSION_DENIED = "permission_denied"
    INVALID_ARGUMENTS_JSON = "invalid_arguments_json"
    INVALID_ARGUMENTS = "invalid_arguments"
    TIMEOUT = "timeout"
    TOOL_FAILED = "tool_failed"
    TOOL_DISABLED = "tool_disabled"
    HTTP_ERROR = "http_error"
    INVALID_RESPONSE = "invalid_response"
    OUTCOME_UNKNOWN = "outcome_unknown"
    # MCP tools: the server no longer advertises what the tool file pinned; the server
    # cannot be reached (or the connection broke during the call).
    TOOL_DRIFTED = "tool_drifted"
    MCP_UNAVAILABLE = "mcp_unavailable"
    # A tool's result larger than Harness reads (an MCP server's answer over 1 MiB).
    RESULT_TOO_LARGE = "result_too_large"
    # Refusals by the policy engine after the ACL: a chain or call rule, a human's denial (or
    # no decision in time), a limit on tool calls.
    POLICY_REFUSED = "policy_refused"
    APPROVAL_DENIED = "approval_denied"
    LIMIT_EXCEEDED = "limit_exceeded"
    # An experiment's call that matches no recorded call (experiments.recorded).
    OFF_RECORD = "off_record"
    # Tool files with errors: start-up stops (never a call's error).
    TOOL_FILES_INVALID = "tool_files_invalid"


@dataclass(frozen=True)
class ToolFileFault:
    """One fault in one tool file. ``severity`` is "error" (stops start-up), "warning", or
    "info" (shown by ``check_tools`` only, e.g. a pinned MCP tool whose server is not
    configured here: the tool is disabled)."""

    path: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ToolFilesInvalid(DomainError):
    """Raised when the registry is asked for tools while any tool file has an error.

    A fault of the server's files, not of a request: never shown to an API client."""

    code = ToolErrorCode.TOOL_FILES_INVALID
    http_status = 500
    exposed = False

    def __init__(self, faults: list[ToolFileFault]) -> None:
        errors = [f for f in faults if f.severity == "error"]
        super().__init__(
            "Invalid tool files:\n" + "\n".join(f"  {f}" for f in errors),
            {"faults": [str(f) for f in errors]},
        )
        self.faults = faults


@dataclass
class ToolCallError:
    """A structured error handed back to the model instead of a tool result."""

    code: ToolErrorCode
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": str(self.code), "message": self.message, "details": self.details}


class ToolHandlerError(DomainError):
    """Raised by a handler to hand the model a specific, expected error (no traceback kept).

    Any other exception is an unexpected failure: the model gets a short ``tool_failed`` error
    and the audit the full traceback. Meant for the model, not an API client: one that reached
    the API would be a bug, answered as ``internal_error``.
    """

    code: ToolErrorCode
    http_status = 502
    exposed = False
    transient = False

    def __init__(
        self, code: ToolErrorCode, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message, details, code=code)

    def to_call_error(self) -> ToolCallError:
        return ToolCallError(self.code, self.message, self.details)


class TransientToolError(ToolHandlerError):
    """A failure that may pass on a second try (connection refused, HTTP 503, …).

    The executor retries it, within the tool's timeout, only for tools declared idempotent.
    """

    transient = True
