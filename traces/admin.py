from django.contrib import admin
from django.http import HttpRequest

from traces.models import AuditRecord, Span


class ReadOnlyAdmin(admin.ModelAdmin):
    """Traces are evidence: the console shows them and never edits them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Span)
class SpanAdmin(ReadOnlyAdmin):
    list_display = ["request_id", "sequence", "kind", "name", "status", "duration_ms", "started_at"]
    list_filter = ["kind", "status", "tenant"]
    search_fields = ["=request_id", "name"]


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    list_display = ["request_id", "kind", "span_id", "created_at"]
    list_filter = ["kind", "tenant"]
    search_fields = ["=request_id"]
