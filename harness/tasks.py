"""Celery tasks of the agent loop: thin wrappers that fetch by id and call the services."""

from celery import shared_task

from harness.models import Run
from harness.services import execute_run


@shared_task(name="harness.execute_run", acks_late=True)
def execute_run_task(run_id: str) -> None:
    """Drive a queued async run. Safe to redeliver: only the claimer of the run drives it."""
    if not Run.objects.filter(id=run_id).exists():
        return
    execute_run(run_id)
