"""Console accounts while single sign-on is on: users come from the identity provider (or,
for the break-glass superuser, from ``manage.py createsuperuser``), never from a console form.

The user admin adds no users and sets no passwords then, and nobody is made a superuser from
the console; who signed in through which identity is its own read-only page (superusers).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from core.admin import ReadOnlyAdmin
from harness.console.oidc import sso_enabled
from harness.models import OidcIdentity


class ConsoleUserAdmin(UserAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return not sso_enabled() and super().has_add_permission(request)

    def user_change_password(
        self, request: HttpRequest, id: str, form_url: str = ""
    ) -> HttpResponse:
        if sso_enabled():
            raise PermissionDenied("Passwords are set from the command line while SSO is on.")
        return super().user_change_password(request, id, form_url)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "is_superuser"] if sso_enabled() else fields


class OidcIdentityAdmin(ReadOnlyAdmin):
    list_display = ["user", "subject", "issuer", "groups", "last_login_at", "created_at"]
    search_fields = ["user__username", "subject"]
    fields = list_display
    readonly_fields = list_display


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, ConsoleUserAdmin)
admin.site.register(OidcIdentity, OidcIdentityAdmin)
