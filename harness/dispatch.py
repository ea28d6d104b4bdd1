"""Handing work to Celery by task name, once the transaction that made it commits.

A leaf module: it imports no task, so the services that queue work and the tasks that call
those services do not import each other.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

RUN_TASK = "harness.execute_run"
DELIVERY_TASK = "harness.deliver_webhook"


def enqueue_run(run_id: Any) -> None:
    transaction.on_commit(lambda: _send(RUN_TASK, str(run_id)))


def enqueue_delivery(delivery_id: Any) -> None:
    transaction.on_commit(lambda: _send(DELIVERY_TASK, str(delivery_id)))


def _send(name: str, *args: str) -> None:
    from harness.celery import app

    app.send_task(name, args=args)
