"""Celery tasks of the agent loop: thin wrappers that fetch by id and call the services."""

from celery import shared_task

from harness import runs, webhooks


@shared_task(name="harness.execute_run", acks_late=True)
def execute_run_task(run_id: str) -> None:
    """Drive a queued run: a new one, one resumed after its approvals, one handed off by a
    sync request, or one whose driver died. Safe to redeliver: only the claimer drives it."""
    runs.execute_run(run_id)


@shared_task(name="harness.resume_run", acks_late=True)
def resume_run_task(run_id: str) -> None:
    """Messages queued under the name resumes had before they were folded into
    ``harness.execute_run``: the same work."""
    runs.execute_run(run_id)


@shared_task(name="harness.recover_stalled_runs")
def recover_stalled_runs_task() -> int:
    """Beat: re-queue runs whose worker died and queued runs whose message was lost."""
    return runs.recover_stalled_runs()


@shared_task(name="harness.deliver_webhook", acks_late=True)
def deliver_webhook_task(delivery_id: str) -> None:
    """One delivery attempt; the claim in ``deliver`` makes redelivery harmless."""
    webhooks.deliver(delivery_id)


@shared_task(name="harness.dispatch_due_webhooks")
def dispatch_due_webhooks_task() -> int:
    """Beat: enqueue attempts for deliveries whose retry time has come."""
    return webhooks.dispatch_due_deliveries()
