"""Celery tasks of the agent loop: thin wrappers that fetch by id and call the services.

The run tasks own the retry policy for dependency outages. A connection error of the
database, Redis or the broker (``UNAVAILABLE_ERRORS``) retries the task with exponential
back-off and full jitter, bounded (``autoretry_for``); a driver that gave its run up mid-way
(``DriveInterrupted``: the step's own retries ran out while the database stayed down) is
retried the same way, carrying the lease it could not release, so that the next attempt
releases it and claims the run at once. Retried, not rejected for redelivery: a requeue would
come back at once, again and again while the dependency is down, with no bound. Past the last
retry the run is not lost: its lease was released or runs out, and the stalled-run sweep
sends it again.
"""

from celery import shared_task
from celery.utils.time import get_exponential_backoff_interval

from harness import runs, webhooks
from harness.dependencies import UNAVAILABLE_ERRORS
from harness.engine.state import DriveInterrupted
from harness.siem.delivery import deliver_to_sinks

# Back-off at most 10 s apart (a dependency back is noticed within that), 30 retries: a few
# minutes of outage; past them the sweep still sends the run again.
RUN_RETRIES = 30
RETRY_BACKOFF_MAX_S = 10

RUN_TASK_OPTIONS = {
    "bind": True,
    "acks_late": True,
    "autoretry_for": UNAVAILABLE_ERRORS,
    "retry_backoff": True,
    "retry_backoff_max": RETRY_BACKOFF_MAX_S,
    "retry_jitter": True,
    "max_retries": RUN_RETRIES,
}


@shared_task(name="harness.execute_run", **RUN_TASK_OPTIONS)
def execute_run_task(self, run_id: str, release: list | None = None) -> None:
    """Drive a queued run: a new one, one resumed after its approvals, one handed off by a
    sync request, or one whose driver died or gave it up. Safe to redeliver: only the claimer
    drives it."""
    _execute(self, run_id, release)


@shared_task(name="harness.resume_run", **RUN_TASK_OPTIONS)
def resume_run_task(self, run_id: str, release: list | None = None) -> None:
    """Messages queued under the name resumes had before they were folded into
    ``harness.execute_run``: the same work."""
    _execute(self, run_id, release)


def _execute(task, run_id: str, release: list | None) -> None:
    try:
        runs.execute_run(run_id, release=tuple(release) if release else None)
    except DriveInterrupted as exc:
        given_up = [exc.lease.owner, exc.lease.token]
        countdown = get_exponential_backoff_interval(
            factor=1, retries=task.request.retries, maximum=RETRY_BACKOFF_MAX_S, full_jitter=True
        )
        raise task.retry(
            exc=exc, args=[run_id], kwargs={"release": given_up}, countdown=countdown
        ) from exc


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


@shared_task(name="harness.deliver_siem", soft_time_limit=240)
def deliver_siem_task() -> int:
    """Beat: send each SIEM sink what it has not accepted yet (harness.siem.delivery); a
    sink that is down is skipped until its back-off passes. Returns the records sent."""
    return sum(result.records for result in deliver_to_sinks())
