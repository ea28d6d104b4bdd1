"""One error base: every app's errors derive from ``core.errors.DomainError`` and the API
renders each exactly as before — same code, status, message, details and headers — by
``isinstance``, not by the attributes an object happens to have.

One row per error class (and per code where one class carries several): a class without a row
fails ``test_every_domain_error_class_has_a_row``."""

from __future__ import annotations

import importlib
import pkgutil
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from rest_framework.test import APIRequestFactory

from core.errors import DomainError
from experiments.errors import ExperimentError, ExperimentErrorCode
from gateway import errors as gateway
from harness import errors as harness
from harness.api.exceptions import render_api_error
from harness.api.reports import InvertedRange
from harness.engine.experiment_seam import ExperimentSetupMissing
from harness.webhooks import UnsafeCallbackUrl
from policy import errors as policy
from policy.api.serializers import RuleRefused
from policy.api.views import RuleConflict
from tools import errors as tools
from traces import errors as traces

SESSION = SimpleNamespace(id="s-1", agent="support", user_id="u-1")
UNEXPECTED = ("internal_error", "An unexpected error occurred.", {"request_id": "req-1"})

# (error, status, code, message, details, headers); "exposed=False" rows render as UNEXPECTED.
EXPIRED_AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

ROWS: list[tuple[DomainError, int, str, str, dict[str, Any], dict[str, str]]] = [
    # harness
    (
        harness.ApiKeyExpired("0123456789ab", EXPIRED_AT),
        401,
        "api_key_expired",
        "The API key 0123456789ab… expired at 2026-12-01T12:00:00+00:00; use its replacement "
        "or ask for a new key.",
        {"key_prefix": "0123456789ab", "expired_at": "2026-12-01T12:00:00+00:00"},
        {"WWW-Authenticate": 'Bearer realm="harness", error="invalid_token"'},
    ),
    (
        harness.ApiKeyNotFound("acme", "ci"),
        404,
        "api_key_not_found",
        "Tenant 'acme' has no live API key named 'ci'.",
        {"tenant": "acme", "name": "ci"},
        {},
    ),
    (
        harness.UnknownKeyScope(["runs:eat"], ["runs:read"]),
        400,
        "unknown_key_scope",
        "Unknown API key scope(s) runs:eat; known: runs:read.",
        {"unknown": ["runs:eat"], "known": ["runs:read"]},
        {},
    ),
    (
        harness.ReceiptUnavailable("r-1", "it is still running"),
        409,
        "receipt_unavailable",
        "No receipt for run r-1: it is still running.",
        {"run_id": "r-1"},
        {},
    ),
    (
        ExperimentSetupMissing("no setup"),
        400,
        "invalid_request",
        "no setup",
        {},
        {},
    ),
    (
        policy.KeyScopeMissing("policy:admin", "POST", ["runs:read"]),
        403,
        "key_scope_missing",
        "This API key lacks the scope 'policy:admin' that POST here needs; issue a key "
        "with it (manage.py create_api_key --scope …).",
        {"scope": "policy:admin", "key_scopes": ["runs:read"]},
        {},
    ),
    (
        policy.KeyScopeUndeclared("PUT", "RunView"),
        403,
        "key_scope_undeclared",
        "PUT on RunView declares no API key scope, so no key may call it.",
        {"method": "PUT", "view": "RunView"},
        {},
    ),
    (harness.HarnessError("bad"), 400, "invalid_request", "bad", {}, {}),
    (
        harness.UnknownAgent("nope", ["support"]),
        404,
        "unknown_agent",
        "No agent named 'nope'. Agents that exist: support.",
        {"agent": "nope", "available": ["support"]},
        {},
    ),
    (
        harness.RunNotFound("r-1"),
        404,
        "run_not_found",
        "No run r-1 for this tenant.",
        {"run_id": "r-1"},
        {},
    ),
    (
        harness.UnknownTenant("acme"),
        404,
        "unknown_tenant",
        "No tenant 'acme'.",
        {"tenant": "acme"},
        {},
    ),
    (
        harness.SessionNotFound("s-1"),
        404,
        "session_not_found",
        "No session s-1 for this tenant.",
        {"session_id": "s-1"},
        {},
    ),
    (
        harness.SessionMismatch(SESSION, "other", "u-2"),
        409,
        "session_mismatch",
        "Session s-1 belongs to agent 'support' and user 'u-1', not 'other' and 'u-2'.",
        {"session_id": "s-1", "agent": "support", "user": "u-1"},
        {},
    ),
    (
        harness.SessionBusy(SESSION),
        409,
        "session_busy",
        "Session s-1 has a run that has not finished; wait for it or cancel it.",
        {"session_id": "s-1"},
        {},
    ),
    (harness.ReplayUnavailable("gone"), 409, "replay_unavailable", "gone", {}, {}),
    (
        harness.IdempotencyKeyReused("k", "r-1"),
        422,
        "idempotency_key_reused",
        "Idempotency-Key 'k' was used for another request (run r-1); use a new key for a "
        "different request.",
        {"idempotency_key": "k", "run_id": "r-1"},
        {},
    ),
    (
        UnsafeCallbackUrl("http://10.0.0.1/", "private"),
        400,
        "invalid_request",
        "callback_url 'http://10.0.0.1/' is not allowed: private.",
        {"callback_url": "http://10.0.0.1/"},
        {},
    ),
    (
        InvertedRange(),
        422,
        "invalid_request",
        "'to' is before 'from'.",
        {"fields": {"to": ["'to' is before 'from'."]}},
        {},
    ),
    (harness.InvalidAgentFile("agents/a.json", "not JSON"), 500, *UNEXPECTED, {}),
    # policy
    (policy.PolicyError("bad"), 400, "invalid_rule", "bad", {}, {}),
    (policy.InvalidRule("bad", {"field": "f"}), 400, "invalid_rule", "bad", {"field": "f"}, {}),
    (
        RuleRefused("twice", {"field": "other_label"}),
        422,
        "invalid_rule",
        "twice",
        {"field": "other_label"},
        {},
    ),
    (RuleConflict("taken"), 409, "invalid_rule", "taken", {}, {}),
    (policy.RuleNotFound("no"), 404, "rule_not_found", "no", {}, {}),
    (policy.ActingUserRequired("who"), 400, "acting_user_required", "who", {}, {}),
    (policy.PermissionDenied("no"), 403, "permission_denied", "no", {}, {}),
    (policy.BudgetAboveMaximum("max"), 400, "budget_above_maximum", "max", {}, {}),
    (
        policy.Throttled("wait", 1.2),
        429,
        "rate_limited",
        "wait",
        {"retry_after_s": 2},
        {"Retry-After": "2"},
    ),
    (
        policy.RateLimited("wait", 0.1),
        429,
        "rate_limited",
        "wait",
        {"retry_after_s": 1},
        {"Retry-After": "1"},
    ),
    (
        policy.TooManyConcurrentRuns("busy", 3, {"limit": 2}),
        429,
        "too_many_concurrent_runs",
        "busy",
        {"limit": 2, "retry_after_s": 3},
        {"Retry-After": "3"},
    ),
    (
        policy.TenantBusy("busy", 1),
        429,
        "tenant_busy",
        "busy",
        {"retry_after_s": 1},
        {"Retry-After": "1"},
    ),
    (
        policy.TooManyEventStreams("streams", 5),
        429,
        "too_many_event_streams",
        "streams",
        {"retry_after_s": 5},
        {"Retry-After": "5"},
    ),
    (
        policy.TenantBudgetExhausted("spent", 60),
        429,
        "tenant_budget_exhausted",
        "spent",
        {"retry_after_s": 60},
        {"Retry-After": "60"},
    ),
    (policy.ApprovalNotFound("no"), 404, "approval_not_found", "no", {}, {}),
    (policy.ApprovalAlreadyDecided("done"), 409, "approval_already_decided", "done", {}, {}),
    (policy.ApprovalArgumentsMismatch("sha"), 409, "approval_arguments_mismatch", "sha", {}, {}),
    (policy.ApprovalEditRefused("schema"), 400, "approval_edit_refused", "schema", {}, {}),
    (policy.ApprovalEditRefusedByPolicy("rule"), 409, "approval_edit_refused", "rule", {}, {}),
    (policy.ApproverIsEndUser("eyes"), 403, "approver_is_end_user", "eyes", {}, {}),
    (policy.RunNotAwaitingApproval("ended"), 409, "run_not_awaiting_approval", "ended", {}, {}),
    # traces
    (
        traces.AuditRecordImmutable("update"),
        409,
        "audit_record_immutable",
        "Audit records are append-only: update refused.",
        {"operation": "update"},
        {},
    ),
    (
        traces.NonFiniteNumber("/a", float("nan")),
        400,
        "non_finite_number",
        "nan at /a is not a finite number: JSON cannot hold it.",
        {"path": "/a", "value": "nan"},
        {},
    ),
    (
        traces.MaskingPatternInvalid("regex", "too slow"),
        400,
        "masking_pattern_invalid",
        "too slow",
        {"field": "regex"},
        {},
    ),
    (
        traces.MaskingPatternNotFound("acme", "order"),
        404,
        "masking_pattern_not_found",
        "Tenant 'acme' has no masking pattern 'order'.",
        {"tenant": "acme", "kind": "order"},
        {},
    ),
    # gateway
    (gateway.GatewayError("down"), 502, "provider_error", "down", {}, {}),
    (gateway.InvalidRoute("r", {"route": "x"}), 500, "invalid_route", "r", {"route": "x"}, {}),
    (gateway.UnknownProvider("p"), 500, "unknown_provider", "p", {}, {}),
    (gateway.ScriptNotFound("s"), 500, "script_not_found", "s", {}, {}),
    (gateway.InvalidScript("s"), 500, "invalid_script", "s", {}, {}),
    (gateway.MissingApiKey("k"), 500, "missing_api_key", "k", {}, {}),
    (gateway.ProviderRateLimited("429"), 503, "provider_rate_limited", "429", {}, {}),
    (gateway.ProviderUnavailable("5xx"), 503, "provider_unavailable", "5xx", {}, {}),
    (gateway.ProviderTimeout("slow"), 504, "provider_timeout", "slow", {}, {}),
    (gateway.ProviderRejected("4xx"), 502, "provider_rejected", "4xx", {}, {}),
    (gateway.StreamInterrupted("cut"), 502, "stream_interrupted", "cut", {}, {}),
    (gateway.ClientRateLimited("rpm"), 503, "client_rate_limited", "rpm", {}, {}),
    # tools: for the model or start-up, never for an API client
    (tools.ToolFilesInvalid([tools.ToolFileFault("t.json", "bad")]), 500, *UNEXPECTED, {}),
    (tools.ToolHandlerError(tools.ToolErrorCode.HTTP_ERROR, "502"), 500, *UNEXPECTED, {}),
    (tools.TransientToolError(tools.ToolErrorCode.TIMEOUT, "slow"), 500, *UNEXPECTED, {}),
    # experiments: one class, the status follows the code
    *[
        (
            ExperimentError(code, f"{code} happened", {"id": "x"}),
            status,
            code.value,
            f"{code} happened",
            {"id": "x"},
            {},
        )
        for code, status in [
            (ExperimentErrorCode.DATASET_NOT_FOUND, 404),
            (ExperimentErrorCode.DATASET_EXISTS, 409),
            (ExperimentErrorCode.DATASET_ITEM_NOT_FOUND, 404),
            (ExperimentErrorCode.DATASET_EMPTY, 409),
            (ExperimentErrorCode.RUN_NOT_RECORDED, 409),
            (ExperimentErrorCode.EXPERIMENT_NOT_FOUND, 404),
            (ExperimentErrorCode.UNSUPPORTED_CANDIDATE, 422),
            (ExperimentErrorCode.EXPERIMENT_RUN_UNLINKED, 400),
            (ExperimentErrorCode.LIVE_TOOL_REFUSED, 422),
            (ExperimentErrorCode.INVALID_RANGE, 422),
            (ExperimentErrorCode.INVALID_JUDGE, 422),
            (ExperimentErrorCode.INVALID_ASSERTION, 422),
            (ExperimentErrorCode.NOTHING_TO_ADD, 422),
        ]
    ],
]


