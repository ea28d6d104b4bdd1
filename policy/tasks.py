"""Celery tasks of the policy engine: thin wrappers around the services."""

from celery import shared_task

from policy.services import expire_approvals


@shared_task(name="policy.expire_approvals")
def expire_approvals_task() -> int:
    """Deny every approval past its expiry (run by beat). Idempotent: each expires once."""
    return expire_approvals()
