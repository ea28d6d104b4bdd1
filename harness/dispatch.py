"""Handing runs and deliveries to Celery, only once the transaction that made them commits."""

from __future__ import annotations

from typing import Any

from django.db import transaction


def enqueue_run(run_id: Any) -> None:
    from harness.tasks import execute_run_task

    transaction.on_commit(lambda: execute_run_task.delay(str(run_id)))


def enqueue_delivery(delivery_id: Any) -> None:
    from harness.tasks import deliver_webhook_task

    transaction.on_commit(lambda: deliver_webhook_task.delay(str(delivery_id)))
