"""Who may call an API operation, as DRF permission classes declared on the views.

- The key scope each operation needs: ``permission_classes = [key_scopes(get=RUNS_READ,
  post=RUNS_CREATE)]``. A call by a key without the scope is ``403 key_scope_missing`` naming
  it (``details.scope``). The class reads the scopes of the authenticated key
  (``request.auth.scopes``) and so works for every app's views without importing the one that
  stores keys.
- The policy API's acting user: the end user the client acts for (``X-Harness-User``) must hold
  ``policy:admin`` in the API key's tenant (``PolicyAdminOnly``), checked after the key scope.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from policy import services as policy
from policy.errors import KeyScopeMissing, KeyScopeUndeclared
from policy.key_scopes import KEY_SCOPES


class KeyScopeRequired(BasePermission):
    """Base of the classes ``key_scopes`` makes; ``required`` maps an HTTP method to a scope."""

    required: dict[str, str] = {}

    def has_permission(self, request: Request, view: Any) -> bool:
        held = getattr(request.auth, "scopes", None)
        if held is None:
            return False  # no key: DRF answers 401
        method = request.method or ""
        if method == "OPTIONS" or not hasattr(view, method.lower()):
            return True  # metadata, or a method the view lacks (405 follows)
        scope = self.required.get(method) or (
            self.required.get("GET") if method == "HEAD" else None
        )
        if scope is None:
            raise KeyScopeUndeclared(method, type(view).__name__)
        if scope not in held:
            raise KeyScopeMissing(scope, method, list(held))
        return True


def key_scopes(**by_method: str) -> type[KeyScopeRequired]:
    """A permission class requiring, per method (``get=…, post=…``), the key scope given."""
    required = {method.upper(): scope for method, scope in by_method.items()}
    unknown = sorted(set(required.values()) - set(KEY_SCOPES))
    if unknown:
        raise ValueError(f"unknown key scopes {unknown}; known: {', '.join(KEY_SCOPES)}")
    return type("KeyScopeRequired", (KeyScopeRequired,), {"required": required})


def required_key_scope(view_class: Any, method: str) -> str | None:
    """The key scope ``view_class`` declares for ``method`` (None: none declared)."""
    for permission in getattr(view_class, "permission_classes", []):
        if isinstance(permission, type) and issubclass(permission, KeyScopeRequired):
            return permission.required.get(method.upper())
    return None


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
