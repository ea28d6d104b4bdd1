"""Policy in the admin: Casbin lines, chain and call rules, tenant limits, approvals, the
budget ledger and the audit of edits. Every edit goes through the services, so it is
validated, versioned and audited exactly like an API edit (actor ``admin:<username>``)."""

from __future__ import annotations

from typing import Any

from casbin_adapter.models import CasbinRule
from django import forms
from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from core.admin import ReadOnlyAdmin
from policy import acl, rules
from policy.approvals import decide_approval
from policy.errors import PolicyError
from policy.models import (
    ApprovalStatus,
    BudgetAlert,
    BudgetLedger,
    PolicyChange,
    PolicyRule,
    TenantLimits,
    TenantPolicyVersion,
    ToolApproval,
)


def _actor(request: HttpRequest) -> str:
    return f"admin:{request.user.get_username()}"


@admin.register(TenantPolicyVersion)
class TenantPolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ["tenant", "version", "updated_at"]


@admin.register(PolicyChange)
class PolicyChangeAdmin(ReadOnlyAdmin):
    list_display = ["version", "tenant", "action", "rule", "actor", "when", "before", "after"]
    list_filter = ["tenant", "action"]
    search_fields = ["actor", "tenant"]

    @admin.display(description="when (UTC)", ordering="created_at")
    def when(self, change: PolicyChange) -> str:
        return change.created_at.isoformat(timespec="microseconds")


