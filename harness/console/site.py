"""The admin site every console page is registered on, and the scoping it imposes.

Tenant scoping and permission checks are the default of every admin class, not a list kept
by hand: ``HarnessAdminSite.register`` mixes ``TenantScopedAdmin`` into whatever class an app
registers (apps declare how a row names its tenant, and import nothing from here):

- ``tenant_lookup = "<path to the tenant slug>"`` on the admin class; when absent, a model
  field ``tenant`` is used (``tenant__slug`` for a foreign key to a model with a slug);
- ``tenant_q(slugs) -> Q`` and ``tenant_of(cleaned_data) -> str`` for rows that name their
  tenant in several columns (Casbin lines);
- a model with neither is global: only superusers see its pages.

Staff see only rows of the tenants granted to them (``StaffTenantGrant``; superusers see all),
and a form cannot save a row into another tenant. Every admin action must name its
``allowed_permissions`` (an action without them is hidden and refused, and the system check
``harness.E101`` fails), and custom views are wrapped with ``permission_view``. The system
check ``harness.E100`` fails if a registered admin escaped the scoping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.contrib import admin
from django.core import checks
from django.core.exceptions import FieldDoesNotExist, PermissionDenied, ValidationError
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from harness.console.catalogue_views import catalogue_urls
from harness.console.home import home_context
from harness.console.oidc import provider_logout_url, sso_enabled
from harness.console.policy_pages import policy_page_entries, policy_urls
from harness.console.reads import granted_tenant_slugs

GLOBAL = ""  # tenant_lookup of models that belong to no tenant: superusers only


def infer_tenant_lookup(model: type[Model]) -> str:
    """The path from ``model`` to its tenant's slug, or ``GLOBAL``."""
    try:
        field = model._meta.get_field("tenant")
    except FieldDoesNotExist:
        return GLOBAL
    related = getattr(field, "related_model", None)
    if related is None:
        return "tenant"
    if any(f.name == "slug" for f in related._meta.get_fields()):
        return "tenant__slug"
    return GLOBAL


