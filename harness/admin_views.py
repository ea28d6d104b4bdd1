"""Console pages beyond the changelists: a run's replay, and a policy change previewed against
past runs (what-if) before it is saved. Thin: forms and templates around harness.replay and the
policy services."""

from __future__ import annotations

from typing import Any

from casbin_adapter.models import CasbinRule
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse

from harness.console import granted_tenant_slugs
from harness.errors import HarnessError
from harness.models import Run, Tenant
from harness.replay import replay_run, what_if
from policy import services as policy
from policy.errors import PolicyError


def run_replay_view(
    model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str
) -> HttpResponse:
    """Replay the run (dry: no tool, no model, no write) and show where today diverges."""
    run = model_admin.get_object(request, object_id)
    if run is None:
        raise PermissionDenied
    try:
        report = replay_run(run).to_dict()
        error = ""
    except HarnessError as exc:
        report, error = None, exc.message
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Replay of {run.request_id}",
        "run": run,
        "report": report,
        "error": error,
        "opts": Run._meta,
    }
    return TemplateResponse(request, "admin/harness/run/replay.html", context)


class PolicyChangeForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none())
    op = forms.ChoiceField(choices=[("add", "add"), ("remove", "remove")], initial="add")
    subject = forms.CharField(help_text="A user (bob) or a role (role:member).")
    scope = forms.CharField(help_text="object:action, e.g. ticket:write.")
    effect = forms.ChoiceField(choices=[("deny", "deny"), ("allow", "allow")], initial="deny")
    limit = forms.IntegerField(min_value=1, max_value=200, initial=20, help_text="Runs examined.")

    def __init__(self, *args: Any, tenants: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants

    def change(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "op": data["op"],
            "permission": {
                "subject": data["subject"],
                "scope": data["scope"],
                "effect": data["effect"],
            },
        }


def policy_preview_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Propose a permission change; see its before/after lines and the past calls it would
    change; save it only on an explicit second step (recorded with who, when, before, after).

    Previewing needs ``view_run`` (checked by the URL); saving needs what the Casbin lines'
    own admin page needs to add (or delete) a line, else 403."""
    granted = granted_tenant_slugs(request.user)
    tenants = Tenant.objects.all() if granted is None else Tenant.objects.filter(slug__in=granted)
    form = PolicyChangeForm(request.POST or None, tenants=tenants)
    preview: dict[str, Any] | None = None
    if request.method == "POST" and form.is_valid():
        tenant, change = form.cleaned_data["tenant"], form.change()
        try:
            if "save" in request.POST:
                if not may_edit_lines(model_admin.admin_site, request, change["op"]):
                    raise PermissionDenied
                _save(tenant, change, request.user.get_username())
                messages.success(request, f"Saved: {change['op']} {change['permission']}.")
                return redirect(request.path)
            preview = what_if(tenant, [change], form.cleaned_data["limit"])
            preview["diff"] = _diff(tenant, change)
        except PolicyError as exc:
            form.add_error(None, exc.message)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Preview a policy change",
        "form": form,
        "preview": preview,
        "may_save": may_edit_lines(model_admin.admin_site, request, form["op"].value() or "add"),
        "opts": Run._meta,
    }
    return TemplateResponse(request, "admin/harness/policy_preview.html", context)


def may_edit_lines(site: admin.AdminSite, request: HttpRequest, op: str) -> bool:
    """Whether the user may add (``op`` "add") or delete a Casbin line: exactly what the
    Casbin lines' admin page asks."""
    lines_admin = site._registry.get(CasbinRule)
    if lines_admin is None:
        return False
    if op == "add":
        return lines_admin.has_add_permission(request)
    return lines_admin.has_delete_permission(request)


def _diff(tenant: Tenant, change: dict[str, Any]) -> dict[str, list[str]]:
    """The tenant's permission lines before and after the change, as text."""
    before = sorted(_line(p) for p in policy.list_lines(tenant.slug)["permissions"])
    line = _line(change["permission"])
    after = sorted({*before, line}) if change["op"] == "add" else [x for x in before if x != line]
    return {
        "before": before,
        "after": after,
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
    }


def _line(permission: dict[str, str]) -> str:
    return f"{permission['subject']}  {permission['scope']}  {permission['effect']}"


def _save(tenant: Tenant, change: dict[str, Any], actor: str) -> None:
    body = change["permission"]
    edit = policy.add_permission if change["op"] == "add" else policy.remove_permission
    edit(tenant.slug, body["subject"], body["scope"], body["effect"], actor=actor)
