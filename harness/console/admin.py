"""The admin console: runs as timelines, fingerprint search, cost reports, and staff who see
only the tenants granted to them (``StaffTenantGrant``; superusers see all).

The tenant scope and the permission checks are not here: ``harness.console.site`` imposes them
on every admin class registered by any app (see there)."""

from __future__ import annotations

from typing import Any

from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import format_html

from core.admin import ReadOnlyAdmin
from harness import webhooks
from harness.console import costs
from harness.console import login as console_login
from harness.console.permissions import DECIDE_PERMISSION
from harness.console.reads import (
    find_runs_touching,
    first_problem,
    format_cost,
    format_duration,
    granted_tenant_slugs,
    held_calls,
    mark_masked,
    outcome_tone,
    run_duration,
    run_problem,
    run_timeline,
    shorten,
    status_tone,
)
from harness.console.site import TenantScopedAdmin
from harness.console.waterfall import build_waterfall
from harness.models import (
    ApiKey,
    CostReport,
    Run,
    RunOutcome,
    RunStatus,
    Session,
    StaffTenantGrant,
    Tenant,
    WebhookAttempt,
    WebhookDelivery,
)
from harness.reports import CostFilter
from traces.queries import get_trace, list_tool_names, request_ids_calling


class StaffTenantGrantAdmin(admin.ModelAdmin):
    """Grants are given and taken by superusers only."""

    list_display = ["user", "tenant", "created_at"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["user__username", "tenant__slug"]
    autocomplete_fields = ["tenant"]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser

    has_add_permission = has_module_permission

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser

    has_delete_permission = has_change_permission


admin.site.register(StaffTenantGrant, StaffTenantGrantAdmin)


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    tenant_lookup = "slug"
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    exclude = ["webhook_secret"]


@admin.register(ApiKey)
class ApiKeyAdmin(TenantScopedAdmin):
    list_display = [
        "name",
        "tenant",
        "owner",
        "prefix",
        "scopes",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter)]
    readonly_fields = [
        "tenant",
        "name",
        "prefix",
        "key_hash",
        "created_at",
        "last_used_at",
        "replaced_by",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # keys are issued by `manage.py create_api_key`, which shows the secret once


class ToolUsedFilter(admin.SimpleListFilter):
    title = "tool called"  # it ran, or the policy refused it
    parameter_name = "tool"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        slugs = granted_tenant_slugs(request.user)
        names = list_tool_names(None if slugs is None else sorted(slugs))
        return [(name, name) for name in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return queryset.filter(request_id__in=request_ids_calling(self.value()))
        return queryset


class ProblemFilter(admin.SimpleListFilter):
    """Runs that met a kind of problem, whatever their outcome (the worst kind) says: a run
    refused once and then corrected is listed under both."""

    title = "had a problem"
    parameter_name = "had"
    ANY = "any"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        kinds = [(kind, RunOutcome(kind).label) for kind in RunOutcome.values if kind != "clean"]
        return [(self.ANY, "Any problem"), *kinds]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        kind = self.value()
        if kind == self.ANY:
            return queryset.exclude(outcome=RunOutcome.CLEAN)
        if kind in RunOutcome.values and kind != RunOutcome.CLEAN:
            return queryset.filter(**{f"outcome_counts__{kind}__gte": 1})
        return queryset


# A run's page follows these as they change (harness/static/harness/run_live.js).
LIVE_STATUSES = frozenset({RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.AWAITING_APPROVAL})


@admin.register(Run)
class RunAdmin(TenantScopedAdmin):
    list_display = [
        "run",
        "status_badge",
        "outcome_badge",
        "agent",
        "user_id",
        "short_input",
        "duration",
        "steps",
        "tokens",
        "cost",
        "created",
        "tenant",
    ]
    list_filter = [
        "status",
        "outcome",
        ProblemFilter,
        "agent",
        ("tenant", admin.RelatedOnlyFieldListFilter),
        ("user_id", admin.AllValuesFieldListFilter),
        ToolUsedFilter,
        "mode",
        "created_at",
    ]
    search_fields = ["=request_id", "=id", "user_id"]
    search_help_text = (
        "A request id, run id or user, or a phone number, e-mail or ID number: runs that "
        "touched it are found by its fingerprint."
    )
    date_hierarchy = "created_at"
    change_form_template = "admin/harness/run/change_form.html"
    change_list_template = "admin/harness/run/change_list.html"
    readonly_fields = [
        "request_id",
        "tenant",
        "agent",
        "user_id",
        "mode",
        "experiment",
        "status",
        "status_detail",
        "stop_reason",
        "outcome",
        "outcome_counts",
        "session",
        "input",
        "answer",
        "model_route",
        "steps",
        "max_steps",
        "plans",
        "tool_call_counts",
        "prompt_tokens",
        "completion_tokens",
        "cost_detail",
        "callback_url",
        "created_at",
        "started_at",
        "finished_at",
        "deadline_at",
        "cancel_requested_at",
    ]
    exclude = [
        "messages",
        "sealed",
        "sealed_plans",
        "idempotency_key",
        # The engine's own bookkeeping: the driver's lease and the request's digest (for
        # idempotency) say nothing to a reader, and would open the page above the run's fields.
        "lease_owner",
        "lease_expires_at",
        "lease_token",
        "request_digest",
        "cost_usd",  # shown as cost_detail: money, and the exact figure
        "unpriced_calls",  # also in cost_detail: "no price" rather than $0
    ]

    def get_list_display(self, request: HttpRequest) -> list[str]:
        """The tenant column only for those who see more than one tenant."""
        slugs = granted_tenant_slugs(request.user)
        if slugs is not None and len(slugs) <= 1:
            return [name for name in self.list_display if name != "tenant"]
        return list(self.list_display)

    @admin.display(description="request id", ordering="request_id")
    def run(self, run: Run) -> str:
        # The first 12 characters tell runs apart on a page; the whole id is in the title and
        # on the run's page, and the search box takes it whole.
        return format_html(
            '<span class="request-id" title="{}">{}…</span>', run.request_id, run.request_id[:10]
        )

    @admin.display(description="status", ordering="status")
    def status_badge(self, run: Run) -> str:
        return format_html(
            '<span class="run-status status-{}" data-status="{}">{}</span>',
            status_tone(run.status),
            run.status,
            run.get_status_display(),
        )

    @admin.display(description="outcome", ordering="outcome")
    def outcome_badge(self, run: Run) -> str:
        counts = ", ".join(f"{kind} {n}" for kind, n in sorted(run.outcome_counts.items()))
        return format_html(
            '<span class="run-status run-outcome status-{}" data-outcome="{}" title="{}">{}</span>',
            outcome_tone(run.outcome),
            run.outcome,
            counts or "nothing refused, denied, failed or corrected",
            run.outcome.replace("_", " "),
        )

    @admin.display(description="input")
    def short_input(self, run: Run) -> str:
        # Run.input is stored masked; the cell shows its start, the title all of it.
        return format_html(
            '<span class="run-input" title="{}">{}</span>',
            run.input,
            mark_masked(shorten(run.input, 48)),
        )

    @admin.display(description="duration")
    def duration(self, run: Run) -> str:
        return format_duration(run_duration(run))

    @admin.display(description="tokens", ordering="prompt_tokens")
    def tokens(self, run: Run) -> str:
        return f"{run.total_tokens:,}"

    @admin.display(description="cost", ordering="cost_usd")
    def cost(self, run: Run) -> str:
        return format_cost(run.cost_usd, run.unpriced_calls)

    @admin.display(description="cost")
    def cost_detail(self, run: Run) -> str:
        return f"{format_cost(run.cost_usd, run.unpriced_calls)} ({run.cost_usd:f} USD)"

    @admin.display(description="created", ordering="created_at")
    def created(self, run: Run) -> str:
        return format_html(
            '<span title="{}">{}</span>',
            run.created_at.isoformat(timespec="seconds"),
            run.created_at.strftime("%b %d %H:%M"),
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        """The usual search, plus the runs whose fingerprints match the term."""
        found, duplicates = super().get_search_results(request, queryset, search_term)
        touched = find_runs_touching(request.user, search_term)
        if touched:
            found = found | queryset.filter(request_id__in=touched)
        return found, duplicates

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if run is not None:
            trace = get_trace(run.request_id)
            timeline = run_timeline(run, trace)
            context["timeline"] = timeline
            context["waterfall"] = build_waterfall(trace["spans"])
            context["duration"] = format_duration(run_duration(run))
            context["live"] = run.status in LIVE_STATUSES
            context["status_tone"] = status_tone(run.status)
            context["outcome_tone"] = outcome_tone(run.outcome)
            context["problem"] = run_problem(run)
            context["first_problem"] = first_problem(timeline)
            context["held_calls"] = held_calls(run)
            context["can_decide"] = request.user.has_perm(DECIDE_PERMISSION)
        return super().change_view(request, object_id, form_url, context)

    def get_urls(self) -> list[Any]:
        from django.urls import path

        from harness.console.views import (
            decide_call_view,
            policy_preview_view,
            run_replay_view,
            run_state_view,
        )

        return [
            path(
                "<path:object_id>/decide/",
                # Also needs the approval-change permission, checked by the view.
                self.permission_view(
                    lambda request, object_id: decide_call_view(self, request, object_id), "view"
                ),
                name="harness_run_decide",
            ),
            path(
                "<path:object_id>/state/",
                self.permission_view(
                    lambda request, object_id: run_state_view(self, request, object_id), "view"
                ),
                name="harness_run_state",
            ),
            path(
                "<path:object_id>/replay/",
                self.permission_view(
                    lambda request, object_id: run_replay_view(self, request, object_id), "view"
                ),
                name="harness_run_replay",
            ),
            path(
                "preview-policy/",
                # Previewing needs view_run; saving also needs the edit permission of what
                # the change edits (Casbin lines or rules), checked by the view.
                self.permission_view(lambda request: policy_preview_view(self, request), "view"),
                name="harness_policy_preview",
            ),
            *super().get_urls(),
        ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return False


@admin.register(CostReport)
class CostReportAdmin(ReadOnlyAdmin, TenantScopedAdmin):
    """Tokens and cost of the granted tenants' runs: a chart per day by agent and model, the
    table grouped as the user picks, and a CSV export (``harness/console/costs.py``)."""

    def get_urls(self) -> list[Any]:
        export = self.admin_site.admin_view(self.export_view)
        name = f"{self.opts.app_label}_{self.opts.model_name}_export"
        return [path("export.csv", export, name=name), *super().get_urls()]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            return super().changelist_view(request, extra_context)  # Django's refusal
        form = costs.CostReportForm(request.GET or costs.default_query())
        page = None
        if form.is_valid():
            page = costs.cost_page(form.cleaned_data["group_by"], self._filter(request, form))
        context = {
            **self.admin_site.each_context(request),
            "title": "Costs",
            "opts": self.model._meta,
            "form": form,
            "page": page,
            "report": page.report if page else None,
            "export_query": request.GET.urlencode(),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/harness/costreport/report.html", context)

    def export_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = costs.CostReportForm(request.GET or costs.default_query())
        if not form.is_valid():
            return HttpResponse(form.errors.as_text(), status=400, content_type="text/plain")
        where = self._filter(request, form)
        name = f"costs-{where.start or 'all'}-{where.end or 'all'}.csv"
        return costs.cost_csv(costs.csv_rows(where), name)

    @staticmethod
    def _filter(request: HttpRequest, form: costs.CostReportForm) -> CostFilter:
        slugs = granted_tenant_slugs(request.user)
        return CostFilter(
            tenants=None if slugs is None else sorted(slugs),
            start=form.cleaned_data["start"],
            end=form.cleaned_data["end"],
        )


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    extra = 0
    can_delete = False
    fields = ["number", "attempted_at", "status_code", "duration_ms", "error"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(TenantScopedAdmin):
    tenant_lookup = "run__tenant__slug"
    list_display = ["event_type", "run", "url", "status", "attempts", "next_attempt_at"]
    list_filter = ["status", "event_type"]
    search_fields = ["=run__request_id", "url"]
    readonly_fields = [
        "run",
        "event_type",
        "url",
        "payload",
        "status",
        "attempts",
        "next_attempt_at",
        "delivered_at",
        "created_at",
    ]
    inlines = [WebhookAttemptInline]
    actions = ["redeliver_selected"]

    @admin.action(description="Redeliver the selected webhooks now", permissions=["change"])
    def redeliver_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        for delivery in queryset:
            webhooks.redeliver(delivery)
        self.message_user(request, f"{queryset.count()} webhook(s) queued for redelivery.")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Session)
class SessionAdmin(TenantScopedAdmin):
    list_display = ["id", "tenant", "agent", "user_id", "updated_at"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter), "agent"]
    search_fields = ["=id", "user_id"]
    readonly_fields = ["tenant", "agent", "user_id", "summary", "summary_covers", "created_at"]
    exclude = ["messages", "sealed_messages"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


# Console sign-in throttling (django-axes; harness/console/login.py): models of no tenant,
# so these pages are for superusers only.
admin.site.register(AccessAttempt, console_login.AccessAttemptAdmin)
admin.site.register(AccessFailureLog, console_login.AccessFailureLogAdmin)
admin.site.register(AccessLog, console_login.AccessLogAdmin)
