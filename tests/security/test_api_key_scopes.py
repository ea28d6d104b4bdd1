"""API keys carry scopes, an expiry and a rotation: a call beyond a key's scopes is 403 naming
the scope, an expired key 401, a rotated key works for its grace period and not after."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.api_keys import authenticate_api_key, create_api_key, rotate_api_key
from harness.errors import ApiKeyExpired
from harness.models import ApiKey
from policy.api.permissions import required_key_scope
from policy.key_scopes import KEY_SCOPES
from tests.conftest import ApiClient

RUN = "00000000-0000-4000-8000-000000000000"
# The scope each operation needs: the contract, written out (not read from the views).
ENDPOINTS = [
    ("post", "/api/v1/runs", "runs:create"),
    ("get", "/api/v1/runs", "runs:read"),
    ("get", f"/api/v1/runs/{RUN}", "runs:read"),
    ("post", f"/api/v1/runs/{RUN}/cancel", "runs:cancel"),
    ("get", f"/api/v1/runs/{RUN}/events", "runs:read"),
    ("get", f"/api/v1/runs/{RUN}/trace", "runs:read"),
    ("get", f"/api/v1/runs/{RUN}/receipt", "runs:read"),
    ("post", f"/api/v1/runs/{RUN}/replay", "runs:read"),
    ("get", f"/api/v1/runs/{RUN}/approvals", "runs:read"),
    ("post", f"/api/v1/runs/{RUN}/approvals/call_1", "approvals:decide"),
    ("get", "/api/v1/reports/costs", "reports:read"),
    ("post", "/api/v1/policies/what-if", "policy:read"),
    ("get", "/api/v1/policies", "policy:read"),
    ("post", "/api/v1/policies/permissions", "policy:admin"),
    ("delete", "/api/v1/policies/permissions", "policy:admin"),
    ("post", "/api/v1/policies/roles", "policy:admin"),
    ("delete", "/api/v1/policies/roles", "policy:admin"),
    ("get", "/api/v1/policies/rules", "policy:read"),
    ("post", "/api/v1/policies/rules", "policy:admin"),
    ("get", "/api/v1/policies/rules/some-rule", "policy:read"),
    ("patch", "/api/v1/policies/rules/some-rule", "policy:admin"),
    ("delete", "/api/v1/policies/rules/some-rule", "policy:admin"),
    ("get", "/api/v1/policies/changes", "policy:read"),
    ("get", "/api/v1/policies/budget", "policy:read"),
    ("get", "/api/v1/datasets", "datasets"),
    ("post", "/api/v1/datasets", "datasets"),
    ("get", "/api/v1/datasets/some-set", "datasets"),
    ("post", "/api/v1/datasets/some-set/items", "datasets"),
    ("patch", "/api/v1/datasets/some-set/items/1", "datasets"),
    ("delete", "/api/v1/datasets/some-set/items/1", "datasets"),
    ("post", "/api/v1/experiments", "experiments"),
    ("get", f"/api/v1/experiments/{RUN}", "experiments"),
    ("post", f"/api/v1/experiments/{RUN}/cancel", "experiments"),
    ("get", "/api/v1/experiments", "experiments"),
    ("get", f"/api/v1/experiments/{RUN}/export", "experiments"),
]
HANDLERS = ("get", "post", "put", "patch", "delete")


def call(key: str, method: str, path: str):
    client = ApiClient(Client(), key)
    if method == "get":
        return client.get(path, **{"X-Harness-User": "alice"})
    return client.send(method, path, {}, **{"X-Harness-User": "alice"})


def error(response) -> dict:
    assert response["Content-Type"] == "application/json"  # the event stream's errors too
    return json.loads(response.content)["error"]


def view_of(callback):
    """The view class behind a URL's callback (the event stream's is an async function)."""
    return getattr(callback, "view_class", None) or getattr(callback, "cls", None)


def _api_views(resolver: URLResolver | None = None, prefix: str = ""):
    for pattern in (resolver or get_resolver()).url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _api_views(pattern, route)
        elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
            view = view_of(pattern.callback)
            public = getattr(pattern.callback, "view_initkwargs", {}).get(
                "authentication_classes", getattr(view, "authentication_classes", None)
            )
            if view is not None and public != []:  # the schema and its docs are public
                yield route, view


def test_the_table_names_every_operation_of_the_api_and_each_declares_its_scope():
    declared = {
        (view, method) for _, view in _api_views() for method in HANDLERS if hasattr(view, method)
    }
    tabled = {(view_of(resolve(path).func), method) for method, path, _ in ENDPOINTS}
    assert tabled == declared
    for view, method in declared:
        assert required_key_scope(view, method) in KEY_SCOPES, (view, method)


@pytest.mark.django_db(transaction=True)
@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    scopes=st.sets(st.sampled_from(KEY_SCOPES)),
    endpoint=st.sampled_from(ENDPOINTS),
)
def test_a_call_is_403_naming_the_scope_exactly_when_the_key_lacks_it(demo, scopes, endpoint):
    method, path, needed = endpoint
    secret = create_api_key("acme", f"k-{len(scopes)}", scopes=scopes).secret
    response = call(secret, method, path)
    refused = response.status_code == 403 and error(response)["code"] == "key_scope_missing"
    assert refused == (needed not in scopes), (endpoint, scopes, response.content)
    if refused:
        assert error(response)["details"]["scope"] == needed
        assert needed in error(response)["message"]


def test_a_key_without_policy_admin_cannot_edit_policy_even_for_a_tenant_admin(demo):
    reader = create_api_key("acme", "reader", scopes=["policy:read"]).secret
    body = {"subject": "bob", "scope": "ticket:write", "effect": "allow"}
    client = ApiClient(Client(), reader)
    response = client.post("/api/v1/policies/permissions", body, **{"X-Harness-User": "alice"})
    assert response.status_code == 403
    assert error(response)["code"] == "key_scope_missing"
    assert error(response)["details"]["scope"] == "policy:admin"
    assert client.get("/api/v1/policies", **{"X-Harness-User": "alice"}).status_code == 200


def test_a_key_with_policy_admin_still_needs_an_acting_user_who_may(demo):
    """The key scope is a second check, not a replacement for the user's permission."""
    admin_key = create_api_key("acme", "admin", scopes=["policy:admin", "policy:read"]).secret
    response = ApiClient(Client(), admin_key).get("/api/v1/policies", **{"X-Harness-User": "bob"})
    assert response.status_code == 403
    assert error(response)["code"] == "permission_denied"


