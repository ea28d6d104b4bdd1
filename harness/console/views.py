"""Console pages beyond the changelists: a held call decided from its run's page, a run's
replay, and a policy change previewed against past runs (what-if) before it is saved. Thin:
forms and templates around harness.runs, harness.replay and the policy services."""

from __future__ import annotations

import json
from typing import Any

from casbin_adapter.models import CasbinRule
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from harness.console.permissions import DECIDE_PERMISSION
from harness.console.reads import granted_tenant_slugs
from harness.console.replay_page import answer_view, call_views
from harness.errors import HarnessError
from harness.models import Run, Tenant
from harness.replay import replay_run, what_if
from harness.runs import decide_tool_call
from policy import services as policy
from policy.errors import PolicyError
from policy.models import PolicyRule


class DecisionForm(forms.Form):
    call_id = forms.CharField(max_length=100)
    arguments_sha256 = forms.RegexField(regex=r"^[0-9a-f]{64}$")
    decision = forms.ChoiceField(choices=[("approve", "approve"), ("deny", "deny")])
    comment = forms.CharField(max_length=500, required=False)
    # Approve with edits: a JSON Merge Patch over the held arguments.
    changes = forms.JSONField(required=False)

    def clean_changes(self) -> dict[str, Any] | None:
        changes = self.cleaned_data.get("changes")
        if changes in (None, "", {}):
            return None
        if not isinstance(changes, dict):
            raise forms.ValidationError('A JSON object of the fields to change, e.g. {"a": 1}.')
        return changes


