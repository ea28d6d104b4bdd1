"""Tool handlers used only by tests."""

import time
import uuid
from typing import Any

from tools.demo.models import Notification


def slow_note(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Sleeps, then records a notification keyed by the call's idempotency key (acts once)."""
    time.sleep(arguments.get("seconds", 0))
    note, created = Notification.objects.get_or_create(
        idempotency_key=context.idempotency_key,
        defaults={
            "tenant": context.tenant,
            "recipient_id": arguments.get("recipient", "ops"),
            "message": arguments.get("message", "slow note"),
        },
    )
    return {"notification_id": note.pk, "duplicate": not created}


def always_fails(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    raise ConnectionError("the ticket system is unreachable")


def slow_effect(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Acts first — a notification for every execution, keyed by the execution, so a second
    run of the same call shows — then sleeps: a non-idempotent tool slower than a lease."""
    note = Notification.objects.create(
        idempotency_key=f"{context.idempotency_key}:{uuid.uuid4().hex}",
        tenant=context.tenant,
        recipient_id="ops",
        message=arguments.get("message", "slow effect"),
    )
    time.sleep(arguments.get("seconds", 0))
    return {"notification_id": note.pk}


def deny_customer_reads(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Edits the policy in the middle of a run: the run's user may no longer read customers."""
    from policy.services import add_permission

    add_permission(context.tenant, context.user_id, "customer:read", "deny", actor="test tool")
    return {"denied": "customer:read"}


UNTRUSTED_RESULTS: dict[str, Any] = {
    "nul": {"note": "before\x00after", "na\x00me": "key with a NUL"},
    "surrogate": {"note": "lone \ud800 surrogate", "k\udfff": 1},
    "nan": {"score": float("nan"), "items": [1.5, float("nan")]},
    "infinity": {"high": float("inf"), "low": float("-inf")},
}


def untrusted_result(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Acts (a notification keyed by the call), then answers with text or numbers no database
    column can store as they are: ``kind`` picks which (``UNTRUSTED_RESULTS``)."""
    note, _ = Notification.objects.get_or_create(
        idempotency_key=context.idempotency_key,
        defaults={"tenant": context.tenant, "recipient_id": "ops", "message": "untrusted"},
    )
    return {"notification_id": note.pk, **UNTRUSTED_RESULTS[arguments.get("kind", "nul")]}


# What a fault test does the moment ``effect_then_fault`` has acted (cut the database, lose
# the next commit's answer): set by the test, in the process that drives the run.
AFTER_EFFECT: list[Any] = []


def effect_then_fault(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """Acts — a notification for every execution, keyed by the execution, so a second run of
    the same call shows — then runs the test's ``AFTER_EFFECT`` hooks: a non-idempotent tool
    whose effect happened just before the database went away."""
    note = Notification.objects.create(
        idempotency_key=f"{context.idempotency_key}:{uuid.uuid4().hex}",
        tenant=context.tenant,
        recipient_id="ops",
        message=arguments.get("message", "effect"),
    )
    for hook in AFTER_EFFECT:
        hook()
    return {"notification_id": note.pk}
