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


def preview(operator: Client, **fields: object) -> str:
    form = {"tenant": Tenant.objects.get(slug="acme").pk, "limit": 5, "preview": "1"} | fields
    response = operator.post("/admin/harness/run/preview-policy/", form)
    assert response.status_code == 200
    return response.content.decode()


def test_the_preview_diff_is_coloured_and_its_runs_are_linked(acme, operator):
    acme.post("/api/v1/runs", DEMO)
    run = Run.objects.get()

    page = preview(
        operator, target="permission", op="add", subject="bob", scope="ticket:write", effect="deny"
    )

    assert '<span class="diff-line diff-added">+ permission  bob  ticket:write  deny</span>' in page
    assert (
        '<span class="diff-line diff-kept">  permission  role:member  ticket:read  allow</span>'
        in page
    )
    assert (
        f'<a class="run-link" href="/admin/harness/run/{run.pk}/change/">{run.request_id}</a>'
        in (page)
    )


def test_the_preview_covers_taking_a_role_away(acme, operator):
    acme.post("/api/v1/runs", DEMO)

    page = preview(operator, target="role", op="remove", user="bob", role="member")

    assert '<span class="diff-line diff-removed">- role        bob  member</span>' in page
    # Without his role bob may not read the ticket: the run's get_ticket would be refused.
    assert page.count('class="what-if-change"') == 3
    assert "refused (acl)" in page


def test_the_preview_covers_a_call_rule_and_saves_it_on_request(acme, operator):
    acme.post("/api/v1/runs", DEMO)
    rule = (
        '{"name": "assign-needs-a-human", "kind": "call", "tool": "update_ticket", '
        '"match": {"action": "assign"}, "effect": "require_approval"}'
    )

    page = preview(operator, target="rule", op="add", rule=rule)
    saved = operator.post(
        "/admin/harness/run/preview-policy/",
        {"tenant": Tenant.objects.get(slug="acme").pk, "limit": 5, "save": "1"}
        | {"target": "rule", "op": "add", "rule": rule},
    )

    assert 'diff-added">+ rule        assign-needs-a-human: kind=call' in page
    assert page.count('class="what-if-change"') == 1
    assert "needs_approval" in page
    assert saved.status_code == 302
    assert PolicyChange.objects.order_by("-id").first().rule == ["rule", "assign-needs-a-human"]


def test_a_rule_that_is_not_json_is_named_in_the_form(demo, operator):
    page = preview(operator, target="rule", op="add", rule="{nope")

    assert "Not JSON: Expecting property name enclosed in double quotes" in page


def test_only_rules_are_updated(demo, operator):
    page = preview(operator, target="role", op="update", user="bob", role="member")

    assert "Only rules are updated" in page