def test_an_expired_key_is_401_api_key_expired(demo):
    secret = create_api_key("acme", "old", expires_at=timezone.now() - timedelta(seconds=1)).secret
    response = ApiClient(Client(), secret).get("/api/v1/runs")
    assert response.status_code == 401
    assert error(response)["code"] == "api_key_expired"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("offset", "live"),
    [(timedelta(microseconds=-1), True), (timedelta(0), False), (timedelta(days=1), False)],
)
def test_a_key_authenticates_until_the_instant_it_expires(offset, live):
    from harness.models import Tenant

    Tenant.objects.create(slug="acme", name="Acme")
    expires = timezone.now() + timedelta(hours=1)
    issued = create_api_key("acme", "edge", expires_at=expires)
    if live:
        assert authenticate_api_key(issued.secret, now=expires + offset) == issued.api_key
    else:
        with pytest.raises(ApiKeyExpired):
            authenticate_api_key(issued.secret, now=expires + offset)


def test_a_rotated_key_works_for_its_grace_period_and_not_after(demo):
    first = create_api_key("acme", "svc", scopes=["runs:read"], owner="payments@acme")
    second = rotate_api_key("acme", "svc", timedelta(hours=2))
    old = ApiKey.objects.get(pk=first.api_key.pk)
    assert old.replaced_by_id == second.api_key.pk
    assert (second.api_key.scopes, second.api_key.owner) == (["runs:read"], "payments@acme")
    # Within the grace period both keys work.
    for secret in (first.secret, second.secret):
        assert ApiClient(Client(), secret).get("/api/v1/runs").status_code == 200
    after = old.expires_at + timedelta(microseconds=1)
    with pytest.raises(ApiKeyExpired):
        authenticate_api_key(first.secret, now=after)
    assert authenticate_api_key(second.secret, now=after) == second.api_key
    # Once the grace period is over, over HTTP too.
    ApiKey.objects.filter(pk=old.pk).update(expires_at=timezone.now())
    response = ApiClient(Client(), first.secret).get("/api/v1/runs")
    assert (response.status_code, error(response)["code"]) == (401, "api_key_expired")


def test_rotate_api_key_command_prints_the_new_key_and_keeps_the_old_one_for_the_grace(demo):
    old = create_api_key("acme", "cli", scopes=["runs:create", "runs:read"]).secret
    out = io.StringIO()
    call_command(
        "rotate_api_key", "--tenant", "acme", "--name", "cli", "--grace-hours", "1", stdout=out
    )
    new = out.getvalue().strip()
    assert authenticate_api_key(new).scopes == ["runs:create", "runs:read"]
    assert authenticate_api_key(old) is not None
    with pytest.raises(CommandError, match="no live API key named 'nope'"):
        call_command("rotate_api_key", "--tenant", "acme", "--name", "nope", stdout=io.StringIO())


def test_create_api_key_command_takes_scopes_owner_and_expiry_and_refuses_unknown_scopes(demo):
    out = io.StringIO()
    call_command(
        "create_api_key", "--tenant", "acme", "--name", "ci", "--scope", "runs:read,reports:read",
        "--owner", "ci@acme", "--expires-in-days", "30", stdout=out,
    )  # fmt: skip
    key = authenticate_api_key(out.getvalue().strip())
    assert (key.scopes, key.owner) == (["reports:read", "runs:read"], "ci@acme")
    assert timedelta(days=29) < key.expires_at - timezone.now() <= timedelta(days=30)
    with pytest.raises(CommandError, match=r"Unknown API key scope.*runs:write"):
        call_command("create_api_key", "--tenant", "acme", "--scope", "runs:write")
    assert not ApiKey.objects.filter(name="default").exists()


def test_the_schema_documents_the_403_and_the_scope_of_every_operation(client):
    import yaml

    schema = yaml.safe_load(client.get("/api/v1/schema").content)
    for method, path, needed in ENDPOINTS:
        template = resolve(path).route
        documented = "/" + template.replace("<str:", "{").replace(">", "}")
        operation = schema["paths"][documented][method]
        assert operation["x-required-key-scope"] == needed, (method, path)
        assert "key_scope_missing" in operation["responses"]["403"]["description"]
        assert f"`{needed}`" in operation["description"]
