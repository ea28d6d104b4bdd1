"""Casbin ACL decisions and audited edits of the Casbin lines.

Edits write the line, bump the tenant's policy version and record who changed what (before,
after) in one transaction; every process picks the change up on its next decision.

Users and roles are separate namespaces: a role is stored as ``role:<name>`` (in ``g`` lines
and as the subject of the role's ``p`` lines); a user id is a plain name and can never contain
``:``. The API takes roles by name (``{"user": "dave", "role": "member"}``) and permission
subjects as ``bob`` (a user) or ``role:member`` (a role).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable
from typing import Any

from casbin_adapter.models import CasbinRule
from django.db import transaction
from django.db.models import F, Q

from policy.engine import ROLE_PREFIX, Decision, current_version, get_engine, is_role_name
from policy.errors import ActingUserRequired, InvalidRule, PermissionDenied
from policy.models import PolicyChange, TenantPolicyVersion

# Matched whole (``fullmatch``): with ``^…$`` and ``re.match``, ``$`` also matched before a
# trailing newline, and a deny line for ``"bob\n"`` was stored and never denied ``bob``.
SCOPE_PATTERN = re.compile(r"([a-z0-9_-]+|\*):([a-z0-9_-]+|\*)")
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.@-]{1,200}")
EFFECTS = ("allow", "deny")


def decide(tenant: str, user: str, scope: str) -> Decision:
    """One ACL decision for one access scope."""
    return get_engine().decide(tenant, user, scope)


def authorize_scopes(tenant: str, user: str, scopes: Iterable[str]) -> Decision:
    """Allowed only if every scope is; returns the first refusal, else the last allowance."""
    return authorize_with(lambda scope: decide(tenant, user, scope), scopes)


def authorize_with(decide_scope: Callable[[str], Decision], scopes: Iterable[str]) -> Decision:
    """``authorize_scopes`` over any decision function (the live engine, or a snapshot)."""
    decision = Decision(allowed=False, scope="", reason="the tool declares no access scope")
    for scope in scopes:
        decision = decide_scope(scope)
        if not decision.allowed:
            return decision
    return decision


def require_scope(tenant: str, user: str, scope: str) -> Decision:
    """Raise ``PermissionDenied`` unless ``user`` holds ``scope`` in ``tenant``."""
    if not user:
        raise ActingUserRequired(
            f"Name the end user you act for in the X-Harness-User header (needs {scope}).",
            {"scope": scope},
        )
    decision = decide(tenant, user, scope)
    if not decision.allowed:
        raise PermissionDenied(
            f"{user} may not do this in {tenant}: {decision.reason}.",
            {"user": user, "scope": scope, "policy_version": decision.version},
        )
    return decision


def add_permission(tenant: str, subject: str, scope: str, effect: str, actor: str) -> int:
    """Let (or, with effect "deny", forbid) a user (``bob``) or a role (``role:member``) use a
    scope in a tenant."""
    obj, act = _parse_scope(scope)
    check_subject(subject)
    if effect not in EFFECTS:
        raise InvalidRule(f"effect must be one of {EFFECTS}, got {effect!r}", {"effect": effect})
    return _add_line("p", [subject, tenant, obj, act, effect], tenant, actor)


def remove_permission(tenant: str, subject: str, scope: str, effect: str, actor: str) -> int:
    obj, act = _parse_scope(scope)
    return _remove_line("p", [subject, tenant, obj, act, effect], tenant, actor)


def assign_role(tenant: str, user: str, role: str, actor: str) -> int:
    """Give a user a role within a tenant (roles are tenant-scoped). ``role`` is a role name,
    with or without its ``role:`` prefix."""
    _check_name("user", user)
    return _add_line("g", [user, role_subject(role), tenant], tenant, actor)


def unassign_role(tenant: str, user: str, role: str, actor: str) -> int:
    _check_name("user", user)
    return _remove_line("g", [user, role_subject(role), tenant], tenant, actor)


def role_subject(role: str) -> str:
    """A role's name in Casbin lines: ``role:<name>``, whether or not ``role`` has the prefix."""
    name = role[len(ROLE_PREFIX) :] if is_role_name(role or "") else role
    _check_name("role", name)
    return ROLE_PREFIX + name


def role_name(subject: str) -> str:
    """``role:member`` -> ``member``."""
    return subject[len(ROLE_PREFIX) :] if is_role_name(subject) else subject


def check_subject(subject: str) -> None:
    """A permission's subject: a user id (``bob``) or a role (``role:member``)."""
    if is_role_name(subject or ""):
        _check_name("role", role_name(subject))
    else:
        _check_name("subject", subject)


@transaction.atomic
def save_line(pk: int | None, ptype: str, values: list[str], actor: str) -> int:
    """The admin's edit of one Casbin line (new when ``pk`` is None), validated like the
    API's and audited with before and after."""
    if ptype == "p":
        subject, tenant, obj, act, effect = (list(values) + [""] * 5)[:5]
        check_subject(subject)
        _parse_scope(f"{obj}:{act}")
        if effect not in EFFECTS:
            raise InvalidRule(f"effect must be one of {EFFECTS}", {"effect": effect})
        values = [subject, tenant, obj, act, effect]
    elif ptype == "g":
        user, role, tenant = (list(values) + [""] * 3)[:3]
        _check_name("user", user)
        values = [user, role_subject(role), tenant]
    else:
        raise InvalidRule("ptype must be 'p' (permission) or 'g' (role)", {"ptype": ptype})
    if not tenant:
        raise InvalidRule("the tenant (domain) is required", {"tenant": tenant})
    if pk is None:
        return _add_line(ptype, values, tenant, actor)
    line = CasbinRule.objects.select_for_update().get(pk=pk)
    before_values = [line.v0, line.v1, line.v2, line.v3, line.v4][: len(values)]
    before = describe_line(line.ptype, before_values)
    line.ptype = ptype
    for field, value in _fields(values).items():
        setattr(line, field, value)
    line.save()
    return record_change(
        tenant, actor, "update", [ptype, *values], before, describe_line(ptype, values)
    )