def decide_call_view(
    model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str
) -> HttpResponse:
    """Approve or deny a held call of the run from its page, recorded exactly as the approvals
    page and the API record it (``decide_tool_call``: the staff user decides as themselves and
    needs ``approval:decide`` in the run's tenant; the decision binds to the arguments' hash
    shown on the page). Needs the admin's approval-change permission and the run's tenant."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    run = model_admin.get_object(request, object_id)  # tenant-scoped: None if not granted
    if run is None or not request.user.has_perm(DECIDE_PERMISSION):
        raise PermissionDenied
    form = DecisionForm(request.POST)
    page = reverse("admin:harness_run_change", args=[run.pk])
    if not form.is_valid():
        messages.error(request, f"Not decided: {form.errors.as_text()}")
        return redirect(page)
    data = form.cleaned_data
    approve = data["decision"] == "approve"
    try:
        decide_tool_call(
            run.tenant,
            str(run.id),
            data["call_id"],
            approver=request.user.get_username(),
            approve=approve,
            arguments_sha256=data["arguments_sha256"],
            comment=data["comment"] or "decided in the admin",
            arguments_patch=data["changes"] if approve else None,
        )
    except (PolicyError, HarnessError) as exc:
        messages.error(request, f"Not decided ({exc.code}): {exc.message}")
    else:
        verb = (
            "Approved with edits"
            if approve and data["changes"]
            else ("Approved" if approve else "Denied")
        )
        messages.success(request, f"{verb} {data['call_id']}: the run resumes on a worker.")
    return redirect(page)


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
    tenant = run.tenant.slug
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Replay of {run.request_id}",
        "run": run,
        "report": report,
        "calls": call_views(tenant, [(run.pk, call) for call in report["calls"]]) if report else [],
        "answer": answer_view(tenant, report["answer"]) if report else None,
        "error": error,
        "opts": Run._meta,
    }
    return TemplateResponse(request, "admin/harness/run/replay.html", context)


TARGETS = [("permission", "a permission"), ("role", "a role assignment"), ("rule", "a rule")]


class PolicyChangeForm(forms.Form):
    """One proposed edit, shaped as the what-if API takes it (docs/replay-reference.md)."""

    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none())
    target = forms.ChoiceField(
        choices=TARGETS, initial="permission", label="Change", required=False
    )
    op = forms.ChoiceField(
        choices=[("add", "add"), ("remove", "remove"), ("update", "update (rules)")],
        initial="add",
    )
    subject = forms.CharField(required=False, help_text="Permission: a user or role, e.g. bob.")
    scope = forms.CharField(
        required=False, help_text="Permission: object:action, e.g. ticket:write."
    )
    effect = forms.ChoiceField(
        choices=[("deny", "deny"), ("allow", "allow")], initial="deny", required=False
    )
    user = forms.CharField(required=False, help_text="Role assignment: the user, e.g. dave.")
    role = forms.CharField(required=False, help_text="Role assignment: the role, e.g. member.")
    rule = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60}),
        help_text='Rule: JSON as the rules API takes it, e.g. {"name": "tickets-stay-put", '
        '"kind": "flow", "label": "customer_content", "sink": "*", "effect": '
        '"require_approval"}; for remove only {"name": …}.',
    )
    limit = forms.IntegerField(min_value=1, max_value=200, initial=20, help_text="Runs examined.")

    def __init__(self, *args: Any, tenants: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        data["target"] = data.get("target") or "permission"
        target, op = data["target"], data.get("op")
        required = {
            "permission": ["subject", "scope", "effect"],
            "role": ["user", "role"],
            "rule": ["rule"],
        }
        for name in required.get(target or "", []):
            if not data.get(name):
                self.add_error(name, f"Required to change {dict(TARGETS)[target]}.")
        if op == "update" and target != "rule":
            self.add_error(
                "op", "Only rules are updated; permissions and roles are added or removed."
            )
        if target == "rule" and data.get("rule"):
            try:
                body = json.loads(data["rule"])
            except json.JSONDecodeError as exc:
                self.add_error("rule", f"Not JSON: {exc.msg} (line {exc.lineno}).")
            else:
                if not isinstance(body, dict):
                    self.add_error("rule", "A JSON object, please.")
                else:
                    data["rule_body"] = body
        return data

    def change(self) -> dict[str, Any]:
        data = self.cleaned_data
        if data["target"] == "permission":
            body = {"subject": data["subject"], "scope": data["scope"], "effect": data["effect"]}
            return {"op": data["op"], "permission": body}
        if data["target"] == "role":
            return {"op": data["op"], "role": {"user": data["user"], "role": data["role"]}}
        return {"op": data["op"], "rule": data["rule_body"]}


def policy_preview_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Propose a change of a permission, a role assignment or a rule; see the policy's lines
    before and after and the past calls it would decide differently; save it only on an
    explicit second step (recorded with who, when, before, after).

    Previewing needs ``view_run`` (checked by the URL); saving needs what the admin page of
    what it edits needs (``may_save``), else 403."""
    granted = granted_tenant_slugs(request.user)
    tenants = Tenant.objects.all() if granted is None else Tenant.objects.filter(slug__in=granted)
    form = PolicyChangeForm(request.POST or None, tenants=tenants)
    preview: dict[str, Any] | None = None
    if request.method == "POST" and form.is_valid():
        tenant, change = form.cleaned_data["tenant"], form.change()
        try:
            if "save" in request.POST:
                if not may_save(model_admin.admin_site, request, change):
                    raise PermissionDenied
                save_change(tenant, change, request.user.get_username())
                messages.success(request, f"Saved: {_describe(change)}.")
                return redirect(request.path)
            preview = preview_change(tenant, change, form.cleaned_data["limit"])
        except PolicyError as exc:
            form.add_error(None, exc.message)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Preview a policy change",
        "form": form,
        "preview": preview,
        "may_save": preview is not None
        and may_save(model_admin.admin_site, request, form.change()),
        "opts": Run._meta,
    }
    return TemplateResponse(request, "admin/harness/policy_preview.html", context)


