"""Finding 4: a user id equal to a role name got the role. Users and roles are separate
namespaces in the Casbin lines (roles are ``role:<name>``), migrated from the old lines."""

from __future__ import annotations

import importlib

from casbin_adapter.models import CasbinRule
from django.apps import apps

from policy import services as policy
from policy.models import PolicyChange
from tests.runs import call, run_script, tool_results


def test_an_end_user_named_like_a_role_does_not_get_the_role(acme, agent_dir):
    run = run_script(
        acme,
        agent_dir,
        [call("get_customer", customer_id="C-1001"), {"text": "done"}],
        user="tenant_admin",
    )

    [result] = tool_results(run["id"])
    assert result["ok"] is False
    assert result["error"]["code"] == "permission_denied"
    assert "13812345678" not in str(result)


def test_an_acting_user_named_like_a_role_may_not_read_the_policy(acme):
    for name in ("tenant_admin", "role:tenant_admin"):
        response = acme.get("/api/v1/policies", **{"X-Harness-User": name})

        assert response.status_code == 403, name
        assert response.json()["error"]["code"] == "permission_denied"
    assert acme.get("/api/v1/policies", **{"X-Harness-User": "alice"}).status_code == 200


def test_roles_are_stored_in_their_own_namespace_and_shown_by_name(acme):
    admin = {"X-Harness-User": "alice"}
    assert (
        acme.post("/api/v1/policies/roles", {"user": "dave", "role": "member"}, **admin).status_code
        == 201
    )

    assert CasbinRule.objects.filter(ptype="g", v0="dave", v1="role:member", v2="acme").exists()
    body = acme.get("/api/v1/policies", **admin).json()
    assert {"user": "dave", "role": "member"} in body["roles"]
    assert {"subject": "role:member", "scope": "ticket:write", "effect": "allow"} in body[
        "permissions"
    ]
    assert policy.decide("acme", "dave", "ticket:write").allowed
    # a grant to a user named "member" is a user's grant, not the role's
    granted = acme.post(
        "/api/v1/policies/permissions", {"subject": "member", "scope": "customer:read"}, **admin
    )
    assert granted.status_code == 201
    assert not policy.decide("acme", "dave", "customer:read").allowed
    refused = acme.post(
        "/api/v1/policies/permissions", {"subject": "role:", "scope": "customer:read"}, **admin
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_rule"


def test_the_migration_moves_existing_roles_into_their_namespace(demo):
    CasbinRule.objects.all().delete()
    old = [
        ("g", "carol", "auditor", "initech"),
        ("p", "auditor", "initech", "ticket", "read", "allow"),
        ("p", "carol", "initech", "customer", "read", "deny"),
        ("p", "lonely", "initech", "ticket", "write", "allow"),
    ]
    for line in old:
        CasbinRule.objects.create(ptype=line[0], **{f"v{i}": v for i, v in enumerate(line[1:])})
    migration = importlib.import_module("policy.migrations.0004_role_namespace_in_casbin_lines")
    changes = PolicyChange.objects.count()

    migration.prefix_roles(apps, None)
    migration.prefix_roles(apps, None)  # idempotent

    lines = set(CasbinRule.objects.values_list("ptype", "v0", "v1", "v2", "v3", "v4"))
    assert lines == {
        ("g", "carol", "role:auditor", "initech", "", ""),
        ("p", "role:auditor", "initech", "ticket", "read", "allow"),
        ("p", "carol", "initech", "customer", "read", "deny"),
        ("p", "lonely", "initech", "ticket", "write", "allow"),
    }
    assert PolicyChange.objects.count() == changes + 2
    assert policy.decide("initech", "carol", "ticket:read").allowed
    assert not policy.decide("initech", "auditor", "ticket:read").allowed
