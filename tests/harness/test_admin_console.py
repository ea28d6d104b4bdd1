"""Staff see only the tenants granted to them; auditors find runs by request id, by
filters and by the fingerprint of an identifier the run touched."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from harness.models import Run, StaffTenantGrant, Tenant, WebhookDelivery
from policy.models import PolicyRule
from tests.runs import scripted_agent, start
from traces.models import AuditRecord, Span

PHONE = "13812345678"


def staff_client(username: str, *tenants: str, extra: tuple[str, ...] = ()) -> Client:
    """A staff user who may view everything, granted ``tenants``."""
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    codenames = Permission.objects.filter(codename__startswith="view_")
    user.user_permissions.set([*codenames, *Permission.objects.filter(codename__in=extra)])
    for slug in tenants:
        StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug=slug))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def runs(acme, globex) -> dict[str, Run]:
    """One demo run in each tenant, both mentioning the same phone number."""
    text = f"Why T-20250318-007? Call me on {PHONE}."
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": text})
    globex.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "charlie", "input": text})
    return {run.tenant.slug: run for run in Run.objects.select_related("tenant")}


def test_staff_of_acme_cannot_open_a_globex_run_nor_see_it_listed(runs):
    acme_staff = staff_client("auditor", "acme")

    listing = acme_staff.get("/admin/harness/run/").content.decode()
    own = acme_staff.get(f"/admin/harness/run/{runs['acme'].pk}/change/")
    other = acme_staff.get(f"/admin/harness/run/{runs['globex'].pk}/change/")

    assert runs["acme"].request_id in listing
    assert runs["globex"].request_id not in listing
    assert own.status_code == 200
    assert other.status_code == 302  # the admin's "does not exist" redirect
    assert other["Location"] == "/admin/"


def test_a_staff_user_without_grants_sees_no_run(runs):
    nobody = staff_client("newcomer")

    listing = nobody.get("/admin/harness/run/").content.decode()

    assert "0 runs" in listing
    assert runs["acme"].request_id not in listing
    assert nobody.get(f"/admin/harness/run/{runs['acme'].pk}/change/").status_code == 302


def test_a_superuser_sees_every_tenant(runs):
    admin = Client()
    admin.force_login(get_user_model().objects.get(username="admin"))

    listing = admin.get("/admin/harness/run/").content.decode()

    assert runs["acme"].request_id in listing
    assert runs["globex"].request_id in listing


@pytest.mark.parametrize(
    ("path", "model", "lookup"),
    [
        ("/admin/traces/span/", Span, "request_id"),
        ("/admin/traces/auditrecord/", AuditRecord, "request_id"),
    ],
)
def test_trace_pages_of_another_tenant_are_hidden(runs, path, model, lookup):
    acme_staff = staff_client("auditor", "acme")
    globex_row = model.objects.filter(tenant="globex").first()
    acme_row = model.objects.filter(tenant="acme").first()

    listing = acme_staff.get(path)
    other = acme_staff.get(f"{path}{globex_row.pk}/change/")
    own = acme_staff.get(f"{path}{acme_row.pk}/change/")

    assert listing.status_code == 200
    assert listing.context["cl"].result_count == model.objects.filter(tenant="acme").count()
    assert other.status_code == 302
    assert own.status_code == 200


def test_webhook_deliveries_sessions_and_policy_pages_follow_the_grants(runs):
    delivery = WebhookDelivery.objects.create(
        run=runs["globex"], event_type="run.succeeded", url="http://127.0.0.1:9/", payload={}
    )
    acme_staff = staff_client("auditor", "acme")

    deliveries = acme_staff.get("/admin/harness/webhookdelivery/")
    rules = acme_staff.get("/admin/policy/policyrule/")
    casbin = acme_staff.get("/admin/casbin_adapter/casbinrule/")
    tenants = acme_staff.get("/admin/harness/tenant/")

    assert deliveries.context["cl"].result_count == 0
    assert (
        acme_staff.get(f"/admin/harness/webhookdelivery/{delivery.pk}/change/").status_code == 302
    )
    assert {r.tenant for r in rules.context["cl"].result_list} <= {"acme"}
    lines = casbin.context["cl"].result_list
    assert lines
    assert all((line.v1 if line.ptype == "p" else line.v2) == "acme" for line in lines), (
        "a Casbin line of another tenant is listed"
    )
    assert [t.slug for t in tenants.context["cl"].result_list] == ["acme"]


def test_staff_cannot_add_a_policy_rule_to_a_tenant_they_are_not_granted(demo):
    acme_staff = staff_client("editor", "acme", extra=("add_policyrule",))
    rule = {
        "tenant": "globex",
        "name": "no-mail",
        "kind": "call",
        "effect": "refuse",
        "tool": "send_external_email",
        "match": "{}",
        "description": "",
        "enabled": "on",
    }

    response = acme_staff.post("/admin/policy/policyrule/add/", rule)

    assert response.status_code == 200
    assert "You are not granted this tenant." in response.content.decode()
    assert not PolicyRule.objects.filter(tenant="globex", name="no-mail").exists()


def test_grants_are_edited_by_superusers_only(demo):
    admin = Client()
    admin.force_login(get_user_model().objects.get(username="admin"))
    staff = staff_client("auditor", extra=("add_stafftenantgrant", "change_stafftenantgrant"))
    user = get_user_model().objects.get(username="auditor")
    acme = Tenant.objects.get(slug="acme")

    refused = staff.post(
        "/admin/harness/stafftenantgrant/add/", {"user": user.pk, "tenant": acme.pk}
    )
    granted = admin.post(
        "/admin/harness/stafftenantgrant/add/", {"user": user.pk, "tenant": acme.pk}
    )

    assert refused.status_code == 403
    assert granted.status_code == 302
    assert list(StaffTenantGrant.objects.values_list("user__username", "tenant__slug")) == [
        ("auditor", "acme")
    ]


def test_an_auditor_finds_the_runs_that_touched_a_phone_number_in_granted_tenants(runs):
    acme_staff = staff_client("auditor", "acme")
    admin = Client()
    admin.force_login(get_user_model().objects.get(username="admin"))

    staff_found = acme_staff.get("/admin/harness/run/", {"q": "+86 138 1234 5678"})
    admin_found = admin.get("/admin/harness/run/", {"q": PHONE})
    nothing = admin.get("/admin/harness/run/", {"q": "13900000000"})

    assert [r.request_id for r in staff_found.context["cl"].result_list] == [
        runs["acme"].request_id
    ]
    assert {r.request_id for r in admin_found.context["cl"].result_list} == {
        runs["acme"].request_id,
        runs["globex"].request_id,
    }
    assert nothing.context["cl"].result_count == 0


def test_runs_are_found_by_request_id_and_filtered_by_the_tool_they_used(acme, runs, agent_dir):
    answers_only = scripted_agent(agent_dir, [{"text": "Hello."}])
    start(acme, answers_only, user="bob")
    acme_staff = staff_client("auditor", "acme")
    target = runs["acme"]

    by_id = acme_staff.get("/admin/harness/run/", {"q": target.request_id})
    by_tool = acme_staff.get("/admin/harness/run/", {"tool": "update_ticket"})
    by_user = acme_staff.get("/admin/harness/run/", {"user_id": "bob"})
    every = acme_staff.get("/admin/harness/run/")

    assert [r.request_id for r in by_id.context["cl"].result_list] == [target.request_id]
    assert every.context["cl"].result_count == 2
    assert [r.request_id for r in by_tool.context["cl"].result_list] == [target.request_id]
    assert by_user.context["cl"].result_count == 2
