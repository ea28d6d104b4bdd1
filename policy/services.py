"""Policy decisions and audited rule edits.

Edits write the Casbin rule, bump the policy version and record who changed what in one
transaction; every process picks the change up on its next decision.
"""

import re
from collections.abc import Iterable

from casbin_adapter.models import CasbinRule
from django.db import transaction
from django.db.models import F

from policy.engine import Decision, get_engine
from policy.errors import InvalidRule
from policy.models import PolicyChange, PolicyVersion

SCOPE_PATTERN = re.compile(r"^([a-z0-9_-]+|\*):([a-z0-9_-]+|\*)$")
EFFECTS = ("allow", "deny")


def decide(tenant: str, user: str, scope: str) -> Decision:
    """One ACL decision for one access scope."""
    return get_engine().decide(tenant, user, scope)


def authorize_scopes(tenant: str, user: str, scopes: Iterable[str]) -> Decision:
    """Allowed only if every scope is; returns the first refusal, else the last allowance."""
    decision = Decision(allowed=False, scope="", reason="the tool declares no access scope")
    for scope in scopes:
        decision = decide(tenant, user, scope)
        if not decision.allowed:
            return decision
    return decision


def add_permission(tenant: str, subject: str, scope: str, effect: str, actor: str) -> int:
    """Let (or, with effect "deny", forbid) a user or role use a scope in a tenant."""
    obj, act = _parse_scope(scope)
    if effect not in EFFECTS:
        raise InvalidRule(f"effect must be one of {EFFECTS}, got {effect!r}")
    return _add_rule("p", [subject, tenant, obj, act, effect], tenant, actor)


def assign_role(tenant: str, user: str, role: str, actor: str) -> int:
    """Give a user a role within a tenant (roles are tenant-scoped)."""
    if not user or not role:
        raise InvalidRule("user and role are both required")
    return _add_rule("g", [user, role, tenant], tenant, actor)


def remove_permission(tenant: str, subject: str, scope: str, effect: str, actor: str) -> int:
    obj, act = _parse_scope(scope)
    return _remove_rule("p", [subject, tenant, obj, act, effect], tenant, actor)


def _parse_scope(scope: str) -> tuple[str, str]:
    match = SCOPE_PATTERN.match(scope)
    if not match:
        raise InvalidRule(f"scope {scope!r} is not of the form object:action", {"scope": scope})
    return match.group(1), match.group(2)


def _fields(values: list[str]) -> dict[str, str]:
    return {f"v{i}": value for i, value in enumerate(values)}


@transaction.atomic
def _add_rule(ptype: str, values: list[str], tenant: str, actor: str) -> int:
    """Add a rule unless present; returns the policy version after the edit."""
    _, created = CasbinRule.objects.get_or_create(ptype=ptype, **_fields(values))
    if not created:
        return _bump_version(only_read=True)
    version = _bump_version()
    PolicyChange.objects.create(
        tenant=tenant, actor=actor, action="add", rule=[ptype, *values], version=version
    )
    return version


@transaction.atomic
def _remove_rule(ptype: str, values: list[str], tenant: str, actor: str) -> int:
    deleted, _ = CasbinRule.objects.filter(ptype=ptype, **_fields(values)).delete()
    if not deleted:
        return _bump_version(only_read=True)
    version = _bump_version()
    PolicyChange.objects.create(
        tenant=tenant, actor=actor, action="remove", rule=[ptype, *values], version=version
    )
    return version


def _bump_version(only_read: bool = False) -> int:
    PolicyVersion.objects.get_or_create(pk=1)
    if not only_read:
        PolicyVersion.objects.filter(pk=1).update(version=F("version") + 1)
    return PolicyVersion.objects.get(pk=1).version
