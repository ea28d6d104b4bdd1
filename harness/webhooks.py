"""Signed callbacks (Standard Webhooks) for runs with a ``callback_url``.

Each event becomes a ``WebhookDelivery`` row before anything is sent. A Celery task makes one
attempt per call, claiming the row with a conditional update, and logs every attempt. Failed
deliveries are retried on ``HARNESS_WEBHOOK_RETRY_SCHEDULE_S`` (more than 24 hours by default)
by the beat task that dispatches due deliveries, so retries never sit in the broker as long
ETAs. URLs are checked against server-side request forgery when the run is created and again
before every attempt.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from harness.dispatch import enqueue_delivery
from harness.errors import ErrorCode, HarnessError
from harness.models import DeliveryStatus, Run, WebhookAttempt, WebhookDelivery
from tools.services import AddressPolicy, PinnedTransport, UnsafeAddress, resolve_address
from traces.services import mask_for_storage, seal, unseal

# Deliveries stuck in "sending" this long (a worker died mid-attempt) are tried again.
SENDING_TIMEOUT_S = 300
DUE_BATCH = 100


class UnsafeCallbackUrl(HarnessError):
    code = ErrorCode.INVALID_REQUEST
    http_status = 400

    def __init__(self, url: str, why: str) -> None:
        super().__init__(f"callback_url {url!r} is not allowed: {why}.", {"callback_url": url})


def check_callback_url(url: str) -> None:
    """Refuse URLs that are malformed or resolve to private, loopback, link-local or other
    non-public addresses (IPv6 forms embedding an IPv4 address included), unless their
    network is allow-listed in HARNESS_WEBHOOK_ALLOWED_NETWORKS. Each attempt vets the name
    again and connects to the address it vetted (``tools.services.PinnedTransport``)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeCallbackUrl(url, "it is not a valid URL (check the port)") from exc
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise UnsafeCallbackUrl(url, "only http and https URLs with a host are accepted")
    if parts.username is not None or parts.password is not None:
        raise UnsafeCallbackUrl(url, "credentials in the URL are not accepted")
    default_port = 443 if parts.scheme == "https" else 80
    try:
        resolve_address(parts.hostname, port or default_port, callback_policy())
    except UnsafeAddress as exc:
        raise UnsafeCallbackUrl(url, exc.why) from exc


def callback_policy() -> AddressPolicy:
    return AddressPolicy.of(public_only=True, allowed=settings.HARNESS_WEBHOOK_ALLOWED_NETWORKS)


def queue_run_event(
    run: Run,
    event_type: str,
    extra: dict[str, Any] | None = None,
    answer: str | None = None,
    mask: Callable[[Any], Any] | None = None,
    url: str | None = None,
) -> None:
    """Record a delivery of ``event_type`` for the run (to its callback, or to ``url``: the
    tenant's budget alerts) and send it; nothing without a URL.

    The receiver gets the clear payload (``answer`` when the caller has it in clear); only a
    masked copy is stored readable, the clear one sealed.
    """
    target = run.callback_url if url is None else url
    if not target:
        return
    payload = {
        "type": event_type,
        "timestamp": timezone.now().isoformat(),
        "data": {
            "run_id": str(run.id),
            "request_id": run.request_id,
            "agent": run.agent,
            "user": run.user_id,
            "status": run.status,
            "outcome": run.outcome,
            "outcome_counts": run.outcome_counts,
            "answer": run.answer if answer is None else answer,
            "stop_reason": run.stop_reason,
            "links": {"self": f"/api/v1/runs/{run.id}", "trace": f"/api/v1/runs/{run.id}/trace"},
            **(extra or {}),
        },
    }
    payload = json.loads(json.dumps(payload, cls=DjangoJSONEncoder))
    masked = mask(payload) if mask else mask_for_storage(run.request_id, run.tenant.slug, payload)
    delivery = WebhookDelivery.objects.create(
        run=run,
        event_type=event_type,
        url=target,
        payload=masked,
        sealed_payload=seal(payload),
        next_attempt_at=timezone.now(),
    )
    enqueue_delivery(delivery.id)


def deliver(delivery_id: str) -> WebhookDelivery | None:
    """Make one attempt if the delivery is due; log it; schedule the next or give up.

    Idempotent under redelivery: only the caller whose conditional update claims the row
    sends, so one attempt is one POST.
    """
    now = timezone.now()
    claimed = WebhookDelivery.objects.filter(
        id=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).update(
        status=DeliveryStatus.SENDING, next_attempt_at=now + timedelta(seconds=SENDING_TIMEOUT_S)
    )
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("run__tenant").get(id=delivery_id)
    number = delivery.attempts + 1
    status_code, error, duration_ms = _post(delivery)
    WebhookAttempt.objects.create(
        delivery=delivery,
        number=number,
        status_code=status_code,
        error=error,
        duration_ms=duration_ms,
    )
    delivery.attempts = number
    if status_code is not None and 200 <= status_code < 300:
        delivery.status = DeliveryStatus.DELIVERED
        delivery.delivered_at = timezone.now()
        delivery.next_attempt_at = None
    elif number > len(settings.HARNESS_WEBHOOK_RETRY_SCHEDULE_S):
        delivery.status = DeliveryStatus.FAILED
        delivery.next_attempt_at = None
    else:
        delivery.status = DeliveryStatus.PENDING
        wait = settings.HARNESS_WEBHOOK_RETRY_SCHEDULE_S[number - 1]
        delivery.next_attempt_at = timezone.now() + timedelta(seconds=wait)
    delivery.save(update_fields=["attempts", "status", "delivered_at", "next_attempt_at"])
    return delivery


def dispatch_due_deliveries() -> int:
    """Enqueue an attempt for every delivery that is due (and for ones stuck sending)."""
    now = timezone.now()
    WebhookDelivery.objects.filter(status=DeliveryStatus.SENDING, next_attempt_at__lt=now).update(
        status=DeliveryStatus.PENDING
    )
    due = list(
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("id", flat=True)[:DUE_BATCH]
    )
    for delivery_id in due:
        enqueue_delivery(delivery_id)
    return len(due)


def redeliver(delivery: WebhookDelivery) -> None:
    """An operator's "send again": a fresh attempt now, whatever the delivery's state."""
    WebhookDelivery.objects.filter(id=delivery.id).update(
        status=DeliveryStatus.PENDING, next_attempt_at=timezone.now()
    )
    enqueue_delivery(delivery.id)


def _post(delivery: WebhookDelivery) -> tuple[int | None, str, float]:
    started = time.perf_counter()
    try:
        payload = unseal(delivery.sealed_payload, delivery.payload)
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
        sent_at = timezone.now()
        signature = Webhook(delivery.run.tenant.webhook_secret).sign(
            str(delivery.id), sent_at, body
        )
        headers = {
            "content-type": "application/json",
            "webhook-id": str(delivery.id),
            "webhook-timestamp": str(int(sent_at.timestamp())),
            "webhook-signature": signature,
            "user-agent": "harness-webhooks/1",
        }
        transport = PinnedTransport(callback_policy())
        # trust_env=False: an environment proxy would bypass the pinned transport.
        with httpx.Client(transport=transport, follow_redirects=False, trust_env=False) as client:
            response = client.post(
                delivery.url,
                content=body.encode(),
                headers=headers,
                timeout=settings.HARNESS_WEBHOOK_TIMEOUT_S,
            )
    except UnsafeAddress as exc:
        return None, f"UnsafeCallbackUrl: {exc.why}", _ms(started)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:1000], _ms(started)
    error = "" if response.is_success else response.text[:500]
    return response.status_code, error, _ms(started)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
