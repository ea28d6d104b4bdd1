"""Finding 1: a staff user with only ``view_run`` and a tenant grant added Casbin lines
through *Runs → Preview a policy change → Save*, and view-only staff could *Redeliver*
webhooks. Every admin class is now tenant-scoped and permission-checked by default (the site
imposes it; a system check fails otherwise), every action names its permission, and the
preview's save needs the Casbin lines' own edit permission."""

from __future__ import annotations

from casbin_adapter.models import CasbinRule
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client, RequestFactory

from harness.models import Run, StaffTenantGrant, Tenant, WebhookDelivery
from policy.models import PolicyChange
from tools.demo.models import Ticket

PREVIEW = "/admin/harness/run/preview-policy/"


def staff(username: str, *codenames: str, tenants: tuple[str, ...] = ("acme",)):
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    for slug in tenants:
        StaffTenantGrant.objects.create(user=user, tenant=Tenant.objects.get(slug=slug))
    client = Client()
    client.force_login(user)
    return user, client


def proposal(**extra: str) -> dict:
    return {
        "tenant": Tenant.objects.get(slug="acme").pk,
        "op": "add",
        "subject": "mallory",
        "scope": "policy:admin",
        "effect": "allow",
        "limit": 5,
    } | extra


def test_a_view_only_staff_user_may_preview_but_not_save_a_policy_change(demo):
    _, viewer = staff("viewer", "view_run")
    lines, changes = CasbinRule.objects.count(), PolicyChange.objects.count()

    preview = viewer.post(PREVIEW, proposal(preview="1"))
    saved = viewer.post(PREVIEW, proposal(save="1"))

    assert preview.status_code == 200
    assert 'name="save"' not in preview.content.decode()
    assert saved.status_code == 403
    assert CasbinRule.objects.count() == lines
    assert PolicyChange.objects.count() == changes
    assert not CasbinRule.objects.filter(v0="mallory").exists()


def test_saving_needs_what_the_casbin_page_needs(demo):
    _, editor = staff("editor", "view_run", "add_casbinrule", "view_casbinrule")

    preview = editor.post(PREVIEW, proposal(preview="1"))
    saved = editor.post(PREVIEW, proposal(save="1"))

    assert 'name="save"' in preview.content.decode()
    assert saved.status_code == 302
    assert CasbinRule.objects.filter(v0="mallory", v1="acme").exists()
    _, nobody = staff("nobody", tenants=("acme",))
    assert nobody.post(PREVIEW, proposal(preview="1")).status_code == 403


def test_view_only_staff_cannot_redeliver_a_webhook(acme):
    acme.post("/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "hello"})
    run = Run.objects.get()
    delivery = WebhookDelivery.objects.create(
        run=run,
        event_type="run.succeeded",
        url="https://example.com/hook",
        payload={},
        status="failed",
        next_attempt_at=None,
    )
    _, viewer = staff("viewer", "view_webhookdelivery")

    response = viewer.post(
        "/admin/harness/webhookdelivery/",
        {"action": "redeliver_selected", "_selected_action": [str(delivery.pk)]},
    )

    assert response.status_code in (200, 302)
    delivery.refresh_from_db()
    assert delivery.status == "failed"
    assert delivery.next_attempt_at is None


def test_every_registered_admin_is_scoped_and_every_action_names_its_permission():
    from harness.console.site import TenantScopedAdmin, check_every_admin_is_scoped

    for model, model_admin in admin.site._registry.items():
        assert isinstance(model_admin, TenantScopedAdmin), model._meta.label
        assert [e.id for e in model_admin.check() if e.id.startswith("harness.")] == [], model
    assert check_every_admin_is_scoped() == []


def test_a_page_put_into_the_registry_unscoped_fails_the_system_check():
    from harness.console.site import check_every_admin_is_scoped

    class Leaky(admin.ModelAdmin):
        pass

    admin.site._registry[Ticket] = Leaky(Ticket, admin.site)
    try:
        errors = check_every_admin_is_scoped()
    finally:
        admin.site.unregister(Ticket)
        admin.site.register(Ticket)
    assert [error.id for error in errors] == ["harness.E100"]


def test_an_action_without_permissions_fails_the_check_and_is_not_offered(demo):
    from harness.console.site import HarnessAdminSite

    class Careless(admin.ModelAdmin):
        actions = ["wipe"]

        @admin.action(description="Wipe")
        def wipe(self, request, queryset):
            queryset.delete()

    site = HarnessAdminSite(name="careless")
    site.register(Ticket, Careless)
    model_admin = site._registry[Ticket]
    request = RequestFactory().get("/")
    request.user = get_user_model().objects.get(username="admin")

    assert [e.id for e in model_admin.check()] == ["harness.E101"]
    assert "wipe" not in model_admin.get_actions(request)


def test_a_new_model_registered_plainly_is_scoped_by_default(demo):
    from harness.console.site import HarnessAdminSite

    site = HarnessAdminSite(name="plain")
    site.register(Ticket)  # no scoping declared anywhere
    user, _ = staff("acme-staff", "view_ticket")
    request = RequestFactory().get("/")
    request.user = user

    visible = site._registry[Ticket].get_queryset(request)

    assert visible.exists()
    assert set(visible.values_list("tenant", flat=True)) == {"acme"}


def test_no_row_is_visible_to_staff_of_two_tenants_and_global_pages_are_superuser_only(acme):
    acme.post(
        "/api/v1/runs", {"agent": "ticket-assistant", "user": "bob", "input": "T-20250318-007"}
    )
    everything = Permission.objects.filter(codename__startswith="view_")
    acme_staff, _ = staff("acme-staff", tenants=("acme",))
    globex_staff, _ = staff("globex-staff", tenants=("globex",))
    for user in (acme_staff, globex_staff):
        user.user_permissions.set(everything)
    factory = RequestFactory()

    def visible(model_admin, user):
        request = factory.get("/")
        request.user = get_user_model().objects.get(pk=user.pk)  # fresh permission cache
        if not model_admin.has_module_permission(request):
            return None
        return set(model_admin.get_queryset(request).values_list("pk", flat=True))

    for model, model_admin in admin.site._registry.items():
        seen_by_acme = visible(model_admin, acme_staff)
        seen_by_globex = visible(model_admin, globex_staff)
        if model_admin.is_global():
            assert (seen_by_acme, seen_by_globex) == (None, None), model._meta.label
            continue
        if seen_by_acme is None:  # e.g. superuser-only pages such as the grants
            continue
        assert not (seen_by_acme & seen_by_globex), model._meta.label
    assert visible(admin.site._registry[Ticket], acme_staff)  # acme staff do see acme rows
