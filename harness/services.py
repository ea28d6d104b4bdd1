"""Tenants' API keys: issue one, authenticate a request by one. (Runs: ``harness.runs``.)"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from harness.errors import UnknownTenant
from harness.models import ApiKey, Tenant

API_KEY_PREFIX = "hk_"


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    secret: str


def create_api_key(tenant_slug: str, name: str, replace: bool = False) -> IssuedKey:
    """Issue a key for a tenant. Only its digest is stored; the secret is shown once.

    With ``replace``, earlier live keys of the same name are revoked.
    """
    tenant = Tenant.objects.filter(slug=tenant_slug).first()
    if tenant is None:
        raise UnknownTenant(tenant_slug)
    prefix = secrets.token_hex(6)
    secret = f"{API_KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        if replace:
            tenant.api_keys.filter(name=name, revoked_at__isnull=True).update(
                revoked_at=timezone.now()
            )
        api_key = ApiKey.objects.create(
            tenant=tenant, name=name, prefix=prefix, key_hash=_digest(secret)
        )
    return IssuedKey(api_key=api_key, secret=secret)


def authenticate_api_key(secret: str) -> ApiKey | None:
    """The live key matching ``secret``, or None. Constant-time comparison of digests."""
    if not secret.startswith(API_KEY_PREFIX):
        return None
    prefix = secret[len(API_KEY_PREFIX) :].split("_", 1)[0]
    api_key = (
        ApiKey.objects.select_related("tenant")
        .filter(prefix=prefix, revoked_at__isnull=True)
        .first()
    )
    if api_key is None or not hmac.compare_digest(api_key.key_hash, _digest(secret)):
        return None
    _touch(api_key)
    return api_key


LAST_USED_RESOLUTION = timedelta(minutes=1)


def _touch(api_key: ApiKey) -> None:
    """Record when the key was last used, at most once a minute (a conditional UPDATE only
    when the value read is older: most requests write nothing)."""
    now = timezone.now()
    stale = now - LAST_USED_RESOLUTION
    if api_key.last_used_at is not None and api_key.last_used_at > stale:
        return
    ApiKey.objects.filter(pk=api_key.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale)
    ).update(last_used_at=now)
    api_key.last_used_at = now


def _digest(secret: str) -> str:
    # Keys carry 256 bits of randomness, so a fast hash is enough (no password stretching).
    return hashlib.sha256(secret.encode()).hexdigest()
