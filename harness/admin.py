from django.contrib import admin
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from harness.models import ApiKey, Run, Tenant
from traces.queries import list_spans


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]


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
    exclude = ["messages", "callback_url", "idempotency_key"]

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
