from django.contrib import admin
from django.http import HttpRequest

from traces.models import (
    AuditChainHead,
    AuditCheckpoint,
    AuditRecord,
    AuditRunLink,
    Fingerprint,
    RetentionPolicy,
    Span,
)


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
    list_display = ["tenant", "sequence", "request_id", "kind", "span_id", "created_at"]
    list_filter = ["kind", "tenant"]
    search_fields = ["=request_id"]


@admin.register(AuditRunLink)
class AuditRunLinkAdmin(ReadOnlyAdmin):
    list_display = ["tenant", "sequence", "request_id", "run_sequence", "created_at"]
    list_filter = ["tenant"]
    search_fields = ["=request_id"]


@admin.register(AuditChainHead)
class AuditChainHeadAdmin(ReadOnlyAdmin):
    list_display = ["tenant", "sequence", "hash", "updated_at"]


@admin.register(AuditCheckpoint)
class AuditCheckpointAdmin(ReadOnlyAdmin):
    list_display = ["tenant", "sequence", "hash", "deleted_before", "updated_at"]


@admin.register(Fingerprint)
class FingerprintAdmin(ReadOnlyAdmin):
    list_display = ["tenant", "request_id", "kind", "digest", "created_at"]
    list_filter = ["kind", "tenant"]
    search_fields = ["=request_id"]


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):
    list_display = ["tenant", "days"]
