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
from policy.alerts import (
    Crossing,
    claim_day_crossings,
    record_run_crossings,
    run_crossings,
)
from policy.approvals import (
    APPROVER_SCOPE,
    SELF_APPROVAL_SCOPE,
    EditedArguments,
    add_decision_guard,
    approval_decided,
    build_approval,
    decide_approval,
    expire_approvals,
    get_approval,
    has_pending_approvals,
    hash_arguments,
    list_approvals,
    save_approvals,
)
from policy.budget import (
    BudgetStop,
    Reservation,
    RunBudget,
    RunLedger,
    charge_day_tool_call,
    load_run_ledger,
    open_run_budget,
    release_run_budget,
    reserve_day,
    run_room,
    run_tool_limits,
    run_usage,
    save_run_ledger,
    settle_day,
    spend,
    tenant_day_usage,
    usd_to_micros,
)
from policy.engine import (
    ROLE_PREFIX,
    Decision,
    current_version,
    current_version_key,
    version_key_sql,
)
from policy.limits import (
    SLOT_REFRESH_S,
    LimitValues,
    admit_run,
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
    create_rule,
    delete_rule,
    evaluate_call_rules,
    evaluate_chain_rules,
    get_rule,
    list_labels,
    list_rules,
    record_labels,
    rules_for,
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
    "SLOT_REFRESH_S",
    "ApprovalStatus",
    "BudgetStop",
    "Crossing",
    "Decision",
    "EditedArguments",
    "HeldLabelValue",
    "PolicySnapshot",
    "ProposedEdit",
    "Reservation",
    "RuleEffect",
    "RuleSpec",
    "RuleVerdict",
    "RunBudget",
    "RunLedger",
    "ToolApproval",
    "add_decision_guard",
    "add_permission",
    "admit_run",
    "approval_decided",
    "assign_role",
    "authorize_scopes",
    "build_approval",
    "bump_policy_version",
    "charge_day_tool_call",
    "check_call_rules",
    "claim_day_crossings",
    "clear_limits",
    "close_event_stream",
    "create_rule",
    "current_version",
    "current_version_key",
    "decide",
    "decide_approval",
    "delete_rule",
    "evaluate_call_rules",
    "evaluate_chain_rules",
    "expire_approvals",
    "get_approval",
    "get_rule",
    "has_pending_approvals",
    "hash_arguments",
    "list_approvals",
    "list_changes",
    "list_labels",
    "list_lines",
    "list_rules",
    "load_run_ledger",
    "open_event_stream",
    "open_run_budget",
    "pace_model_call",
    "policy_snapshot",
    "record_labels",
    "record_run_crossings",
    "release_run",
    "release_run_budget",
    "remove_permission",
    "require_scope",
    "reserve_day",
    "reserve_run",
    "resolve_run_budget",
    "resume_run_slot",
    "role_name",
    "role_subject",
    "rules_for",
    "run_crossings",
    "run_room",
    "run_tool_limits",
    "run_usage",
    "save_approvals",
    "save_run_ledger",
    "settle_day",
    "spend",
    "tenant_day_usage",
    "tenant_limits",
    "unassign_role",
    "update_rule",
    "usd_to_micros",
    "version_key_sql",
]


def bump_policy_version(tenant: str | None = None) -> int:
    """Mark a tenant's rules changed (``None``: every tenant's, e.g. after a bulk load): every
    process reloads them. Returns the tenant's new version (the highest, for all)."""
    with transaction.atomic():
        return bump_version(tenant) if tenant is not None else bump_all_versions()


def resolve_run_budget(
    tenant: str,
    agent_budget: RunBudget,
    requested: dict[str, Any] | None,
    limits: LimitValues | None = None,
) -> RunBudget:
    """A run's limits: the agent's, lowered or raised by the request up to the tenant's
    maximum. Raises ``BudgetAboveMaximum``. ``limits``: the tenant's, if already read."""
    return _budget.resolve_run_budget(
        agent_budget, requested, limits or _limits.tenant_limits(tenant)
    )


def reserve_run(
    tenant: str, run_id: str, run_budget: RunBudget, limits: LimitValues | None = None
) -> None:
    """Budget-aware admission: reserve the run's own budget from the tenant's day, or raise
    ``TenantBudgetExhausted`` (429). Call in the run's creating transaction."""
    _budget.reserve_run(tenant, run_id, run_budget, limits or _limits.tenant_limits(tenant))
