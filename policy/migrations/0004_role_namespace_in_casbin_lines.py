"""Users and roles in separate namespaces: every role becomes ``role:<name>`` in the Casbin
lines, so a user id equal to a role name no longer gets the role.

A ``g`` line's role (v1) is prefixed; a ``p`` line's subject (v0) is prefixed when it names a
role of its tenant (a role some ``g`` line of that tenant assigns). Each changed line is
recorded as a ``PolicyChange`` by ``migration:role_namespace`` and bumps its tenant's version.
A ``p`` line of a role nobody is assigned stays a user's line: check such lines after the
upgrade (``GET /api/v1/policies`` lists them).
"""

import secrets

from django.db import migrations
from django.db.models import F

PREFIX = "role:"
ACTOR = "migration:role_namespace"


def _bump(apps, tenant):
    TenantPolicyVersion = apps.get_model("policy", "TenantPolicyVersion")
    TenantPolicyVersion.objects.get_or_create(tenant=tenant)
    TenantPolicyVersion.objects.filter(tenant=tenant).update(
        version=F("version") + 1, stamp=secrets.token_hex(16)
    )
    return TenantPolicyVersion.objects.get(tenant=tenant).version


def _record(apps, tenant, rule, before, after):
    apps.get_model("policy", "PolicyChange").objects.create(
        tenant=tenant,
        actor=ACTOR,
        action="update",
        rule=rule,
        before=before,
        after=after,
        version=_bump(apps, tenant),
    )


def prefix_roles(apps, schema_editor):
    CasbinRule = apps.get_model("casbin_adapter", "CasbinRule")
    roles: dict[str, set[str]] = {}
    for line in CasbinRule.objects.filter(ptype="g").order_by("id"):
        name = line.v1[len(PREFIX) :] if line.v1.startswith(PREFIX) else line.v1
        roles.setdefault(line.v2, set()).add(name)
        if line.v1.startswith(PREFIX):
            continue
        line.v1 = PREFIX + name
        line.save(update_fields=["v1"])
        _record(
            apps,
            line.v2,
            ["g", line.v0, line.v1, line.v2],
            {"type": "role", "user": line.v0, "line": ["g", line.v0, name, line.v2]},
            {"type": "role", "user": line.v0, "line": ["g", line.v0, line.v1, line.v2]},
        )
    for line in CasbinRule.objects.filter(ptype="p").order_by("id"):
        if line.v0.startswith(PREFIX) or line.v0 not in roles.get(line.v1, set()):
            continue
        before = line.v0
        line.v0 = PREFIX + before
        line.save(update_fields=["v0"])
        scope = f"{line.v2}:{line.v3}"
        _record(
            apps,
            line.v1,
            ["p", line.v0, line.v1, line.v2, line.v3, line.v4],
            {"type": "permission", "subject": before, "scope": scope, "effect": line.v4},
            {"type": "permission", "subject": line.v0, "scope": scope, "effect": line.v4},
        )


def unprefix_roles(apps, schema_editor):
    CasbinRule = apps.get_model("casbin_adapter", "CasbinRule")
    for line in CasbinRule.objects.filter(ptype="g", v1__startswith=PREFIX):
        line.v1 = line.v1[len(PREFIX) :]
        line.save(update_fields=["v1"])
    for line in CasbinRule.objects.filter(ptype="p", v0__startswith=PREFIX):
        line.v0 = line.v0[len(PREFIX) :]
        line.save(update_fields=["v0"])


class Migration(migrations.Migration):
    dependencies = [
        ("policy", "0003_per_tenant_policy_version"),
        ("casbin_adapter", "0001_initial"),
    ]

    operations = [migrations.RunPython(prefix_roles, unprefix_roles)]
