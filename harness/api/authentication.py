"""Per-tenant API keys: ``Authorization: Bearer hk_…``."""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from harness.api_keys import authenticate_api_key
from harness.models import ApiKey, Tenant


@dataclass(frozen=True)
class TenantClient:
    """The authenticated caller: a business service acting for one tenant."""

    tenant: Tenant
    api_key: ApiKey
    is_authenticated: bool = True


class TenantApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[TenantClient, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, secret = header.partition(" ")
        if scheme != self.keyword or not secret.strip():
            raise exceptions.AuthenticationFailed(
                "Use 'Authorization: Bearer <api key>'.", code="invalid_api_key"
            )
        api_key = authenticate_api_key(secret.strip())
        if api_key is None:
            raise exceptions.AuthenticationFailed(
                "The API key is not valid or has been revoked.", code="invalid_api_key"
            )
        # An expired key raises ApiKeyExpired (401 api_key_expired) from authenticate_api_key.
        return TenantClient(tenant=api_key.tenant, api_key=api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="harness"'


class IsTenantClient(permissions.BasePermission):
    def has_permission(self, request: Request, view: object) -> bool:
        return isinstance(request.user, TenantClient)
