"""Console pages of the SIEM delivery (superusers: no tenant owns a sink): each cursor with its
lag, the dead letters (with *Send again*), and the security events kept for the SIEM."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from core.admin import ReadOnlyAdmin
from harness.siem.delivery import redeliver_dead_letter
from harness.siem.models import SecurityEvent, SiemCursor, SiemDeadLetter


@admin.register(SiemCursor)
class SiemCursorAdmin(ReadOnlyAdmin):
    list_display = ["sink", "stream", "position", "delivered", "lag_records", "lag_seconds",
                    "failures", "next_attempt_at", "last_delivered_at", "last_error"]  # fmt: skip
    list_filter = ["sink", "stream"]


@admin.register(SiemDeadLetter)
class SiemDeadLetterAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "sink", "stream", "position", "error", "redelivered_at"]
    list_filter = ["sink", "stream"]
    readonly_fields = ["sink", "stream", "position", "record", "error", "created_at",
                       "redelivered_at"]  # fmt: skip
    actions = ["send_again"]

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.is_superuser

    @admin.action(description="Send the selected records again", permissions=["change"])
    def send_again(self, request: HttpRequest, queryset: QuerySet) -> None:
        sent = sum(redeliver_dead_letter(letter) for letter in queryset)
        self.message_user(request, f"{sent} of {queryset.count()} record(s) accepted by the sink.")


@admin.register(SecurityEvent)
class SecurityEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "category", "activity", "outcome", "actor", "tenant",
                    "source_ip"]  # fmt: skip
    list_filter = ["category", "activity", "outcome"]
    search_fields = ["actor", "tenant"]
