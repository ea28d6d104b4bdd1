"""Tenants' API keys: issue, authenticate, rotate.

A key has a name, an owner (who answers for it), scopes (``policy.key_scopes``: what its
client may call), an optional expiry and the time it was last used. Only a SHA-256 digest of
the secret is stored; the secret is shown once. Rotation issues a new key with the same name,
owner and scopes and lets the old one live for a grace period, so clients can switch over
without a failed call.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from harness.errors import ApiKeyExpired, ApiKeyNotFound, UnknownKeyScope, UnknownTenant
from harness.models import ApiKey, Tenant
from policy.key_scopes import KEY_SCOPES

API_KEY_PREFIX = "hk_"
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    secret: str


def create_api_key(
    tenant_slug: str,
    name: str,
    replace: bool = False,
    *,
    scopes: Iterable[str] | None = None,
    owner: str = "",
    expires_at: datetime | None = None,
) -> IssuedKey:
    """Issue a key for a tenant. Only its digest is stored; the secret is shown once.

    ``scopes``: what the key may call (default: every scope, the rights keys had before
    scopes existed); an unknown one raises ``UnknownKeyScope``. With ``replace``, earlier live
    keys of the same name are revoked at once.
    """
    tenant = _tenant(tenant_slug)
    granted = _valid_scopes(KEY_SCOPES if scopes is None else scopes)
    with transaction.atomic():
        if replace:
            now = timezone.now()
            # One by one, not with update(): each revocation is a security event (SIEM).
            for old in tenant.api_keys.select_for_update().filter(
                name=name, revoked_at__isnull=True
            ):
                old.revoked_at = now
                old.save(update_fields=["revoked_at"])
        return _issue(tenant, name, granted, owner, expires_at)


def rotate_api_key(
    tenant_slug: str,
    name: str,
    grace: timedelta,
    *,
    expires_at: datetime | None = None,
    now: datetime | None = None,
) -> IssuedKey:
    """A new key in place of the tenant's live key(s) named ``name``: same owner and scopes;
    the old ones keep working for ``grace`` (or until their own expiry, if sooner), then
    answer ``401 api_key_expired``. Raises ``ApiKeyNotFound`` when no live key has the name."""
    tenant = _tenant(tenant_slug)
    now = now or timezone.now()
    with transaction.atomic():
        live = list(
            _live(tenant.api_keys.select_for_update().filter(name=name), now).order_by(
                "-created_at"
            )
        )
        if not live:
            raise ApiKeyNotFound(tenant_slug, name)
        issued = _issue(tenant, name, live[0].scopes, live[0].owner, expires_at)
        retire_at = now + grace
        for old in live:
            old.expires_at = min(old.expires_at or retire_at, retire_at)
            old.replaced_by = issued.api_key
            old.save(update_fields=["expires_at", "replaced_by"])
    return issued


def authenticate_api_key(secret: str, now: datetime | None = None) -> ApiKey | None:
    """The live key matching ``secret``, or None (constant-time comparison of digests).

    A key past its expiry raises ``ApiKeyExpired`` (401): its holder is told to rotate, not
    that the secret is wrong. A key is live while ``now < expires_at``."""
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
    now = now or timezone.now()
    if api_key.expires_at is not None and now >= api_key.expires_at:
        raise ApiKeyExpired(api_key.prefix, api_key.expires_at)
    _touch(api_key)
    return api_key


def _issue(
    tenant: Tenant, name: str, scopes: list[str], owner: str, expires_at: datetime | None
) -> IssuedKey:
    prefix = secrets.token_hex(6)
    secret = f"{API_KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    api_key = ApiKey.objects.create(
        tenant=tenant,
        name=name,
        prefix=prefix,
        key_hash=_digest(secret),
        scopes=scopes,
        owner=owner,
        expires_at=expires_at,
    )
    return IssuedKey(api_key=api_key, secret=secret)


def _tenant(slug: str) -> Tenant:
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise UnknownTenant(slug)
    return tenant


def _valid_scopes(scopes: Iterable[str]) -> list[str]:
    granted = sorted(set(scopes))
    unknown = [scope for scope in granted if scope not in KEY_SCOPES]
    if unknown:
        raise UnknownKeyScope(unknown, list(KEY_SCOPES))
    return granted


def _live(keys, now: datetime):  # type: ignore[no-untyped-def]
    return keys.filter(revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )


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
