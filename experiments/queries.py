"""Reading datasets and experiments as the API shows them (masked fields only)."""

from __future__ import annotations

from typing import Any

from experiments.models import Dataset, DatasetItem, Experiment, ExperimentStatus, Verdict

PENDING = (ExperimentStatus.QUEUED, ExperimentStatus.RUNNING)


def dataset_summary(dataset: Dataset, items: int | None = None) -> dict[str, Any]:
    return {
        "id": str(dataset.id),
        "name": dataset.name,
        "items": dataset.items.count() if items is None else items,
        "created_by": dataset.created_by,
        "created_at": dataset.created_at,
    }


def list_datasets(tenant: Any) -> list[dict[str, Any]]:
    return [dataset_summary(d) for d in Dataset.objects.filter(tenant=tenant)]


def item_view(item: DatasetItem) -> dict[str, Any]:
    return {
        "id": str(item.id),
        "run_id": str(item.run_id),
        "agent": item.agent,
        "user": item.user_id,
        "input": item.input,
        "status": item.status,
        "outcome": item.outcome,
        "answer": item.answer,
        "tool_calls": item.tool_calls,
        "expectations": item.expectations,
    }


def dataset_detail(dataset: Dataset) -> dict[str, Any]:
    items = [item_view(item) for item in dataset.items.all()]
    return dataset_summary(dataset, len(items)) | {"item_list": items}


def experiment_detail(experiment: Experiment) -> dict[str, Any]:
    rows = list(experiment.items.select_related("item").all())
    done = [row for row in rows if row.status not in PENDING]
    verdicts = [row.verdict for row in done]
    scores = [row.score for row in done if row.score]
    return {
        "id": str(experiment.id),
        "dataset": str(experiment.dataset_id),
        "candidate": experiment.candidate,
        "tools": experiment.tools,
        "status": experiment.status,
        "progress": {"done": len(done), "total": len(rows)},
        "summary": {
            "items": len(rows),
            "same": verdicts.count(Verdict.SAME),
            "diverged": verdicts.count(Verdict.DIVERGED),
            "regressions": verdicts.count(Verdict.REGRESSION),
            "improved": verdicts.count(Verdict.IMPROVED),
            "errors": verdicts.count(Verdict.ERROR),
            "off_record": sum(s["tool_calls"]["off_record"] for s in scores),
            "executed": sum(s["tool_calls"]["executed"] for s in scores),
            "tokens": {
                "baseline": sum(s["tokens"]["baseline"] for s in scores),
                "candidate": sum(s["tokens"]["candidate"] for s in scores),
            },
        },
        "items": [
            {
                "item": str(row.item_id),
                "run_id": str(row.item.run_id),
                "experiment_run_id": str(row.run_id) if row.run_id else None,
                "status": row.status,
                "verdict": row.verdict or None,
                "error": row.error or None,
            }
            | {
                key: row.score.get(key)
                for key in (
                    "trajectory",
                    "first_divergence",
                    "answer",
                    "outcome",
                    "tool_calls",
                    "assertions",
                    "tokens",
                )
            }
            for row in rows
        ],
        "created_by": experiment.created_by,
        "created_at": experiment.created_at,
        "finished_at": experiment.finished_at,
    }
