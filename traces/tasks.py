"""Celery tasks of the trace store: thin wrappers around the services."""

from typing import Any

from celery import shared_task

from traces.retention import delete_expired_traces


@shared_task(name="traces.delete_expired_traces", acks_late=True, soft_time_limit=1800)
def delete_expired_traces_task() -> dict[str, Any]:
    """Run by beat (``CELERY_BEAT_SCHEDULE``). Idempotent: a rerun finds nothing more to do."""
    return delete_expired_traces().as_dict()