def may_save(site: admin.AdminSite, request: HttpRequest, change: dict[str, Any]) -> bool:
    """Whether the user may save ``change``: exactly what the admin page of what it edits
    asks — the Casbin lines' page for a permission or a role assignment, the rules' page for
    a rule (adding, changing or deleting)."""
    model = PolicyRule if "rule" in change else CasbinRule
    page = site._registry.get(model)
    if page is None:
        return False
    if change["op"] == "add":
        return page.has_add_permission(request)
    if change["op"] == "update":
        return page.has_change_permission(request)
    return page.has_delete_permission(request)


def preview_change(tenant: Tenant, change: dict[str, Any], limit: int) -> dict[str, Any]:
    """What-if of one policy change over the tenant's recent runs, for the console's pages:
    the policy's lines before and after, and each changed call with its readable verdicts."""
    preview = what_if(tenant, [change], limit)
    preview["diff"] = policy_diff(tenant, change)
    changes = preview["changes"]
    rows = call_views(tenant.slug, [(changed["run_id"], changed) for changed in changes])
    preview["rows"] = list(zip(changes, rows, strict=True))
    return preview


def policy_diff(tenant: Tenant, change: dict[str, Any]) -> list[dict[str, str]]:
    """The tenant's policy (permissions, role assignments, enabled rules) as text lines, before
    and after the change, merged in order: each line ``kept``, ``added`` or ``removed``."""
    before = _policy_lines(policy.policy_snapshot(tenant.slug))
    after = _policy_lines(policy.policy_snapshot(tenant.slug, [change]))
    merged = sorted(set(before) | set(after))
    return [
        {
            "line": line,
            "state": "kept"
            if line in before and line in after
            else ("added" if line in after else "removed"),
        }
        for line in merged
    ]


def _policy_lines(snapshot: Any) -> list[str]:
    lines = []
    for line in snapshot.lines:  # ("p", subject, tenant, obj, act, effect) / ("g", user, role, …)
        values = [*line[1:], "", "", "", "", ""]
        if line[0] == "p":
            lines.append(f"permission  {values[0]}  {values[2]}:{values[3]}  {values[4]}")
        else:  # a role assignment names the role by its name (stored as role:<name>)
            lines.append(f"role        {values[0]}  {policy.role_name(values[1])}")
    for rule in snapshot.rules:
        spec = {k: v for k, v in rule.to_dict().items() if v not in ("", {}, None) and k != "name"}
        spec.pop("enabled", None)
        spec.pop("default", None)
        spec.pop("description", None)
        body = ", ".join(
            f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in spec.items()
        )
        lines.append(f"rule        {rule.name}: {body}")
    return lines


def _describe(change: dict[str, Any]) -> str:
    target = next(key for key in ("permission", "role", "rule") if key in change)
    return f"{change['op']} {target} {json.dumps(change[target], ensure_ascii=False)}"


def save_change(tenant: Tenant, change: dict[str, Any], actor: str) -> None:
    """Save one edit through the policy services (validated, versioned, audited)."""
    op = change["op"]
    if "permission" in change:
        body = change["permission"]
        edit = policy.add_permission if op == "add" else policy.remove_permission
        edit(tenant.slug, body["subject"], body["scope"], body["effect"], actor=actor)
    elif "role" in change:
        body = change["role"]
        edit = policy.assign_role if op == "add" else policy.unassign_role
        edit(tenant.slug, body["user"], body["role"], actor=actor)
    elif op == "add":
        policy.create_rule(tenant.slug, change["rule"], actor)
    elif op == "update":
        body = dict(change["rule"])
        policy.update_rule(tenant.slug, str(body.pop("name", "")), body, actor)
    else:
        policy.delete_rule(tenant.slug, str(change["rule"].get("name", "")), actor)


def run_state_view(model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str) -> Any:
    """What a run's open page watches to know it changed: its status, steps, outcome and
    the calls held (tenant-scoped like the page)."""
    run = model_admin.get_object(request, object_id)
    if run is None:
        raise PermissionDenied
    return JsonResponse(
        {
            "status": run.status,
            "outcome": run.outcome,
            "steps": run.steps,
            "updated_at": run.updated_at.isoformat(),
        }
    )
