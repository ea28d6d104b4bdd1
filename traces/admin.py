from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from core.admin import ReadOnlyAdmin
from traces.errors import MaskingPatternInvalid
from traces.masking.patterns import (
    MAX_PATTERN_LENGTH,
    MAX_SAMPLE_LENGTH,
    remove_pattern,
    save_pattern,
    try_pattern,
)
from traces.models import (
    AuditChainHead,
    AuditCheckpoint,
    AuditRecord,
    AuditRunLink,
    Fingerprint,
    MaskingPattern,
    MaskingPatternChange,
    RetentionPolicy,
    Span,
)


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
    list_display = ["tenant", "sequence", "request_id", "run_sequence", "final", "created_at"]
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


class MaskingPatternForm(forms.ModelForm):
    """Tries the pattern on its sample before anything is saved. Both are capped here, before
    any scan, and the trial runs on the engine and within the budget of a run's scans."""

    pattern = forms.CharField(
        max_length=MAX_PATTERN_LENGTH,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="An RE2 regular expression (no lookarounds or backreferences), at most one "
        "capturing group: the value.",
    )
    sample = forms.CharField(
        max_length=MAX_SAMPLE_LENGTH,
        strip=False,
        widget=forms.Textarea,
        help_text="Text with at least one value the pattern must find.",
    )

    class Meta:
        model = MaskingPattern
        fields = ["tenant", "kind", "pattern", "sample", "enabled"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        kind = data.get("kind") or self.instance.kind  # read-only once saved
        try:
            self.trial = try_pattern(kind, data["pattern"], data["sample"])
        except MaskingPatternInvalid as error:
            self.add_error(error.field, error.message)
        return data


@admin.register(MaskingPattern)
class MaskingPatternAdmin(admin.ModelAdmin):
    """A tenant's own identifiers to mask; every edit goes through ``save_pattern`` (tested on
    the sample, audited as a ``MaskingPatternChange``)."""

    form = MaskingPatternForm
    list_display = ["tenant", "kind", "pattern", "enabled", "updated_at"]
    list_filter = ["tenant", "enabled"]
    search_fields = ["tenant", "kind"]
    actions = None  # bulk deletion would bypass the audit

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["tenant", "kind"] if obj else []

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        trial = save_pattern(
            obj.tenant, obj.kind, obj.pattern, obj.sample, request.user.get_username(), obj.enabled
        )
        obj.pk = MaskingPattern.objects.get(tenant=obj.tenant, kind=obj.kind).pk
        messages.info(
            request,
            f"Found {len(trial.found)} value(s) in the sample; stored as: {trial.masked_sample}",
        )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        remove_pattern(obj.tenant, obj.kind, request.user.get_username())


@admin.register(MaskingPatternChange)
class MaskingPatternChangeAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "tenant", "action", "kind", "actor"]
    list_filter = ["tenant", "action"]
    search_fields = ["actor", "tenant", "kind"]
