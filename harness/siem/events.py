"""Security events that have no row of their own elsewhere, kept for the SIEM: API keys issued
and console sign-ins (password or single sign-on), sign-outs and refused sign-ins.

``record_security_event`` appends one hash-chained ``SecurityEvent``; the signal receivers
below (wired in ``HarnessConfig.ready``) call it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import connection, transaction
from django.http import HttpRequest
from django.utils import timezone

from harness.siem.models import SecurityEvent

GENESIS_HASH = "0" * 64
# PostgreSQL advisory lock that serialises appends to the chain (SQLite writers already are).
_CHAIN_LOCK = 0x5E_C0_E7


def event_hash(prev_hash: str, content: dict[str, Any]) -> str:
    """SHA-256 over the previous hash and the canonical JSON of the event's content."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


def event_content(event: SecurityEvent) -> dict[str, Any]:
    """What an event's hash covers (also shipped in the SIEM record)."""
    return {
        "category": event.category,
        "activity": event.activity,
        "outcome": event.outcome,
        "actor": event.actor,
        "tenant": event.tenant,
        "source_ip": event.source_ip,
        "detail": event.detail,
        "created_at": event.created_at.isoformat(),
    }


def record_security_event(
    category: str,
    activity: str,
    outcome: str,
    *,
    actor: str = "",
    tenant: str = "",
    source_ip: str = "",
    detail: dict[str, Any] | None = None,
) -> SecurityEvent:
    """Append one security event to its chain. Never holds secrets: callers pass names,
    prefixes and reasons only."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK])
        prev = SecurityEvent.objects.order_by("-id").values_list("hash", flat=True).first()
        event = SecurityEvent(
            category=category,
            activity=activity,
            outcome=outcome,
            actor=actor[:200],
            tenant=tenant,
            source_ip=source_ip,
            detail=detail or {},
            created_at=timezone.now(),
            prev_hash=prev or GENESIS_HASH,
        )
        event.hash = event_hash(event.prev_hash, event_content(event))
        event.save()
    return event


def _address(request: HttpRequest | None) -> str:
    if request is None:
        return ""
    return str(getattr(request, "axes_ip_address", None) or request.META.get("REMOTE_ADDR", ""))


def _method(request: HttpRequest | None) -> str:
    return "sso" if request is not None and "/oidc/" in request.path else "password"


def on_logged_in(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    record_security_event(
        "console_login", "login", "success", actor=user.get_username(),
        source_ip=_address(request), detail={"method": _method(request)},
    )  # fmt: skip


def on_logged_out(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    if user is None:
        return
    record_security_event(
        "console_login", "logout", "success", actor=user.get_username(),
        source_ip=_address(request),
    )  # fmt: skip


def on_login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    record_security_event(
        "console_login", "login_failed", "failure", actor=str(credentials.get("username") or ""),
        source_ip=_address(request), detail={"method": _method(request)},
    )  # fmt: skip


def on_sso_refused(request: HttpRequest, reason: str) -> None:
    record_security_event(
        "console_login", "login_failed", "failure", source_ip=_address(request),
        detail={"method": "sso", "reason": reason},
    )  # fmt: skip


def on_api_key_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    """An API key issued (its prefix and name, never the secret), revoked, or retired by a
    rotation (with the time it stops working)."""
    update_fields = kwargs.get("update_fields")
    detail = {"uid": instance.prefix, "name": instance.name}
    if created:
        activity = "create"
    elif update_fields is not None and "replaced_by" in update_fields:
        activity = "rotate"
        detail |= {
            "replaced_by": instance.replaced_by.prefix if instance.replaced_by else "",
            "expires_at": instance.expires_at.isoformat() if instance.expires_at else "",
        }
    elif update_fields is not None and "revoked_at" not in update_fields:
        return
    elif instance.revoked_at is not None:
        activity = "revoke"
    else:
        return  # last-used stamps
    record_security_event(
        "api_key", activity, "success", tenant=instance.tenant.slug, detail=detail
    )