def _rendered(error: Exception) -> Any:
    request = APIRequestFactory().get("/api/v1/runs")
    request.request_id = "req-1"
    return render_api_error(error, {"request": request, "view": None})


@pytest.mark.parametrize(
    ("error", "status", "code", "message", "details", "headers"),
    ROWS,
    ids=[f"{type(row[0]).__name__}-{row[2]}" for row in ROWS],
)
def test_each_error_renders_its_code_status_message_details_and_headers(
    error: DomainError,
    status: int,
    code: str,
    message: str,
    details: dict[str, Any],
    headers: dict[str, str],
) -> None:
    assert isinstance(error, DomainError)
    response = _rendered(error)
    assert response.data == {"error": {"code": code, "message": message, "details": details}}
    assert response.status_code == (status if error.exposed else 500)
    if error.exposed:
        assert error.http_status == status
    assert {name: response[name] for name in headers} == headers


def _domain_error_classes() -> set[type[DomainError]]:
    for app in ("core", "harness", "policy", "tools", "traces", "gateway", "experiments"):
        package = importlib.import_module(app)
        for info in pkgutil.walk_packages(package.__path__, f"{app}."):
            if ".migrations" in info.name or info.name.endswith(("demo_server", "settings.test")):
                continue
            if info.name.startswith(("harness.settings", "harness.wsgi", "harness.asgi")):
                continue
            importlib.import_module(info.name)
    found: set[type[DomainError]] = set()
    pending = [DomainError]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            if sub.__module__.split(".")[0] != "tests":
                found.add(sub)
                pending.append(sub)
    return found


def test_every_domain_error_class_has_a_row() -> None:
    abstract = {traces.TraceError}  # no code of its own: only its subclasses are raised
    assert _domain_error_classes() - abstract == {type(row[0]) for row in ROWS}


@pytest.mark.parametrize(
    "error",
    [
        harness.InvalidAgentFile("a.json", "x"),
        tools.ToolFilesInvalid([]),
        tools.ToolHandlerError(tools.ToolErrorCode.TOOL_FAILED, "x"),
    ],
)
def test_errors_that_stop_start_up_or_go_to_the_model_derive_from_the_base(
    error: Exception,
) -> None:
    assert isinstance(error, DomainError)
    assert error.code
    assert error.http_status >= 500


def test_an_object_that_only_looks_like_a_domain_error_is_an_unexpected_error() -> None:
    class LooksLikeOne(Exception):
        code = "invalid_request"
        http_status = 400
        message = "looks like a domain error"
        details: dict[str, Any] = {}

    response = _rendered(LooksLikeOne())
    assert response.status_code == 500
    assert response.data["error"]["code"] == "internal_error"
