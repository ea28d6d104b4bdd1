from django.contrib import admin
from django.http import HttpRequest

from policy.models import PolicyChange, PolicyVersion


@admin.register(PolicyVersion)
class PolicyVersionAdmin(admin.ModelAdmin):
    list_display = ["version", "updated_at"]

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(PolicyChange)
class PolicyChangeAdmin(admin.ModelAdmin):
    list_display = ["version", "tenant", "action", "rule", "actor", "created_at"]
    list_filter = ["tenant", "action"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
