"""The console's Policy pages: the rules in effect for a tenant (the built-in ones included),
the editor (a structured form beside the raw change, previewed over recent runs, then saved)
and the change log. Thin: reads from the policy services, edits through
``harness.console.policy_editor`` and the same save as the older preview page."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.http import urlencode

from harness.console.policy_editor import (
    FIELDS_OF,
    PolicyEditForm,
    change_of,
    form_data_of,
    holds_policy_admin,
    refusal_of,
    refusals_of,
    rule_change,
)
from harness.console.reads import granted_tenant_slugs
from harness.console.views import may_save, preview_change, save_change
from harness.models import Tenant
from policy import services as policy
from policy.errors import PolicyError
from policy.models import PolicyChange, PolicyRule

CHANGES_SHOWN = 50


@dataclass(frozen=True)
class BuiltInRule:
    rule: Any  # a RuleSpec with default=True
    override: str  # how a tenant gets round it, if at all


@dataclass(frozen=True)
class EffectivePolicy:
    """What decides a tenant's calls, as of ``version``."""

    tenant: str
    version: int
    built_in: list[BuiltInRule]
    call_rules: list[Any]
    chain_rules: list[Any]
    permissions: list[dict[str, str]]
    roles: list[dict[str, str]]
    changes: list[PolicyChange]


def effective_policy(tenant: str) -> EffectivePolicy:
    """The tenant's policy as the engine applies it: the built-in rules (every tenant, first),
    the tenant's own call and chain rules (disabled ones too, marked), its ACL lines, and its
    last policy edits. Reads only."""
    rules = policy.list_rules(tenant)
    lines = policy.list_lines(tenant)
    own = [rule for rule in rules if not rule.default]
    return EffectivePolicy(
        tenant=tenant,
        version=lines["policy_version"],
        built_in=[BuiltInRule(rule, how_to_override(rule)) for rule in rules if rule.default],
        call_rules=[rule for rule in own if rule.kind == "call"],
        chain_rules=[rule for rule in own if rule.kind != "call"],
        permissions=lines["permissions"],
        roles=lines["roles"],
        changes=policy.list_changes(tenant, CHANGES_SHOWN),
    )


def how_to_override(rule: Any) -> str:
    """What a tenant can do about a built-in rule: it cannot be edited or switched off (a
    tenant's rules only add to the built-in ones); the tool files decide whom it reaches."""
    if rule.kind == "call" and rule.effect == "require_approval":
        return (
            f"Cannot be edited or switched off. It holds {rule.tool} calls unless that tool's "
            'file says "approval": "never"; add a call rule with effect refuse to be stricter.'
        )
    if rule.kind == "flow":
        return (
            "Cannot be edited or switched off. It reaches the tools whose files declare "
            f'"{rule.label}" in labels.carries and "{rule.sink}" as labels.sink: change those '
            "files to change whom it reaches; add a chain rule to be stricter."
        )
    return "Cannot be edited or switched off; a tenant's rules only add to it."


def change_time(change: PolicyChange) -> str:
    return change.created_at.isoformat(timespec="microseconds")


# --- views -------------------------------------------------------------------------------------


def policy_urls(site: admin.AdminSite) -> list[Any]:
    """The Policy pages, behind the admin's login and the rules page's view permission."""

    def guarded(view: Any) -> Any:
        def checked(request: HttpRequest) -> HttpResponse:
            page = site._registry.get(PolicyRule)
            if page is None or not page.has_view_permission(request):
                raise PermissionDenied
            return view(site, request)

        return site.admin_view(checked)

    return [
        path("policy/effective/", guarded(policies_view), name="policy_effective"),
        path("policy/editor/", guarded(policy_editor_view), name="policy_editor"),
    ]


def policy_page_entries() -> list[dict[str, Any]]:
    """The Policy pages as entries of the admin's list of models (its Policy section)."""
    return [
        {"name": name, "object_name": name, "admin_url": reverse(url), "view_only": True}
        for name, url in [
            ("Rules in effect and change log", "admin:policy_effective"),
            ("Policy editor", "admin:policy_editor"),
        ]
    ]


def _tenants(request: HttpRequest) -> list[Tenant]:
    granted = granted_tenant_slugs(request.user)
    tenants = Tenant.objects.order_by("slug")
    return list(tenants if granted is None else tenants.filter(slug__in=sorted(granted)))


def _pick_tenant(request: HttpRequest, slug: str) -> Tenant:
    tenants = _tenants(request)
    if not tenants:
        raise PermissionDenied
    for tenant in tenants:
        if tenant.slug == slug:
            return tenant
    if slug:
        raise PermissionDenied  # not granted (or no such tenant): the same answer
    return tenants[0]


