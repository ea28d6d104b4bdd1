"""Handing work to Celery by task name, once the transaction that made it commits.

A leaf module: it imports no task, so the services that queue work and the tasks that call
those services do not import each other.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from harness.dependencies import unavailable_dependency

logger = logging.getLogger(__name__)

RUN_TASK = "harness.execute_run"
DELIVERY_TASK = "harness.deliver_webhook"


def enqueue_run(run_id: Any, release: tuple[str, int] | None = None) -> None:
    """Have a worker drive the run; ``release``: the (owner, token) of a lease that a driver
    gave up without being able to release it (the database was down), which the worker
    releases before it claims the run."""
    kwargs = {"release": list(release)} if release else {}
    transaction.on_commit(lambda: _send(RUN_TASK, str(run_id), **kwargs))


def enqueue_delivery(delivery_id: Any) -> None:
    transaction.on_commit(lambda: _send(DELIVERY_TASK, str(delivery_id)))


def _send(name: str, *args: str, **kwargs: Any) -> None:
    """Publish after the commit. A broker that is down loses nothing: the run (or delivery) is
    committed and the beat sweeps send it again (``recover_stalled_runs`` after a lease's
    length, ``dispatch_due_webhooks`` when due), so the caller is not failed for it."""
    from harness.celery import app

    try:
        app.send_task(name, args=args, kwargs=kwargs)
    except Exception as exc:
        if unavailable_dependency(exc) is None:
            raise
        logger.warning("broker unavailable, %s %s left to the sweep: %s", name, args, exc)
