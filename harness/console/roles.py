"""Console roles from an identity provider's groups (``HARNESS_OIDC_GROUP_MAP``).

A role in a tenant is what the console already knows, given three ways at once:

- the tenant granted (``StaffTenantGrant``): its pages are visible;
- the Django group named like the role (made by a superuser, holding the model permissions
  the role has, e.g. ``view_run``, ``change_toolapproval``): what may be done on those pages;
- the Casbin role ``role:<role>`` in that tenant's policy: what the user may decide as
  themselves there (e.g. ``approval:decide``).

For a single sign-on user all three follow the ID token at every sign-in: what the groups map
to is given, what they no longer map to is taken away. Only roles and tenants that the map
names are touched in the policy; a role given by hand to the same user id is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from django.contrib.auth.models import AbstractUser, Group
from django.db import transaction

from harness.models import StaffTenantGrant, Tenant
from policy import services as policy

logger = logging.getLogger(__name__)

GroupMap = Mapping[str, Sequence[tuple[str, str]]]


def roles_of_groups(groups: Iterable[str], group_map: GroupMap) -> dict[str, set[str]]:
    """Tenant -> console roles that ``groups`` map to (groups the map does not name give
    nothing)."""
    roles: dict[str, set[str]] = {}
    for group in groups:
        for tenant, role in group_map.get(group, ()):
            roles.setdefault(tenant, set()).add(role)
    return roles


@transaction.atomic
def sync_console_roles(
    user: AbstractUser, roles: Mapping[str, set[str]], group_map: GroupMap, actor: str
) -> None:
    """Make ``user``'s tenant grants, Django groups and mapped Casbin roles exactly ``roles``.

    Staff status follows: a user with no role left is no longer staff (and cannot sign in to
    the console). Policy edits are recorded as ``PolicyChange`` rows by ``actor``; a sign-in
    that changes nothing writes nothing.
    """
    tenants = {t.slug: t for t in Tenant.objects.filter(slug__in=sorted(roles))}
    for slug in sorted(set(roles) - set(tenants)):
        logger.warning("Single sign-on: %r maps to tenant %r, which does not exist", user, slug)
    StaffTenantGrant.objects.filter(user=user).exclude(tenant__slug__in=sorted(tenants)).delete()
    for tenant in tenants.values():
        StaffTenantGrant.objects.get_or_create(user=user, tenant=tenant)

    wanted = {role for slug in tenants for role in roles[slug]}
    groups = list(Group.objects.filter(name__in=sorted(wanted)))
    for missing in sorted(wanted - {g.name for g in groups}):
        logger.warning("Single sign-on: no Django group named %r holds that role's rights", missing)
    user.groups.set(groups)

    pairs = _mapped_pairs(group_map)
    existing = set(
        Tenant.objects.filter(slug__in=sorted({t for t, _ in pairs})).values_list("slug", flat=True)
    )
    for tenant, role in sorted(pairs):
        if tenant not in existing:
            continue
        if role in roles.get(tenant, set()):
            policy.assign_role(tenant, user.get_username(), role, actor)
        else:
            policy.unassign_role(tenant, user.get_username(), role, actor)

    is_staff = bool(tenants)
    if user.is_staff != is_staff or user.is_superuser:
        user.is_staff, user.is_superuser = is_staff, False
        user.save(update_fields=["is_staff", "is_superuser"])


def _mapped_pairs(group_map: GroupMap) -> set[tuple[str, str]]:
    return {pair for pairs in group_map.values() for pair in pairs}
