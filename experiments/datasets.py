"""Datasets: named, tenant-scoped lists of recorded runs (docs/experiments.md).

Items are made from run ids or a filter over the tenant's ended production runs (agent,
status, outcome, time range, information-flow label). Each item copies the run's masked fields
for reading and seals the clear recording (input, calls with results, answer) an experiment
answers tools from. Every change is audited (``experiments.audit``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from experiments.audit import record_action
from experiments.errors import ExperimentError
from experiments.errors import ExperimentErrorCode as Code
from experiments.models import Dataset, DatasetItem
from experiments.recordings import item_of
from harness.models import TERMINAL_STATUSES, Run, Tenant
from harness.queries import access_run_by_id
from policy import services as policy

MAX_ITEMS_PER_REQUEST = 1000


@dataclass(frozen=True)
class RunFilter:
    """Which ended production runs of the tenant to take; empty fields do not filter."""

    agent: str = ""
    status: tuple[str, ...] = ()
    outcome: tuple[str, ...] = ()
    created_after: datetime | None = None
    created_before: datetime | None = None
    label: str = ""
    limit: int = 100

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunFilter:
        def many(value: Any) -> tuple[str, ...]:
            return tuple([value] if isinstance(value, str) else value or ())

        return cls(
            agent=data.get("agent") or "",
            status=many(data.get("status")),
            outcome=many(data.get("outcome")),
            created_after=data.get("created_after"),
            created_before=data.get("created_before"),
            label=data.get("label") or "",
            limit=data.get("limit") or 100,
        )

    def runs(self, tenant: Tenant) -> list[Run]:
        """The newest matching runs first, at most ``limit``."""
        if self.created_after and self.created_before and self.created_after > self.created_before:
            raise ExperimentError(
                Code.INVALID_RANGE,
                "created_after is later than created_before: the range is empty.",
                {
                    "created_after": str(self.created_after),
                    "created_before": str(self.created_before),
                },
            )
        runs = Run.objects.filter(tenant=tenant, experiment=False, status__in=TERMINAL_STATUSES)
        if self.agent:
            runs = runs.filter(agent=self.agent)
        if self.status:
            runs = runs.filter(status__in=self.status)
        if self.outcome:
            runs = runs.filter(outcome__in=self.outcome)
        if self.created_after:
            runs = runs.filter(created_at__gte=self.created_after)
        if self.created_before:
            runs = runs.filter(created_at__lt=self.created_before)
        if self.label:
            runs = runs.filter(id__in=policy.run_ids_holding(self.label))
        return list(runs.order_by("-created_at")[: min(self.limit, MAX_ITEMS_PER_REQUEST)])


def create_dataset(
    tenant: Tenant,
    name: str,
    run_ids: Iterable[str],
    actor: str,
    run_filter: RunFilter | None = None,
) -> Dataset:
    """A dataset of the tenant's ended runs: the ids given, then those the filter matches
    (another tenant's run is not found, 404). Audited."""
    runs = _runs(tenant, run_ids, run_filter)
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(tenant=tenant, name=name, created_by=actor)
            _add(dataset, runs, 0)
            record_action(
                tenant.slug,
                "dataset",
                dataset.id,
                actor,
                "dataset.created",
                name=name,
                runs=[str(run.id) for run in runs],
            )
    except IntegrityError as exc:
        raise ExperimentError(
            Code.DATASET_EXISTS, f"A dataset named {name!r} exists.", {"name": name}
        ) from exc
    return dataset


def add_items(
    dataset: Dataset, run_ids: Iterable[str], actor: str, run_filter: RunFilter | None = None
) -> list[DatasetItem]:
    """Add runs to a dataset; a run already in it is left as it is. Audited. Neither ids nor
    a filter is ``nothing_to_add`` (422)."""
    run_ids = list(run_ids)
    if not run_ids and run_filter is None:
        raise ExperimentError(
            Code.NOTHING_TO_ADD, 'Name runs ("runs") or a filter ("filter") to add.'
        )
    runs = _runs(dataset.tenant, run_ids, run_filter)
    present = set(dataset.items.values_list("run_id", flat=True))
    runs = [run for run in runs if run.id not in present]
    with transaction.atomic():
        last = dataset.items.aggregate(last=Max("position"))["last"]
        added = _add(dataset, runs, 0 if last is None else last + 1)
        record_action(
            dataset.tenant.slug,
            "dataset",
            dataset.id,
            actor,
            "dataset.items_added",
            runs=[str(run.id) for run in runs],
        )
    return added


def remove_item(dataset: Dataset, item_id: str, actor: str) -> None:
    item = get_item(dataset, item_id)
    with transaction.atomic():
        item.delete()
        record_action(
            dataset.tenant.slug,
            "dataset",
            dataset.id,
            actor,
            "dataset.item_removed",
            item=str(item_id),
            run=str(item.run_id),
        )


def set_expectations(item: DatasetItem, expectations: dict[str, Any], actor: str) -> DatasetItem:
    with transaction.atomic():
        item.expectations = expectations
        item.save(update_fields=["expectations"])
        record_action(
            item.dataset.tenant.slug,
            "dataset",
            item.dataset_id,
            actor,
            "dataset.expectations_set",
            item=str(item.id),
            # What was set, not the values (a reference answer may quote clear data).
            expectations=sorted(expectations),
        )
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


def forget_runs(request_ids: Iterable[str]) -> int:
    """Retention deleted these runs' traces: their items' copies go too (returns how many)."""
    deleted, _ = DatasetItem.objects.filter(run__request_id__in=list(request_ids)).delete()
    return deleted


def _runs(tenant: Tenant, run_ids: Iterable[str], run_filter: RunFilter | None) -> list[Run]:
    runs = [_recorded_run(tenant, run_id) for run_id in run_ids]
    if run_filter is not None:
        runs.extend(run_filter.runs(tenant))
    return list(dict.fromkeys(runs))


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
    items = [item_of(dataset, run, first + i) for i, run in enumerate(runs)]
    return DatasetItem.objects.bulk_create(items)
