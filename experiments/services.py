"""Datasets from recorded runs, and experiments that re-execute them hermetically.

Who may: making and editing datasets needs the scope ``dataset:write`` (they hold clear data
from the runs' sealed copies), starting or cancelling experiments ``experiment:run`` — both
checked for the end user the API client acts for (``X-Harness-User``), as ``policy:admin``.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from core.errors import DomainError
from experiments.errors import ExperimentError
from experiments.errors import ExperimentErrorCode as Code
from experiments.models import (
    Dataset,
    DatasetItem,
    Experiment,
    ExperimentItem,
    ExperimentStatus,
    Verdict,
)
from experiments.recorded import Recording, calls_of, recorded_registry
from experiments.scoring import score_item
from harness.agent_registry import AgentSpec
from harness.models import TERMINAL_STATUSES, Run, RunMode, Tenant
from harness.queries import access_run_by_id
from harness.runs import RunRequest, cancel_run, create_run, execute_run
from tools.registry import ToolRegistry
from traces.services import seal, unseal

DATASET_SCOPE = "dataset:write"
EXPERIMENT_SCOPE = "experiment:run"
RUN_ITEM_TASK = "experiments.run_item"
logger = logging.getLogger(__name__)
CANDIDATE_KEYS = {"model", "system_prompt"}  # applied so far (README "Experiments")


# --- datasets --------------------------------------------------------------------------------


def create_dataset(tenant: Tenant, name: str, run_ids: Iterable[str], actor: str) -> Dataset:
    """A dataset of the tenant's recorded runs; another tenant's run is not found (404)."""
    runs = list(dict.fromkeys(_recorded_run(tenant, run_id) for run_id in run_ids))
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(tenant=tenant, name=name, created_by=actor)
            _add(dataset, runs, 0)
    except IntegrityError as exc:
        raise ExperimentError(
            Code.DATASET_EXISTS, f"A dataset named {name!r} exists.", {"name": name}
        ) from exc
    return dataset


def add_items(dataset: Dataset, run_ids: Iterable[str]) -> list[DatasetItem]:
    """Add runs to a dataset; a run already in it is left as it is."""
    runs = [_recorded_run(dataset.tenant, run_id) for run_id in run_ids]
    present = set(dataset.items.values_list("run_id", flat=True))
    runs = [run for run in dict.fromkeys(runs) if run.id not in present]
    with transaction.atomic():
        last = dataset.items.aggregate(last=Max("position"))["last"]
        return _add(dataset, runs, 0 if last is None else last + 1)


def remove_item(dataset: Dataset, item_id: str) -> None:
    get_item(dataset, item_id).delete()


def set_expectations(item: DatasetItem, expectations: dict[str, Any]) -> DatasetItem:
    item.expectations = expectations
    item.save(update_fields=["expectations"])
    return item


def get_dataset(tenant: Tenant, ref: str) -> Dataset:
    """The tenant's dataset by id or name; another tenant's is not found."""
    query = Dataset.objects.filter(tenant=tenant)
    try:
        dataset = query.filter(id=uuid.UUID(str(ref))).first()
    except ValueError:
        dataset = None
    dataset = dataset or query.filter(name=str(ref)).first()
    if dataset is None:
        raise ExperimentError(
            Code.DATASET_NOT_FOUND, f"No dataset {ref} for this tenant.", {"dataset": str(ref)}
        )
    return dataset


def get_item(dataset: Dataset, item_id: str) -> DatasetItem:
    try:
        item = dataset.items.filter(id=uuid.UUID(str(item_id))).first()
    except ValueError:
        item = None
    if item is None:
        raise ExperimentError(
            Code.DATASET_ITEM_NOT_FOUND, f"No item {item_id} in this dataset.", {"item": item_id}
        )
    return item


def recording_of(item: DatasetItem) -> dict[str, Any]:
    return unseal(item.recording, None) or {}


def _recorded_run(tenant: Tenant, run_id: str) -> Run:
    run = access_run_by_id(tenant, run_id)
    if run.status not in TERMINAL_STATUSES:
        raise ExperimentError(
            Code.RUN_NOT_RECORDED,
            f"Run {run.id} is {run.status}: only ended runs can be added to a dataset.",
            {"run_id": str(run.id), "status": run.status},
        )
    return run


def _add(dataset: Dataset, runs: list[Run], first: int) -> list[DatasetItem]:
    items = [_item_of(dataset, run, first + i) for i, run in enumerate(runs)]
    return DatasetItem.objects.bulk_create(items)


def _item_of(dataset: Dataset, run: Run, position: int) -> DatasetItem:
    # Replay's reading of the recording: the sealed conversation, else the masked audit.
    from harness.replay.run import _recorded_conversation

    recorded = _recorded_conversation(run)
    messages = recorded.messages[recorded.start :]
    calls = calls_of(messages)
    clear_input = (unseal(run.sealed, None) or {}).get("input", run.input)
    latency = (
        (run.finished_at - run.started_at).total_seconds() * 1000
        if run.finished_at and run.started_at
        else None
    )
    return DatasetItem(
        dataset=dataset,
        run=run,
        position=position,
        agent=run.agent,
        user_id=run.user_id,
        input=run.input,
        status=run.status,
        outcome=run.outcome,
        stop_reason=run.stop_reason,
        answer=run.answer,
        tool_calls=[{"step": c["step"], "tool": c["tool"]} for c in calls],
        recording=seal(
            {
                "input": clear_input,
                "calls": calls,
                "answer": recorded.answer,
                "source": recorded.source,
            }
        ),
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        cost_usd=run.cost_usd,
        latency_ms=latency,
    )


# --- experiments ------------------------------------------------------------------------------


def check_candidate(candidate: dict[str, Any], tools: str) -> None:
    unknown = sorted(set(candidate) - CANDIDATE_KEYS)
    if unknown or not isinstance(candidate.get("model"), str) or not candidate["model"]:
        raise ExperimentError(
            Code.UNSUPPORTED_CANDIDATE,
            "A candidate is {'model': '<route>'} with an optional 'system_prompt'; "
            f"not supported yet: {', '.join(unknown) or 'a candidate without a model'}.",
            {"unsupported": unknown, "supported": sorted(CANDIDATE_KEYS)},
        )
    if not isinstance(candidate.get("system_prompt", ""), str):
        raise ExperimentError(Code.UNSUPPORTED_CANDIDATE, "system_prompt must be text.")
    if tools != "recorded":
        raise ExperimentError(
            Code.UNSUPPORTED_CANDIDATE,
            'Only "tools": "recorded" is supported so far ("live" is not built yet).',
            {"tools": tools},
        )


def candidate_agent(agent: AgentSpec, candidate: dict[str, Any]) -> AgentSpec:
    """The agent as the candidate changes it: its model route (no fallbacks: the candidate
    is what is measured) and its system prompt."""
    changes: dict[str, Any] = {"model": candidate["model"], "fallback_models": ()}
    if candidate.get("system_prompt"):
        changes["system_prompt"] = candidate["system_prompt"]
    return dataclasses.replace(agent, **changes)


def experiment_setup(
    run: Run, agent: AgentSpec, registry: ToolRegistry
) -> tuple[AgentSpec, ToolRegistry]:
    """The candidate's agent and the recorded tools of an experiment run (handed to the
    driver at start-up: ``experiments.apps``)."""
    item = ExperimentItem.objects.select_related("experiment", "item").filter(run=run).first()
    if item is None:  # never run tools for real: the run fails as misconfigured
        raise ExperimentError(
            Code.EXPERIMENT_RUN_UNLINKED,
            f"Experiment run {run.id} has no experiment item: no recording to answer from.",
        )
    recording = recording_of(item.item)
    return candidate_agent(agent, item.experiment.candidate), recorded_registry(
        registry, Recording(recording.get("calls", []))
    )


def start_experiment(
    tenant: Tenant,
    dataset_ref: str,
    candidate: dict[str, Any],
    tools: str = "recorded",
    actor: str = "",
    enqueue: bool = True,
) -> Experiment:
    """An experiment of every item of the dataset; with ``enqueue`` each item is a Celery
    task (``experiments.run_item``), else the caller runs them (``run_item``)."""
    check_candidate(candidate, tools)
    dataset = get_dataset(tenant, dataset_ref)
    items = list(dataset.items.all())
    if not items:
        raise ExperimentError(Code.DATASET_EMPTY, f"Dataset {dataset.name} has no items.")
    with transaction.atomic():
        experiment = Experiment.objects.create(
            tenant=tenant, dataset=dataset, candidate=candidate, tools=tools, created_by=actor
        )
        rows = ExperimentItem.objects.bulk_create(
            [ExperimentItem(experiment=experiment, item=item) for item in items]
        )
        if enqueue:
            ids = [str(row.id) for row in rows]
            transaction.on_commit(lambda: _send(ids))
    return experiment


def _send(ids: list[str]) -> None:
    from harness.celery import app

    for item_id in ids:
        app.send_task(RUN_ITEM_TASK, args=[item_id])


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

    now = timezone.now()
    claimed = ExperimentItem.objects.filter(
        id=experiment_item_id, status=ExperimentStatus.QUEUED
    ).update(status=ExperimentStatus.RUNNING, started_at=now)
    row = ExperimentItem.objects.select_related("experiment__tenant", "item").get(
        id=experiment_item_id
    )
    if not claimed:
        return row
    experiment = row.experiment
    if experiment.status == ExperimentStatus.QUEUED:
        Experiment.objects.filter(id=experiment.id, status=ExperimentStatus.QUEUED).update(
            status=ExperimentStatus.RUNNING
        )
    if experiment.cancel_requested_at:
        row.status = ExperimentStatus.CANCELLED
    else:
        try:
            recording = recording_of(row.item)
            run, _ = create_run(
                experiment.tenant,
                RunRequest(
                    agent=row.item.agent,
                    user_id=row.item.user_id,
                    input=recording.get("input", row.item.input),
                    mode=RunMode.SYNC,
                    experiment=True,
                ),
            )
            ExperimentItem.objects.filter(id=row.id).update(run=run)
            run = execute_run(run.id) or Run.objects.get(id=run.id)
            if run.status not in TERMINAL_STATUSES:  # held for an approval: not replayed yet
                run = cancel_run(run)
            row.run = run
            row.score = score_item(row.item, recording, run)
            row.verdict = row.score["verdict"]
            row.status = ExperimentStatus.SUCCEEDED
        except Exception as exc:  # any failure is the item's: never a stuck experiment
            logger.warning("experiment item %s failed", row.id, exc_info=True)
            message = exc.message if isinstance(exc, DomainError) else str(exc)
            row.status, row.verdict, row.error = ExperimentStatus.FAILED, Verdict.ERROR, message
    row.finished_at = timezone.now()
    row.save(update_fields=["run", "status", "verdict", "score", "error", "finished_at"])
    _finish_if_done(experiment)
    return row


def _finish_if_done(experiment: Experiment) -> None:
    pending = experiment.items.filter(
        status__in=[ExperimentStatus.QUEUED, ExperimentStatus.RUNNING]
    )
    if pending.exists():
        return
    Experiment.objects.filter(
        id=experiment.id, status__in=[ExperimentStatus.QUEUED, ExperimentStatus.RUNNING]
    ).update(
        status=ExperimentStatus.CANCELLED
        if experiment.cancel_requested_at
        else ExperimentStatus.SUCCEEDED,
        finished_at=timezone.now(),
    )


def cancel_experiment(experiment: Experiment) -> Experiment:
    """Items not started are not run; items running finish (their runs are ordinary runs)."""
    now = timezone.now()
    Experiment.objects.filter(id=experiment.id, cancel_requested_at__isnull=True).update(
        cancel_requested_at=now
    )
    experiment.refresh_from_db()
    experiment.items.filter(status=ExperimentStatus.QUEUED).update(
        status=ExperimentStatus.CANCELLED, finished_at=now
    )
    _finish_if_done(experiment)
    experiment.refresh_from_db()
    return experiment