def policies_view(site: admin.AdminSite, request: HttpRequest) -> HttpResponse:
    """The rules in effect for one granted tenant, and its change log."""
    tenant = _pick_tenant(request, request.GET.get("tenant", ""))
    effective = effective_policy(tenant.slug)
    context = {
        **site.each_context(request),
        "title": f"Policy of {tenant.slug}",
        "tenant": tenant,
        "tenants": _tenants(request),
        "policy": effective,
        "changes": [(change, change_time(change)) for change in effective.changes],
        "editor": reverse("admin:policy_editor"),
        "opts": PolicyRule._meta,
    }
    return TemplateResponse(request, "admin/harness/policies.html", context)


def policy_editor_view(site: admin.AdminSite, request: HttpRequest) -> HttpResponse:
    """Propose one edit with the structured form (or as raw JSON), preview it over the
    tenant's recent runs, and save it. Saving needs the admin permission of what it edits
    and, for the staff user as themselves, ``policy:admin`` in the tenant's policy."""
    source = request.POST if request.method == "POST" else request.GET
    tenant = _pick_tenant(request, source.get("tenant", ""))
    form = PolicyEditForm(request.POST) if request.method == "POST" else _opened(tenant, source)
    change, preview, raw_error = None, None, ""
    if request.method == "POST" and form.is_valid():
        change, raw_error = _proposed(request, form)
        limit = form.cleaned_data.get("limit") or 20
        errors = {} if raw_error else refusals_of(tenant.slug, change, limit)
        for field, message in errors.items():
            form.add_error(None if field == "__all__" else field, message)
        if not errors and not raw_error:
            try:
                if "save" in request.POST:
                    return _save(site, request, tenant, change)
                preview = preview_change(tenant, change, limit)
            except PolicyError as exc:
                for field, message in refusal_of(exc, change).items():
                    form.add_error(None if field == "__all__" else field, message)
    if change is None and form.is_bound and form.is_valid():
        change = change_of(form.cleaned_data)
    context = {
        **site.each_context(request),
        "title": "Edit the policy",
        "tenant": tenant,
        "tenants": _tenants(request),
        "form": form,
        "fields_of": json.dumps(FIELDS_OF),
        "raw": request.POST.get("raw", "") if raw_error else _raw(change),
        "raw_error": raw_error,
        "preview": preview,
        "may_save": preview is not None and _may_save(site, request, tenant, change),
        "opts": PolicyRule._meta,
    }
    return TemplateResponse(request, "admin/harness/policy_editor.html", context)


def _opened(tenant: Tenant, query: Any) -> PolicyEditForm:
    """The form opened on a stored rule (``?rule=<name>``), or empty for a new edit."""
    initial: dict[str, Any] = {"kind": query.get("kind", "call"), "op": "add", "enabled": True}
    name = query.get("rule", "")
    if name:
        # A rule removed since the link was drawn: the form opens empty, for a new edit.
        with contextlib.suppress(PolicyError):
            initial |= form_data_of(rule_change(policy.get_rule(tenant.slug, name)))
    return PolicyEditForm(initial=initial)


def _proposed(request: HttpRequest, form: PolicyEditForm) -> tuple[dict[str, Any], str]:
    """The change the form describes, or the raw JSON when that was sent ("Use the JSON")."""
    if "use_raw" not in request.POST:
        return change_of(form.cleaned_data), ""
    try:
        change = json.loads(request.POST.get("raw", ""))
    except json.JSONDecodeError as exc:
        return {}, f"Not JSON: {exc.msg} (line {exc.lineno})."
    if not isinstance(change, dict):
        return {}, 'A JSON object, e.g. {"op": "add", "rule": {…}}.'
    try:  # show it in the form as well, when it has a shape the form knows
        shown = form.data.copy()
        shown.pop("enabled", None)  # a checkbox is sent only when ticked
        for key, value in form_data_of(change).items():
            if key != "enabled" or value is True:
                shown[key] = "on" if value is True else str(value)
        form.data = shown
    except (KeyError, TypeError):
        pass
    return change, ""


def _raw(change: dict[str, Any] | None) -> str:
    return json.dumps(change, indent=2, ensure_ascii=False) if change else ""


def _may_save(
    site: admin.AdminSite, request: HttpRequest, tenant: Tenant, change: dict[str, Any] | None
) -> bool:
    return bool(change) and (
        may_save(site, request, change)
        and holds_policy_admin(tenant.slug, request.user.get_username())
    )


def _save(
    site: admin.AdminSite, request: HttpRequest, tenant: Tenant, change: dict[str, Any]
) -> HttpResponse:
    if not _may_save(site, request, tenant, change):
        raise PermissionDenied
    save_change(tenant, change, f"admin:{request.user.get_username()}")
    messages.success(request, "Saved: it is the newest entry of the change log below.")
    page = reverse("admin:policy_effective")
    return redirect(f"{page}?{urlencode({'tenant': tenant.slug})}#change-log")
