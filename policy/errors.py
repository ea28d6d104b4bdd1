"""Typed policy errors: each carries a stable code, an HTTP status, details and headers."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

from core.errors import DomainError


class PolicyErrorCode(StrEnum):
    INVALID_RULE = "invalid_rule"
    RULE_NOT_FOUND = "rule_not_found"
    ACTING_USER_REQUIRED = "acting_user_required"
    PERMISSION_DENIED = "permission_denied"
    RATE_LIMITED = "rate_limited"
    TOO_MANY_CONCURRENT_RUNS = "too_many_concurrent_runs"
    TENANT_BUSY = "tenant_busy"
    TENANT_BUDGET_EXHAUSTED = "tenant_budget_exhausted"
    BUDGET_ABOVE_MAXIMUM = "budget_above_maximum"
    APPROVAL_NOT_FOUND = "approval_not_found"
    APPROVAL_ALREADY_DECIDED = "approval_already_decided"
    APPROVAL_ARGUMENTS_MISMATCH = "approval_arguments_mismatch"
    APPROVAL_EDIT_REFUSED = "approval_edit_refused"
    APPROVER_IS_END_USER = "approver_is_end_user"
    RUN_NOT_AWAITING_APPROVAL = "run_not_awaiting_approval"
    TOO_MANY_EVENT_STREAMS = "too_many_event_streams"
    KEY_SCOPE_MISSING = "key_scope_missing"
    KEY_SCOPE_UNDECLARED = "key_scope_undeclared"


class PolicyError(DomainError):
    code: PolicyErrorCode = PolicyErrorCode.INVALID_RULE
    http_status = 400


class InvalidRule(PolicyError):
    code = PolicyErrorCode.INVALID_RULE


class RuleNotFound(PolicyError):
    code = PolicyErrorCode.RULE_NOT_FOUND
    http_status = 404


class ActingUserRequired(PolicyError):
    code = PolicyErrorCode.ACTING_USER_REQUIRED


class PermissionDenied(PolicyError):
    code = PolicyErrorCode.PERMISSION_DENIED
    http_status = 403


class BudgetAboveMaximum(PolicyError):
    code = PolicyErrorCode.BUDGET_ABOVE_MAXIMUM


class Throttled(PolicyError):
    """Refused for now: ``Retry-After`` says when trying again makes sense."""

    code = PolicyErrorCode.RATE_LIMITED
    http_status = 429

    def __init__(
        self, message: str, retry_after_s: float, details: dict[str, Any] | None = None
    ) -> None:
        seconds = max(1, math.ceil(retry_after_s))
        super().__init__(
            message,
            {**(details or {}), "retry_after_s": seconds},
            headers={"Retry-After": str(seconds)},
        )
        self.retry_after_s = seconds


class RateLimited(Throttled):
    code = PolicyErrorCode.RATE_LIMITED


class TooManyConcurrentRuns(Throttled):
    code = PolicyErrorCode.TOO_MANY_CONCURRENT_RUNS


class TenantBusy(Throttled):
    code = PolicyErrorCode.TENANT_BUSY


class TooManyEventStreams(Throttled):
    code = PolicyErrorCode.TOO_MANY_EVENT_STREAMS


class TenantBudgetExhausted(Throttled):
    code = PolicyErrorCode.TENANT_BUDGET_EXHAUSTED


class ApprovalNotFound(PolicyError):
    code = PolicyErrorCode.APPROVAL_NOT_FOUND
    http_status = 404


class ApprovalAlreadyDecided(PolicyError):
    code = PolicyErrorCode.APPROVAL_ALREADY_DECIDED
    http_status = 409


class ApprovalArgumentsMismatch(PolicyError):
    code = PolicyErrorCode.APPROVAL_ARGUMENTS_MISMATCH
    http_status = 409


class ApprovalEditRefused(PolicyError):
    """Arguments changed with a denial, or changed into arguments the tool refuses."""

    code = PolicyErrorCode.APPROVAL_EDIT_REFUSED
    http_status = 400


class ApprovalEditRefusedByPolicy(ApprovalEditRefused):
    """Changed into a call the tenant's policy refuses (ACL, chain or call rule): the request
    is well formed, the policy as it stands conflicts with it. ``details`` names the rule."""

    http_status = 409


class ApproverIsEndUser(PolicyError):
    """Four eyes: the run's own end user may not approve its held calls (unless the tool file
    or the tenant's policy allows it)."""

    code = PolicyErrorCode.APPROVER_IS_END_USER
    http_status = 403


class RunNotAwaitingApproval(PolicyError):
    """The run ended (cancelled, finished): its held calls can no longer be decided."""

    code = PolicyErrorCode.RUN_NOT_AWAITING_APPROVAL
    http_status = 409


class KeyScopeMissing(PolicyError):
    """The API key was not given the scope this operation needs (whoever it acts for)."""

    code = PolicyErrorCode.KEY_SCOPE_MISSING
    http_status = 403

    def __init__(self, scope: str, method: str, key_scopes: list[str]) -> None:
        super().__init__(
            f"This API key lacks the scope {scope!r} that {method} here needs; issue a key "
            "with it (manage.py create_api_key --scope …).",
            {"scope": scope, "key_scopes": sorted(key_scopes)},
        )


class KeyScopeUndeclared(PolicyError):
    """A view method that declares no key scope is refused to every key (fail closed)."""

    code = PolicyErrorCode.KEY_SCOPE_UNDECLARED
    http_status = 403

    def __init__(self, method: str, view: str) -> None:
        super().__init__(
            f"{method} on {view} declares no API key scope, so no key may call it.",
            {"method": method, "view": view},
        )
