"""Celery tasks of the agent loop: thin wrappers that fetch by id and call the services."""

from celery import shared_task

from harness import services, webhooks
from harness.models import Run


@shared_task(name="harness.execute_run", acks_late=True)
def execute_run_task(run_id: str) -> None:
    """Drive a queued (or abandoned) run. Safe to redeliver: only the claimer drives it."""
    if not Run.objects.filter(id=run_id).exists():
        return
    services.execute_run(run_id)


@shared_task(name="harness.resume_run", acks_late=True)
def resume_run_task(run_id: str) -> None:
    """Continue a run whose held calls were decided (any worker; only the claimer drives)."""
    services.resume_run(run_id)


@shared_task(name="harness.recover_stalled_runs")
def recover_stalled_runs_task() -> int:
    """Beat: re-queue runs whose worker died and queued runs whose message was lost."""
    return services.recover_stalled_runs()


@shared_task(name="harness.deliver_webhook", acks_late=True)
def deliver_webhook_task(delivery_id: str) -> None:
    """One delivery attempt; the claim in ``deliver`` makes redelivery harmless."""
    webhooks.deliver(delivery_id)


@shared_task(name="harness.dispatch_due_webhooks")
def dispatch_due_webhooks_task() -> int:
    """Beat: enqueue attempts for deliveries whose retry time has come."""
    return webhooks.dispatch_due_deliveries()
