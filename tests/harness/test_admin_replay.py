"""Replay and the policy-change preview in the admin console (the browser test drives them
too; these check the rules the browser cannot see)."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from harness.models import Run, StaffTenantGrant, Tenant
from policy.models import PolicyChange, TenantPolicyVersion

DEMO = {"agent": "ticket-assistant", "user": "bob", "input": "Why T-20250318-007?"}


@pytest.fixture
def operator(demo) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    return client


def test_replay_shows_no_divergence_for_an_unchanged_system(acme, operator):
    acme.post("/api/v1/runs", DEMO)
    run = Run.objects.get()

    page = operator.get(f"/admin/harness/run/{run.pk}/replay/").content.decode()

    assert "No divergence" in page
    assert page.count('class="replay-call"') == 3


def test_a_staff_user_cannot_replay_another_tenants_run(acme, demo):
    acme.post("/api/v1/runs", DEMO)
    run = Run.objects.get()
    staff = get_user_model().objects.create_user("globex-staff", password="x", is_staff=True)
    StaffTenantGrant.objects.create(user=staff, tenant=Tenant.objects.get(slug="globex"))
    client = Client()
    client.force_login(staff)

    response = client.get(f"/admin/harness/run/{run.pk}/replay/")

    assert response.status_code in {302, 403, 404}
    assert b"replay-report" not in response.content


def test_the_preview_saves_nothing_until_asked_and_then_records_the_edit(acme, operator):
    acme.post("/api/v1/runs", DEMO)
    version = TenantPolicyVersion.objects.get(tenant="acme").version
    form = {
        "tenant": Tenant.objects.get(slug="acme").pk,
        "op": "add",
        "subject": "bob",
        "scope": "ticket:write",
        "effect": "deny",
        "limit": 5,
    }

    preview = operator.post("/admin/harness/run/preview-policy/", form | {"preview": "1"})

    assert preview.status_code == 200
    assert preview.content.decode().count('class="what-if-change"') == 1
    assert TenantPolicyVersion.objects.get(tenant="acme").version == version
    saved = operator.post("/admin/harness/run/preview-policy/", form | {"save": "1"})
    assert saved.status_code == 302
    change = PolicyChange.objects.order_by("-id").first()
    assert change.actor == "admin"
    assert TenantPolicyVersion.objects.get(tenant="acme").version == version + 1


def test_a_malformed_proposed_change_is_named_in_the_form(acme, operator):
    form = {
        "tenant": Tenant.objects.get(slug="acme").pk,
        "op": "add",
        "subject": "bob",
        "scope": "not a scope",
        "effect": "deny",
        "limit": 5,
        "preview": "1",
    }

    response = operator.post("/admin/harness/run/preview-policy/", form)

    assert response.status_code == 200
    assert "not of the form object:action" in response.content.decode()
