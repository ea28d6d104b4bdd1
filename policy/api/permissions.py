"""Who may use the policy API: the end user the client acts for (``X-Harness-User``) must hold
``policy:admin`` in the API key's tenant. A DRF permission, so that every view that edits or
previews policy checks it the same way, before its handler runs."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from policy import services as policy

ACTING_USER_HEADER = "X-Harness-User"


def acting_user(request: Request) -> str:
    return request.headers.get(ACTING_USER_HEADER, "").strip()


class HoldsPolicyAdmin(BasePermission):
    """Refuses with the policy's own errors (400 ``acting_user_required``, 403
    ``permission_denied``), not DRF's generic 403."""

    def has_permission(self, request: Request, view: Any) -> bool:
        tenant = request.user.tenant.slug
        policy.require_scope(tenant, acting_user(request), policy.POLICY_ADMIN_SCOPE)
        return True


class PolicyAdminOnly:
    """A view's permissions (the project's defaults: an authenticated tenant client) plus
    ``HoldsPolicyAdmin``, checked in that order."""

    def get_permissions(self) -> list[BasePermission]:
        return [*super().get_permissions(), HoldsPolicyAdmin()]  # type: ignore[misc]
