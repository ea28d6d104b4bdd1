"""Experiments: a dataset re-executed hermetically with a candidate (docs/experiments.md).

Who may: making and editing datasets needs the scope ``dataset:write`` (they hold clear data
from the runs' sealed copies), starting or cancelling experiments ``experiment:run``, running
tools live besides ``experiment:live_tools`` — each checked for the end user the API client
acts for (``X-Harness-User``), as ``policy:admin``. Every change is audited
(``experiments.audit``).

Items run on Celery workers (``experiments.run_item``), at most ``concurrency`` at once and
never more than the tenant's concurrent runs: the first are sent when the experiment starts,
and each item that ends sends the next one. An item refused admission (the tenant is busy)
waits and is sent again. An experiment's token budget is its own: once spent, the items not
started are not run and the experiment ends ``budget_exceeded``.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.errors import DomainError
from experiments import judge as judging
from experiments.audit import record_action
from experiments.candidate import LIVE_TOOLS_SCOPE, candidate_agent, check_candidate, live_tools
from experiments.datasets import (
    RunFilter,
    add_items,
    create_dataset,
    forget_runs,
    get_dataset,
    get_item,
    remove_item,
    set_expectations,
)
from experiments.errors import ExperimentError
from experiments.errors import ExperimentErrorCode as Code
from experiments.models import Experiment, ExperimentItem, ExperimentStatus, Verdict
from experiments.recorded import hand_over, take_back
from experiments.recordings import calls_of, recording_of
from harness.models import TERMINAL_STATUSES, Run, RunMode, RunStatus, Tenant
from harness.runs import RunRequest, cancel_run, create_run, execute_run
from policy import services as policy
from policy.errors import RateLimited, TenantBusy, TooManyConcurrentRuns

__all__ = [
    "DATASET_SCOPE",
    "EXPERIMENT_SCOPE",
    "LIVE_TOOLS_SCOPE",
    "RunFilter",
    "add_items",
    "calls_of",
    "cancel_experiment",
    "candidate_agent",
    "create_dataset",
    "forget_runs",
    "get_dataset",
    "get_experiment",
    "get_item",
    "recording_of",
    "remove_item",
    "run_item",
    "set_expectations",
    "start_experiment",
]

DATASET_SCOPE = "dataset:write"
EXPERIMENT_SCOPE = "experiment:run"
RUN_ITEM_TASK = "experiments.run_item"
DEFAULT_CONCURRENCY = 4
BUDGET_SPENT = "The experiment's token budget is spent: this item was not run."
logger = logging.getLogger(__name__)
PENDING = (ExperimentStatus.QUEUED, ExperimentStatus.RUNNING)
# Admission refusals that pass (the tenant is busy); a spent daily budget does not.
BUSY = (RateLimited, TooManyConcurrentRuns, TenantBusy)


def start_experiment(
    tenant: Tenant,
    dataset_ref: str,
    candidate: dict[str, Any],
    tools: Any = "recorded",
    actor: str = "",
    enqueue: bool = True,
    *,
    token_budget: int | None = None,
    concurrency: int | None = None,
    judge: dict[str, Any] | None = None,
) -> Experiment:
    """An experiment of every item of the dataset, audited; with ``enqueue`` its items are
    sent to Celery (``experiments.run_item``) as the concurrency allows, else the caller runs
    them (``run_item``). Raises ``unsupported_candidate``, ``live_tool_refused``,
    ``dataset_not_found``, ``dataset_empty``."""
    check_candidate(tenant.slug, candidate)
    judging.check_judge(judge)
    dataset = get_dataset(tenant, dataset_ref)
    items = list(dataset.items.all())
    if not items:
        raise ExperimentError(Code.DATASET_EMPTY, f"Dataset {dataset.name} has no items.")
    live = live_tools(tools, {item.agent for item in items}, candidate)
    window = min(
        concurrency or DEFAULT_CONCURRENCY,
        max(1, policy.tenant_limits(tenant.slug).max_concurrent_runs),
    )
    with transaction.atomic():
        experiment = Experiment.objects.create(
            tenant=tenant,
            dataset=dataset,
            candidate=candidate,
            tools="recorded" if not live else "live",
            live_tools=live,
            token_budget=token_budget,
            concurrency=window,
            judge=judge or {},
            created_by=actor,
        )
        ExperimentItem.objects.bulk_create(
            [ExperimentItem(experiment=experiment, item=item) for item in items]
        )
        record_action(
            tenant.slug,
            "experiment",
            experiment.id,
            actor,
            "experiment.started",
            dataset=str(dataset.id),
            candidate=candidate,
            live_tools=live,
            token_budget=token_budget,
        )
        if enqueue:
            transaction.on_commit(lambda: _send_next(experiment.id, window))
    return experiment


def _send_next(experiment_id: uuid.UUID, count: int = 1, countdown: float = 0) -> None:
    """Send up to ``count`` queued items never sent; each is claimed (``sent_at``) first, so
    two workers ending items at once send two different ones."""
    from harness.celery import app

    for _ in range(count):
        while True:
            row = (
                ExperimentItem.objects.filter(
                    experiment_id=experiment_id,
                    status=ExperimentStatus.QUEUED,
                    sent_at__isnull=True,
                )
                .order_by("item__position")
                .values_list("id", flat=True)
                .first()
            )
            if row is None:
                return
            if ExperimentItem.objects.filter(id=row, sent_at__isnull=True).update(
                sent_at=timezone.now()
            ):
                app.send_task(RUN_ITEM_TASK, args=[str(row)], countdown=countdown or None)
                break


def get_experiment(tenant: Tenant, experiment_id: str) -> Experiment:
    try:
        experiment = Experiment.objects.filter(
            tenant=tenant, id=uuid.UUID(str(experiment_id))
        ).first()
    except ValueError:
        experiment = None
    if experiment is None:
        raise ExperimentError(
            Code.EXPERIMENT_NOT_FOUND,
            f"No experiment {experiment_id} for this tenant.",
            {"experiment": str(experiment_id)},
        )
    return experiment


def run_item(experiment_item_id: str) -> ExperimentItem:
    """Run one item through the real engine as an experiment run, and score it. Safe to
    redeliver: only the caller that moves the item from queued runs it."""
    claimed = ExperimentItem.objects.filter(
        id=experiment_item_id, status=ExperimentStatus.QUEUED
    ).update(status=ExperimentStatus.RUNNING, started_at=timezone.now())
    row = ExperimentItem.objects.select_related("experiment__tenant", "item").get(
        id=experiment_item_id
    )
    if not claimed:
        return row
    experiment = row.experiment  # "running" once an item is claimed (queries.status_of)
    if experiment.cancel_requested_at:
        row.status = ExperimentStatus.CANCELLED
    elif _budget_spent(experiment):
        row.status, row.error = ExperimentStatus.CANCELLED, BUDGET_SPENT
        _stop_for_budget(experiment)
    else:
        try:
            _run_and_score(row)
        except BUSY as exc:
            if not row.sent_at:  # run in this process (the CLI): nothing sends it again
                row.status, row.verdict, row.error = (
                    ExperimentStatus.FAILED,
                    Verdict.ERROR,
                    exc.message,
                )
                return _finish_item(row)
            # The tenant is at its limits: wait as it says, and go again.
            ExperimentItem.objects.filter(id=row.id).update(
                status=ExperimentStatus.QUEUED, started_at=None, sent_at=None
            )
            _send_next(experiment.id, countdown=exc.retry_after_s)
            return row
        except Exception as exc:  # any failure is the item's: never a stuck experiment
            logger.warning("experiment item %s failed", row.id, exc_info=True)
            message = exc.message if isinstance(exc, DomainError) else str(exc)
            row.status, row.verdict, row.error = ExperimentStatus.FAILED, Verdict.ERROR, message
    return _finish_item(row)


def _finish_item(row: ExperimentItem) -> ExperimentItem:
    row.finished_at = timezone.now()
    row.save(update_fields=["run", "status", "verdict", "score", "error", "finished_at"])
    if row.sent_at:
        _send_next(row.experiment_id)
    _finish_if_done(row.experiment)
    return row


def _run_and_score(row: ExperimentItem) -> None:
    from experiments.scoring import score_item

    experiment = row.experiment
    recording = recording_of(row.item)
    run, _ = create_run(
        experiment.tenant,
        RunRequest(
            agent=row.item.agent,
            user_id=row.item.user_id,
            input=recording.get("input", row.item.input),
            mode=RunMode.SYNC,
            experiment=True,
            budget=_run_budget(experiment),
        ),
    )
    # Linked first: a worker that takes the run over finds its recording through the item.
    ExperimentItem.objects.filter(id=row.id).update(run=run)
    hand_over(str(run.id), experiment, recording.get("calls", []))
    try:
        run = execute_run(run.id) or Run.objects.get(id=run.id)
    finally:
        take_back(str(run.id))
    if run.status not in TERMINAL_STATUSES:  # held for an approval: not replayed yet
        run = cancel_run(run)
    row.run = run
    row.score = score_item(row.item, recording, run, tuple(experiment.live_tools))
    spent = run.prompt_tokens + run.completion_tokens
    if experiment.judge:
        row.score["judge"] = judging.judge_item(experiment.judge, row.item, recording, run)
        spent += row.score["judge"].get("tokens", 0)
    if experiment.token_budget is not None:  # what the API shows is summed from the scores
        Experiment.objects.filter(id=experiment.id).update(tokens_used=F("tokens_used") + spent)
        if run.status == RunStatus.BUDGET_EXCEEDED:
            _stop_for_budget(experiment)  # the experiment's budget was the run's: it is spent
    row.verdict = row.score["verdict"]
    row.status = ExperimentStatus.SUCCEEDED


def _budget_spent(experiment: Experiment) -> bool:
    if experiment.token_budget is None:
        return False
    used = Experiment.objects.filter(id=experiment.id).values_list("tokens_used", flat=True)[0]
    return used >= experiment.token_budget


def _run_budget(experiment: Experiment) -> dict[str, int] | None:
    """What is left of the experiment's budget, as the run's token budget (never above the
    tenant's per-run maximum, which a run may not ask beyond)."""
    if experiment.token_budget is None:
        return None
    used = Experiment.objects.filter(id=experiment.id).values_list("tokens_used", flat=True)[0]
    left = max(1, experiment.token_budget - used)
    ceiling = policy.tenant_limits(experiment.tenant.slug).max_tokens_per_run
    return {"max_tokens": left if ceiling is None else min(left, ceiling)}


def _stop_for_budget(experiment: Experiment) -> None:
    now = timezone.now()
    experiment.items.filter(status=ExperimentStatus.QUEUED).update(
        status=ExperimentStatus.CANCELLED, error=BUDGET_SPENT, finished_at=now
    )
    Experiment.objects.filter(id=experiment.id, status__in=PENDING).update(
        status=ExperimentStatus.BUDGET_EXCEEDED, finished_at=now
    )


def _finish_if_done(experiment: Experiment) -> None:
    """One statement: the experiment ends when none of its items is pending."""
    Experiment.objects.filter(id=experiment.id, status__in=PENDING).exclude(
        items__status__in=PENDING
    ).update(
        status=ExperimentStatus.CANCELLED
        if experiment.cancel_requested_at
        else ExperimentStatus.SUCCEEDED,
        finished_at=timezone.now(),
    )


def cancel_experiment(experiment: Experiment, actor: str = "") -> Experiment:
    """Items not started are not run; items running finish (their runs are ordinary runs).
    Audited once (a second cancel changes nothing)."""
    now = timezone.now()
    with transaction.atomic():
        first = Experiment.objects.filter(
            id=experiment.id, cancel_requested_at__isnull=True
        ).update(cancel_requested_at=now)
        if first:
            record_action(
                experiment.tenant.slug, "experiment", experiment.id, actor, "experiment.cancelled"
            )
    experiment.refresh_from_db()
    experiment.items.filter(status=ExperimentStatus.QUEUED).update(
        status=ExperimentStatus.CANCELLED, finished_at=now
    )
    _finish_if_done(experiment)
    experiment.refresh_from_db()
    return experiment
