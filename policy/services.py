"""The policy engine's public face for other apps: ACL decisions and edits, chain and call
rules, limits, the budget ledger and approvals. Each lives in its own module; other apps
import only this one (and ``policy.errors``)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from policy import budget as _budget
from policy import limits as _limits
from policy.acl import (
    add_permission,
    assign_role,
    authorize_scopes,
    bump_all_versions,
    bump_version,
    decide,
    list_changes,
    list_lines,
    remove_permission,
    require_scope,
    role_name,
    role_subject,
    unassign_role,
)
from policy.approvals import (
    APPROVER_SCOPE,
    SELF_APPROVAL_SCOPE,
    add_decision_guard,
    approval_decided,
    decide_approval,
    expire_approvals,
    find_approval,
    get_approval,
    has_pending_approvals,
    hash_arguments,
    hold_for_approval,
    list_approvals,
)
from policy.budget import (
    BudgetStop,
    Reservation,
    RunBudget,
    add_wall_time,
    cancel_reservation,
    open_run_budget,
    run_tool_limits,
    run_usage,
    settle_model_call,
    tenant_day_usage,
    usd_to_micros,
)
from policy.engine import ROLE_PREFIX, Decision, current_version, current_version_key
from policy.limits import (
    admit_run,
    admit_tool_call,
    clear_limits,
    pace_model_call,
    release_run,
    resume_run_slot,
    tenant_limits,
)
from policy.models import ApprovalStatus, RuleEffect, ToolApproval
from policy.rules import (
    HeldLabelValue,
    RuleSpec,
    RuleVerdict,
    check_call_rules,
    check_chain_rules,
    create_rule,
    delete_rule,
    get_rule,
    list_labels,
    list_rules,
    note_labels,
    update_rule,
)
from policy.snapshot import PolicySnapshot, ProposedEdit, policy_snapshot
from policy.streams import MAX_STREAM_S as MAX_EVENT_STREAM_S
from policy.streams import close_event_stream, open_event_stream

POLICY_ADMIN_SCOPE = "policy:admin"

__all__ = [
    "APPROVER_SCOPE",
    "MAX_EVENT_STREAM_S",
    "POLICY_ADMIN_SCOPE",
    "ROLE_PREFIX",
    "SELF_APPROVAL_SCOPE",
    "ApprovalStatus",
    "BudgetStop",
    "Decision",
    "HeldLabelValue",
    "PolicySnapshot",
    "ProposedEdit",
    "Reservation",
    "RuleEffect",
    "RuleSpec",
    "RuleVerdict",
    "RunBudget",
    "ToolApproval",
    "add_decision_guard",
    "add_permission",
    "add_wall_time",
    "admit_run",
    "admit_tool_call",
    "approval_decided",
    "assign_role",
    "authorize_scopes",
    "bump_policy_version",
    "cancel_reservation",
    "check_call_rules",
    "check_chain_rules",
    "clear_limits",
    "close_event_stream",
    "create_rule",
    "current_version",
    "current_version_key",
    "decide",
    "decide_approval",
    "delete_rule",
    "expire_approvals",
    "find_approval",
    "get_approval",
    "get_rule",
    "has_pending_approvals",
    "hash_arguments",
    "hold_for_approval",
    "list_approvals",
    "list_changes",
    "list_labels",
    "list_lines",
    "list_rules",
    "note_labels",
    "open_event_stream",
    "open_run_budget",
    "pace_model_call",
    "policy_snapshot",
    "release_run",
    "remove_permission",
    "require_scope",
    "reserve_model_call",
    "resolve_run_budget",
    "resume_run_slot",
    "role_name",
    "role_subject",
    "run_tool_limits",
    "run_usage",
    "settle_model_call",
    "tenant_day_usage",
    "tenant_limits",
    "unassign_role",
    "update_rule",
    "usd_to_micros",
]


def bump_policy_version(tenant: str | None = None) -> int:
    """Mark a tenant's rules changed (``None``: every tenant's, e.g. after a bulk load): every
    process reloads them. Returns the tenant's new version (the highest, for all)."""
    with transaction.atomic():
        return bump_version(tenant) if tenant is not None else bump_all_versions()


def resolve_run_budget(
    tenant: str, agent_budget: RunBudget, requested: dict[str, Any] | None
) -> RunBudget:
    """A run's limits: the agent's, lowered or raised by the request up to the tenant's
    maximum. Raises ``BudgetAboveMaximum``."""
    return _budget.resolve_run_budget(agent_budget, requested, _limits.tenant_limits(tenant))


def reserve_model_call(
    tenant: str, run_id: str, tokens: int, cost_micros: int, segment_elapsed_ms: int
) -> Reservation | BudgetStop:
    """Reserve the next model call's tokens and cost (micro-USD) on the run and the tenant's
    day, or return which budget (or the wall-time limit) stops the run."""
    return _budget.reserve_model_call(
        tenant,
        run_id,
        tokens,
        cost_micros,
        segment_elapsed_ms,
        _limits.tenant_limits(tenant),
    )
