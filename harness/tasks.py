"""Celery tasks of the agent loop: thin wrappers that fetch by id and call the services."""

from celery import shared_task

from harness import services, webhooks
from harness.siem.delivery import deliver_to_sinks


@shared_task(name="harness.execute_run", acks_late=True)
def execute_run_task(run_id: str) -> None:
    """Drive a queued run: a new one, one resumed after its approvals, one handed off by a
    sync request, or one whose driver died. Safe to redeliver: only the claimer drives it."""
    services.execute_run(run_id)


@shared_task(name="harness.resume_run", acks_late=True)
def resume_run_task(run_id: str) -> None:
    """Messages queued under the name resumes had before they were folded into
    ``harness.execute_run``: the same work."""
    services.execute_run(run_id)


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


@shared_task(name="harness.deliver_siem", soft_time_limit=240)
def deliver_siem_task() -> int:
    """Beat: send each SIEM sink what it has not accepted yet (harness.siem.delivery); a
    sink that is down is skipped until its back-off passes. Returns the records sent."""
    return sum(result.records for result in deliver_to_sinks())
