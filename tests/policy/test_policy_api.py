"""Tenant admins edit the policy through the API; every edit is audited."""

from django.contrib.auth import get_user_model
from django.test import Client

from policy.models import PolicyChange
from policy.services import decide

ADMIN = {"X-Harness-User": "alice"}


def test_a_tenant_admin_grants_a_scope_and_the_edit_is_recorded(acme):
    assert decide("acme", "dave", "customer:read").allowed is False

    response = acme.post(
        "/api/v1/policies/permissions", {"subject": "dave", "scope": "customer:read"}, **ADMIN
    )

    assert response.status_code == 201
    version = response.json()["policy_version"]
    assert decide("acme", "dave", "customer:read").allowed is True
    [change] = acme.get("/api/v1/policies/changes", **ADMIN).json()[:1]
    assert change["version"] == version
    assert change["action"] == "add"
    assert change["actor"].startswith("alice via api key ")
    assert change["before"] is None
    assert change["after"] == {
        "type": "permission",
        "subject": "dave",
        "scope": "customer:read",
        "effect": "allow",
    }


def test_revoking_a_permission_records_what_was_there_before(acme):
    acme.post("/api/v1/policies/roles", {"user": "dave", "role": "member"}, **ADMIN)
    assert decide("acme", "dave", "ticket:write").allowed is True

    response = acme.send(
        "delete", "/api/v1/policies/roles", {"user": "dave", "role": "member"}, **ADMIN
    )

    assert response.status_code == 200
    assert decide("acme", "dave", "ticket:write").allowed is False
    change = PolicyChange.objects.filter(tenant="acme").first()
    assert (change.action, change.before, change.after) == (
        "remove",
        {"type": "role", "user": "dave", "role": "member"},
        None,
    )


def test_a_deny_line_overrides_what_a_role_allows(acme):
    response = acme.post(
        "/api/v1/policies/permissions",
        {"subject": "bob", "scope": "ticket:write", "effect": "deny"},
        **ADMIN,
    )

    assert response.status_code == 201
    assert decide("acme", "bob", "ticket:read").allowed is True
    decision = decide("acme", "bob", "ticket:write")
    assert decision.allowed is False
    assert "denied by rule bob, acme, ticket, write, deny" in decision.reason


def test_roles_are_per_tenant(acme, globex):
    acme.post("/api/v1/policies/roles", {"user": "charlie", "role": "tenant_admin"}, **ADMIN)

    assert decide("acme", "charlie", "customer:read").allowed is True
    assert decide("globex", "charlie", "customer:read").allowed is False
    listing = globex.get("/api/v1/policies", **ADMIN)
    assert listing.status_code == 403  # alice is nobody in globex
    assert globex.get("/api/v1/policies", **{"X-Harness-User": "charlie"}).status_code == 403


def test_the_policy_api_needs_an_acting_user_with_policy_admin(acme):
    body = {"subject": "bob", "scope": "customer:read"}

    anonymous = acme.post("/api/v1/policies/permissions", body)
    member = acme.post("/api/v1/policies/permissions", body, **{"X-Harness-User": "bob"})

    assert anonymous.status_code == 400
    assert anonymous.json()["error"]["code"] == "acting_user_required"
    assert member.status_code == 403
    assert member.json()["error"]["code"] == "permission_denied"
    assert decide("acme", "bob", "customer:read").allowed is False


def test_a_malformed_scope_is_refused(acme):
    response = acme.post(
        "/api/v1/policies/permissions", {"subject": "bob", "scope": "everything"}, **ADMIN
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_rule"


def test_the_policy_lists_lines_rules_and_the_version(acme):
    policy = acme.get("/api/v1/policies", **ADMIN).json()

    assert {"user": "alice", "role": "tenant_admin"} in policy["roles"]
    assert {"subject": "role:member", "scope": "ticket:write", "effect": "allow"} in policy[
        "permissions"
    ]
    assert all(r["user"] != "charlie" for r in policy["roles"])
    defaults = {r["name"] for r in policy["rules"] if r["default"]}
    assert defaults == {"default-pii-no-external", "default-escalation-approval"}
    assert policy["policy_version"] > 0


def test_chain_rules_are_created_updated_and_deleted_with_an_audit(acme):
    rule = {
        "name": "no-pii-internal",
        "kind": "flow",
        "label": "pii",
        "sink": "internal",
        "effect": "require_approval",
    }

    created = acme.post("/api/v1/policies/rules", rule, **ADMIN)
    updated = acme.send(
        "patch", "/api/v1/policies/rules/no-pii-internal", {"effect": "refuse"}, **ADMIN
    )
    fetched = acme.get("/api/v1/policies/rules/no-pii-internal", **ADMIN)
    deleted = acme.send("delete", "/api/v1/policies/rules/no-pii-internal", **ADMIN)
    gone = acme.get("/api/v1/policies/rules/no-pii-internal", **ADMIN)

    assert created.status_code == 201
    assert updated.status_code == 200
    assert fetched.json()["effect"] == "refuse"
    assert deleted.status_code == 200
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "rule_not_found"
    update = PolicyChange.objects.get(action="update", rule=["rule", "no-pii-internal"])
    assert (update.before["effect"], update.after["effect"]) == ("require_approval", "refuse")


def test_a_rule_missing_a_field_for_its_kind_is_refused_naming_it(acme):
    response = acme.post(
        "/api/v1/policies/rules",
        {"name": "half", "kind": "flow", "label": "pii", "effect": "refuse"},
        **ADMIN,
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_rule"
    assert response.json()["error"]["details"] == {"field": "sink"}


def test_the_shipped_defaults_cannot_be_edited_by_a_tenant(acme):
    response = acme.send(
        "patch", "/api/v1/policies/rules/default-pii-no-external", {"enabled": False}, **ADMIN
    )

    assert response.status_code == 409  # well formed; the rule's state (shipped) refuses it
    assert response.json()["error"]["code"] == "invalid_rule"


def test_an_admin_edit_of_a_casbin_line_is_versioned_and_audited(acme):
    operator = Client()
    operator.force_login(get_user_model().objects.get(username="admin"))

    response = operator.post(
        "/admin/casbin_adapter/casbinrule/add/",
        {"ptype": "p", "v0": "bob", "v1": "acme", "v2": "customer", "v3": "read", "v4": "allow"},
    )

    assert response.status_code == 302
    assert decide("acme", "bob", "customer:read").allowed is True
    change = PolicyChange.objects.first()
    assert (change.actor, change.action) == ("admin:admin", "add")
    assert change.after["scope"] == "customer:read"
