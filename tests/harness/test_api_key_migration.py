"""Migration 0012 gives every key that existed before scopes exactly the rights it had: every
scope of the API, so no client breaks on upgrade."""

from __future__ import annotations

import hashlib

import pytest
from django.test import Client

from policy.key_scopes import KEY_SCOPES
from tests.conftest import ApiClient
from tests.support.migrations import migrate

BEFORE = [("harness", "0011_siem_cursors_dead_letters_and_security_events")]
SECRET = "hk_0123456789ab_an-old-key-made-before-scopes-existed"


@pytest.fixture
def old_key(transactional_db):
    apps = migrate(BEFORE)
    tenant = apps.get_model("harness", "Tenant").objects.create(slug="acme", name="Acme")
    apps.get_model("harness", "ApiKey").objects.create(
        tenant=tenant,
        name="legacy",
        prefix="0123456789ab",
        key_hash=hashlib.sha256(SECRET.encode()).hexdigest(),
    )
    yield
    migrate(None)


def test_keys_from_before_scopes_get_every_scope_and_keep_working(old_key):
    apps = migrate(None)
    key = apps.get_model("harness", "ApiKey").objects.get(name="legacy")
    assert sorted(key.scopes) == sorted(KEY_SCOPES)
    assert key.expires_at is None
    response = ApiClient(Client(), SECRET).get("/api/v1/runs")
    assert response.status_code == 200, response.content
