"""Finding 8 (policy_version): one global counter made every tenant's edit invalidate every
tenant's caches, and leaked how often other tenants edit. Versions are per tenant; decisions,
rule sets and what-if snapshots are keyed by (tenant, version)."""

from __future__ import annotations

from policy import services as policy
from policy.models import TenantPolicyVersion
from policy.rules import rules_for
from policy.snapshot import policy_snapshot

ADMIN = {"X-Harness-User": "alice"}


def test_an_edit_bumps_only_its_own_tenants_version(acme, globex):
    acme_before = acme.get("/api/v1/policies", **ADMIN).json()["policy_version"]
    globex_before = policy.current_version("globex")

    edited = acme.post(
        "/api/v1/policies/permissions", {"subject": "dave", "scope": "customer:read"}, **ADMIN
    )

    assert edited.json()["policy_version"] == acme_before + 1
    assert policy.current_version("acme") == acme_before + 1
    assert policy.current_version("globex") == globex_before
    assert policy.decide("globex", "charlie", "ticket:read").version == globex_before
    assert policy.decide("acme", "dave", "customer:read").version == acme_before + 1
    assert policy_snapshot("globex").version == globex_before
    assert set(TenantPolicyVersion.objects.values_list("tenant", flat=True)) >= {"acme", "globex"}


def test_a_tenants_cached_decision_and_rules_follow_only_its_own_edits(acme, globex):
    assert policy.decide("acme", "dave", "customer:read").allowed is False
    globex_key = (policy.current_version("globex"),)
    globex_rules = rules_for("globex", (globex_key[0], _stamp("globex")))

    policy.add_permission("acme", "dave", "customer:read", "allow", actor="test")

    assert policy.decide("acme", "dave", "customer:read").allowed is True
    # globex's cache entry is still the one in use: the acme edit did not touch it
    assert rules_for("globex", (globex_key[0], _stamp("globex"))) is globex_rules


def _stamp(tenant: str) -> str:
    return TenantPolicyVersion.objects.get(tenant=tenant).stamp
