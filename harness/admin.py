from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from harness import webhooks
from harness.models import ApiKey, Run, Session, Tenant, WebhookAttempt, WebhookDelivery
from traces.queries import list_spans


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    exclude = ["webhook_secret"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["tenant"]
    readonly_fields = ["tenant", "name", "prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # keys are issued by `manage.py create_api_key`, which shows the secret once


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["request_id", "tenant", "agent", "user_id", "status", "steps", "created_at"]
    list_filter = ["status", "agent", "tenant", "mode"]
    search_fields = ["request_id", "=id", "user_id"]
    date_hierarchy = "created_at"
    readonly_fields = [
        "request_id",
        "tenant",
        "agent",
        "user_id",
        "mode",
        "status",
        "status_detail",
        "stop_reason",
        "session",
        "input",
        "answer",
        "model_route",
        "steps",
        "max_steps",
        "prompt_tokens",
        "completion_tokens",
        "created_at",
        "started_at",
        "finished_at",
        "timeline",
    ]
    exclude = ["messages", "idempotency_key", "lease_owner", "lease_expires_at"]

    @admin.display(description="Spans, in order")
    def timeline(self, run: Run) -> SafeString:
        return render_to_string(
            "admin/harness/run_spans.html", {"spans": list_spans(run.request_id)}
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return False


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    extra = 0
    can_delete = False
    fields = ["number", "attempted_at", "status_code", "duration_ms", "error"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
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

    @admin.action(description="Redeliver the selected webhooks now")
    def redeliver_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        for delivery in queryset:
            webhooks.redeliver(delivery)
        self.message_user(request, f"{queryset.count()} webhook(s) queued for redelivery.")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["id", "tenant", "agent", "user_id", "updated_at"]
    list_filter = ["tenant", "agent"]
    search_fields = ["=id", "user_id"]
    readonly_fields = ["tenant", "agent", "user_id", "summary", "summary_covers", "created_at"]
    exclude = ["messages"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