class TenantScopedAdmin(admin.ModelAdmin):
    """Shows only rows of tenants granted to the staff user, and refuses to save a row into
    a tenant they are not granted. Global models (``tenant_lookup = GLOBAL``) are for
    superusers only. Actions need ``allowed_permissions``."""

    tenant_lookup: str = "tenant__slug"

    # --- rows ---------------------------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(self.tenant_scope(request))

    def tenant_scope(self, request: HttpRequest) -> Q:
        slugs = granted_tenant_slugs(request.user)
        if slugs is None:
            return Q()
        if self.is_global():
            return Q(pk__in=[])
        tenant_q = getattr(self, "tenant_q", None)
        if tenant_q is not None:
            return tenant_q(sorted(slugs))
        return Q(**{f"{self.tenant_lookup}__in": sorted(slugs)})

    def is_global(self) -> bool:
        return self.tenant_lookup == GLOBAL and getattr(self, "tenant_q", None) is None

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, **kwargs)
        slugs = granted_tenant_slugs(request.user)
        if slugs is None:
            return form
        tenant_of = getattr(self, "tenant_of", None) or _tenant_field_of

        class ScopedForm(form):  # type: ignore[misc,valid-type]
            def clean(self) -> dict[str, Any]:
                data = super().clean()
                tenant = tenant_of(data)
                if tenant is not None and str(getattr(tenant, "slug", tenant)) not in slugs:
                    raise ValidationError("You are not granted this tenant.")
                return data

        return ScopedForm

    # --- permissions ----------------------------------------------------------------------

    def _superuser_only(self, request: HttpRequest) -> bool:
        return self.is_global() and not request.user.is_superuser

    def has_module_permission(self, request: HttpRequest) -> bool:
        return not self._superuser_only(request) and super().has_module_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not self._superuser_only(request) and super().has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return not self._superuser_only(request) and super().has_add_permission(request, *args)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not self._superuser_only(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not self._superuser_only(request) and super().has_delete_permission(request, obj)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        """Django keeps an action only if the user has each of its ``allowed_permissions``;
        an action that names none is dropped here (fail closed)."""
        return {
            name: entry
            for name, entry in super().get_actions(request).items()
            if getattr(entry[0], "allowed_permissions", None)
        }

    def permission_view(
        self, view: Callable[..., HttpResponse], *permissions: str
    ) -> Callable[..., HttpResponse]:
        """``view`` behind the admin's login, answering 403 unless the user has each of
        ``permissions`` ("view", "change", …) on this admin's model."""

        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            for permission in permissions:
                if not getattr(self, f"has_{permission}_permission")(request):
                    raise PermissionDenied
            return view(request, *args, **kwargs)

        return self.admin_site.admin_view(checked)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        errors = super().check(**kwargs)
        for action in self.actions or ():
            function = getattr(self, action, None) if isinstance(action, str) else action
            if function is not None and not getattr(function, "allowed_permissions", None):
                errors.append(
                    checks.Error(
                        f"The admin action {getattr(function, '__name__', action)!r} names no "
                        "allowed_permissions: every action must say which permission it needs.",
                        obj=self.__class__,
                        id="harness.E101",
                    )
                )
        return errors


def _tenant_field_of(data: dict[str, Any]) -> Any:
    return data.get("tenant")


def scoped_admin_class(model: type[Model], admin_class: type[admin.ModelAdmin]) -> type:
    """``admin_class`` with the tenant scope mixed in (itself if it is scoped already)."""
    if issubclass(admin_class, TenantScopedAdmin):
        return admin_class
    lookup = getattr(admin_class, "tenant_lookup", None)
    if lookup is None:
        lookup = infer_tenant_lookup(model)
    return type(
        f"Scoped{admin_class.__name__}",
        (TenantScopedAdmin, admin_class),
        {"tenant_lookup": lookup, "__module__": admin_class.__module__},
    )


class HarnessAdminSite(admin.AdminSite):
    """Django's admin site, where every registered class is tenant-scoped."""

    site_header = "Harness console"
    # The header's "View site" link: the API's documentation (the console is the site).
    site_url = "/api/v1/docs"
    index_title = "Dashboard"
    index_template = "admin/harness/dashboard.html"

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        return super().index(request, (extra_context or {}) | home_context(request.user))

    def get_urls(self) -> list[Any]:
        # The catalogue's pages (agents, tools, MCP servers) and the Policy pages (rules in
        # effect, the editor) beside the models' pages.
        return [*catalogue_urls(self), *policy_urls(self), *super().get_urls()]

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[Any]:
        """Django's list of models, with the Policy pages (rules in effect, the editor)
        first in the Policy section."""
        apps = super().get_app_list(request, app_label)
        for app in apps:
            if app["app_label"] == "policy" and any(
                model["object_name"] == "PolicyRule" for model in app["models"]
            ):
                app["models"][:0] = policy_page_entries()
        return apps

    login_template = "admin/harness/login.html"

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        """The sign-in page; with single sign-on on it leads there first."""
        return super().login(request, {**(extra_context or {}), "sso_enabled": sso_enabled()})

    def logout(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        """Ends the console session; after a single sign-on, the provider's session too."""
        id_token = request.session.get("oidc_id_token")
        response = super().logout(request, extra_context)
        if id_token and sso_enabled() and request.method == "POST":
            url = provider_logout_url(request, id_token)
            if url:
                return HttpResponseRedirect(url)
        return response

    def register(
        self,
        model_or_iterable: type[Model] | Iterable[type[Model]],
        admin_class: type[admin.ModelAdmin] | None = None,
        **options: Any,
    ) -> None:
        models = [model_or_iterable] if isinstance(model_or_iterable, type) else model_or_iterable
        for model in models:
            base = admin_class or admin.ModelAdmin
            if options:
                base = type(f"{model.__name__}Admin", (base,), dict(options))
            super().register(model, scoped_admin_class(model, base))


@checks.register(checks.Tags.admin)
def check_every_admin_is_scoped(**kwargs: Any) -> list[checks.CheckMessage]:
    """``harness.E100``: a registered admin that escaped the tenant scope (e.g. put into the
    registry by hand) would show every tenant's rows to every staff user."""
    errors = []
    for model, model_admin in admin.site._registry.items():
        if not isinstance(model_admin, TenantScopedAdmin):
            errors.append(
                checks.Error(
                    f"The admin of {model._meta.label} is not tenant-scoped.",
                    hint="Register it with admin.site.register / @admin.register.",
                    obj=type(model_admin),
                    id="harness.E100",
                )
            )
    return errors