@transaction.atomic
def delete_line(pk: int, actor: str) -> int:
    line = CasbinRule.objects.get(pk=pk)
    values = [line.v0, line.v1, line.v2, line.v3, line.v4]
    values = values[:5] if line.ptype == "p" else values[:3]
    tenant = values[1] if line.ptype == "p" else values[2]
    return _remove_line(line.ptype, values, tenant, actor)


def list_lines(tenant: str) -> dict[str, Any]:
    """The tenant's permissions and role assignments, and the tenant's policy version."""
    lines = CasbinRule.objects.filter(Q(ptype="p", v1=tenant) | Q(ptype="g", v2=tenant)).order_by(
        "ptype", "v0", "v1", "v2", "v3"
    )
    return {
        "policy_version": current_version(tenant),
        "permissions": [
            {"subject": line.v0, "scope": f"{line.v2}:{line.v3}", "effect": line.v4}
            for line in lines
            if line.ptype == "p"
        ],
        "roles": [
            {"user": line.v0, "role": role_name(line.v1)} for line in lines if line.ptype == "g"
        ],
    }


def list_changes(tenant: str, limit: int = 100) -> list[PolicyChange]:
    return list(PolicyChange.objects.filter(tenant=tenant)[:limit])


def list_changes_after(after_id: int, limit: int) -> list[PolicyChange]:
    """Every tenant's policy edits by insertion (``id``) after ``after_id``, for readers that
    keep their own cursor (the SIEM delivery)."""
    return list(PolicyChange.objects.filter(id__gt=after_id).order_by("id")[:limit])


def count_changes_after(after_id: int) -> int:
    return PolicyChange.objects.filter(id__gt=after_id).count()


def describe_line(ptype: str, values: list[str]) -> dict[str, str]:
    if ptype == "p":
        subject, _tenant, obj, act, effect = (values + [""] * 5)[:5]
        return {"type": "permission", "subject": subject, "scope": f"{obj}:{act}", "effect": effect}
    user, role, _tenant = (values + [""] * 3)[:3]
    return {"type": "role", "user": user, "role": role_name(role)}


def _parse_scope(scope: str) -> tuple[str, str]:
    match = SCOPE_PATTERN.fullmatch(scope or "")
    if not match:
        raise InvalidRule(f"scope {scope!r} is not of the form object:action", {"scope": scope})
    return match.group(1), match.group(2)


def _check_name(field: str, value: str) -> None:
    if not NAME_PATTERN.fullmatch(value or ""):
        raise InvalidRule(
            f"{field} {value!r} must be 1-200 letters, digits, '_', '.', '@' or '-'",
            {field: value},
        )


def _fields(values: list[str]) -> dict[str, str]:
    return {f"v{i}": value for i, value in enumerate(values)}


@transaction.atomic
def _add_line(ptype: str, values: list[str], tenant: str, actor: str) -> int:
    """Add a line unless present; returns the policy version after the edit."""
    _, created = CasbinRule.objects.get_or_create(ptype=ptype, **_fields(values))
    if not created:
        return current_version(tenant)
    return record_change(tenant, actor, "add", [ptype, *values], None, describe_line(ptype, values))


@transaction.atomic
def _remove_line(ptype: str, values: list[str], tenant: str, actor: str) -> int:
    deleted, _ = CasbinRule.objects.filter(ptype=ptype, **_fields(values)).delete()
    if not deleted:
        return current_version(tenant)
    return record_change(
        tenant, actor, "remove", [ptype, *values], describe_line(ptype, values), None
    )


def record_change(tenant: str, actor: str, action: str, rule: Any, before: Any, after: Any) -> int:
    """Bump the tenant's policy version and write the audit row; call inside the edit's
    transaction."""
    version = bump_version(tenant)
    PolicyChange.objects.create(
        tenant=tenant,
        actor=actor,
        action=action,
        rule=rule,
        before=before,
        after=after,
        version=version,
    )
    return version


def bump_version(tenant: str) -> int:
    """The tenant's policy version + 1 (a new row starts at 1); returns the new version."""
    TenantPolicyVersion.objects.get_or_create(tenant=tenant)
    TenantPolicyVersion.objects.filter(tenant=tenant).update(
        version=F("version") + 1, stamp=secrets.token_hex(16)
    )
    return TenantPolicyVersion.objects.get(tenant=tenant).version


def bump_all_versions() -> int:
    """Bump the version of every tenant that has policy lines, rules or a version row."""
    tenants = set(TenantPolicyVersion.objects.values_list("tenant", flat=True))
    tenants |= set(CasbinRule.objects.filter(ptype="p").values_list("v1", flat=True))
    tenants |= set(CasbinRule.objects.filter(ptype="g").values_list("v2", flat=True))
    tenants |= set(PolicyChange.objects.values_list("tenant", flat=True).distinct())
    return max((bump_version(tenant) for tenant in sorted(tenants) if tenant), default=0)