class CasbinRuleForm(forms.ModelForm):
    class Meta:
        model = CasbinRule
        fields = ["ptype", "v0", "v1", "v2", "v3", "v4"]
        labels = {
            "ptype": "Type (p = permission, g = role)",
            "v0": "Subject (p): a user, or role:<name> / user (g)",
            "v1": "Tenant (p) / role (g), e.g. member (stored as role:member)",
            "v2": "Object (p) / tenant (g)",
            "v3": "Action (p)",
            "v4": "Effect (p): allow or deny",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("v3", "v4"):
            self.fields[name].required = False


@admin.register(CasbinRule)
class CasbinRuleAdmin(admin.ModelAdmin):
    form = CasbinRuleForm
    list_display = ["ptype", "v0", "v1", "v2", "v3", "v4"]
    list_filter = ["ptype"]
    search_fields = ["v0", "v1", "v2"]
    actions = None  # bulk delete would bypass the audit

    # The console scopes pages by tenant; a line names its tenant in v1 (p) or v2 (g).
    @staticmethod
    def tenant_q(slugs: list[str]) -> Q:
        return Q(ptype="p", v1__in=slugs) | Q(ptype__startswith="g", v2__in=slugs)

    @staticmethod
    def tenant_of(data: dict[str, Any]) -> str:
        return str(data.get("v1") if data.get("ptype") == "p" else data.get("v2"))

    def save_model(self, request: HttpRequest, obj: CasbinRule, form: Any, change: bool) -> None:
        values = [obj.v0, obj.v1, obj.v2, obj.v3, obj.v4]
        try:
            acl.save_line(obj.pk if change else None, obj.ptype, values, _actor(request))
        except PolicyError as exc:
            messages.error(request, exc.message)

    def delete_model(self, request: HttpRequest, obj: CasbinRule) -> None:
        acl.delete_line(obj.pk, _actor(request))


class PolicyRuleForm(forms.ModelForm):
    class Meta:
        model = PolicyRule
        fields = ["tenant", "name", *rules.RULE_FIELDS]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        try:
            rules.validate_rule(data)
        except PolicyError as exc:
            raise forms.ValidationError(exc.message) from exc
        return data


@admin.register(PolicyRule)
class PolicyRuleAdmin(admin.ModelAdmin):
    form = PolicyRuleForm
    list_display = ["tenant", "name", "kind", "effect", "label", "sink", "tool", "enabled"]
    list_filter = ["tenant", "kind", "effect", "enabled"]
    actions = None

    def get_readonly_fields(self, request: HttpRequest, obj: PolicyRule | None = None) -> list:
        return ["tenant", "name"] if obj else []

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> Any:
        # "0 policy rules" must not read as "no rule applies": the built-in ones always do.
        extra = {"built_in_rules": rules.DEFAULT_RULES, **(extra_context or {})}
        return super().changelist_view(request, extra)

    def save_model(self, request: HttpRequest, obj: PolicyRule, form: Any, change: bool) -> None:
        data = {key: form.cleaned_data.get(key) for key in rules.RULE_FIELDS} | {"name": obj.name}
        if change:
            rules.update_rule(obj.tenant, obj.name, data, _actor(request))
        else:
            rules.create_rule(obj.tenant, data, _actor(request))

    def delete_model(self, request: HttpRequest, obj: PolicyRule) -> None:
        rules.delete_rule(obj.tenant, obj.name, _actor(request))


@admin.register(TenantLimits)
class TenantLimitsAdmin(admin.ModelAdmin):
    list_display = [
        "tenant",
        "runs_per_second",
        "max_concurrent_runs",
        "model_calls_per_minute",
        "daily_tokens",
        "daily_cost_usd",
        "alert_thresholds",
        "updated_at",
    ]

    def save_model(self, request: HttpRequest, obj: TenantLimits, form: Any, change: bool) -> None:
        before = (
            {k: str(v) for k, v in TenantLimits.objects.filter(pk=obj.pk).values().first().items()}
            if change
            else None
        )
        super().save_model(request, obj, form, change)
        after = {
            k: str(v) for k, v in TenantLimits.objects.filter(pk=obj.pk).values().first().items()
        }
        acl.record_change(
            obj.tenant,
            _actor(request),
            "update" if change else "add",
            ["limits", obj.tenant],
            before,
            after,
        )


@admin.register(ToolApproval)
class ToolApprovalAdmin(admin.ModelAdmin):
    list_display = [
        "tool",
        "call_id",
        "run_id",
        "tenant",
        "user_id",
        "status",
        "rule",
        "round",
        "expires_at",
        "decided_by",
    ]
    list_filter = ["status", "tenant", "tool"]
    readonly_fields = [f.name for f in ToolApproval._meta.fields]
    actions = ["approve", "deny"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.action(
        description="Approve the selected calls (for their exact arguments)",
        permissions=["change"],
    )
    def approve(self, request: HttpRequest, queryset: QuerySet[ToolApproval]) -> None:
        self._decide(request, queryset, approve=True)

    @admin.action(description="Deny the selected calls", permissions=["change"])
    def deny(self, request: HttpRequest, queryset: QuerySet[ToolApproval]) -> None:
        self._decide(request, queryset, approve=False)

    def _decide(self, request: HttpRequest, queryset: QuerySet, approve: bool) -> None:
        """The admin user decides as themselves: they need approval:decide in the tenant."""
        for approval in queryset.filter(status=ApprovalStatus.PENDING):
            try:
                decide_approval(
                    tenant=approval.tenant,
                    run_id=approval.run_id,
                    call_id=approval.call_id,
                    approver=request.user.get_username(),
                    approve=approve,
                    arguments_sha256=approval.arguments_sha256,
                    comment="decided in the admin",
                )
            except PolicyError as exc:
                messages.error(request, f"{approval}: {exc.message}")
            else:
                messages.success(request, f"{approval.tool} ({approval.call_id}) decided.")


@admin.register(BudgetAlert)
class BudgetAlertAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "tenant", "period", "measure", "threshold", "used", "limit"]
    list_filter = ["tenant", "measure", "threshold"]
    search_fields = ["period"]


@admin.register(BudgetLedger)
class BudgetLedgerAdmin(ReadOnlyAdmin):
    list_display = [
        "key",
        "tenant",
        "tokens_used",
        "tokens_reserved",
        "tokens_limit",
        "cost_used_micros",
        "tool_calls_used",
        "model_calls",
        "wall_time_ms",
    ]
    list_filter = ["tenant", "day"]
    search_fields = ["key", "run_id"]
