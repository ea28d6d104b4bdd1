"""Celery tasks of the agent loop: thin wrappers that fetch by id and call the services."""

from celery import shared_task

from harness.models import Run
from harness.services import execute_run, resume_run


@shared_task(name="harness.execute_run", acks_late=True)
def execute_run_task(run_id: str) -> None:
    """Drive a queued async run. Safe to redeliver: only the claimer of the run drives it."""
    if not Run.objects.filter(id=run_id).exists():
        return
    execute_run(run_id)


@shared_task(name="harness.resume_run", acks_late=True)
def resume_run_task(run_id: str) -> None:
    """Continue a run whose held calls were decided. Safe to redeliver: only the claimer of
    the queued run drives it."""
    resume_run(run_id)
