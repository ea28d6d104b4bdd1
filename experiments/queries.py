"""Reading datasets and experiments as the API and the console show them (masked fields only)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from typing import Any

from experiments.models import (
    Dataset,
    DatasetItem,
    Experiment,
    ExperimentItem,
    ExperimentStatus,
    Verdict,
)

PENDING = (ExperimentStatus.QUEUED, ExperimentStatus.RUNNING)
SCORE_FIELDS = (
    "trajectory",
    "first_divergence",
    "answer",
    "outcome",
    "tool_calls",
    "assertions",
    "tokens",
    "cost_usd",
    "latency_ms",
    "steps",
    "judge",
)


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


def experiment_rows(experiment: Experiment) -> list[ExperimentItem]:
    return list(experiment.items.select_related("item").all())


def median(values: list[float | int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(statistics.median(known)) if known else None


def summary(rows: list[ExperimentItem]) -> dict[str, Any]:
    """Counts by verdict, and what the items cost, baseline against candidate."""
    done = [row for row in rows if row.status not in PENDING]
    verdicts = [row.verdict for row in done]
    scores = [row.score for row in done if row.score]

    def total(key: str, side: str) -> float:
        return sum(s[key][side] or 0 for s in scores if s.get(key))

    judged = [s["judge"]["verdict"] for s in scores if s.get("judge")]
    return {
        "items": len(rows),
        "same": verdicts.count(Verdict.SAME),
        "diverged": verdicts.count(Verdict.DIVERGED),
        "regressions": verdicts.count(Verdict.REGRESSION),
        "improved": verdicts.count(Verdict.IMPROVED),
        "errors": verdicts.count(Verdict.ERROR),
        "off_record": sum(s["tool_calls"]["off_record"] for s in scores),
        "executed": sum(s["tool_calls"]["executed"] for s in scores),
        "tokens": {
            "baseline": int(total("tokens", "baseline")),
            "candidate": int(total("tokens", "candidate")),
        },
        "cost_usd": {
            "baseline": round(total("cost_usd", "baseline"), 8),
            "candidate": round(total("cost_usd", "candidate"), 8),
        },
        "latency_ms": {
            side: median([(s.get("latency_ms") or {}).get(side) for s in scores])
            for side in ("baseline", "candidate")
        },
        "judge": {
            "pass": judged.count("pass"),
            "fail": judged.count("fail"),
            "other": len(judged) - judged.count("pass") - judged.count("fail"),
        }
        if judged
        else None,
    }


def item_result(row: ExperimentItem) -> dict[str, Any]:
    return {
        "item": str(row.item_id),
        "run_id": str(row.item.run_id),
        "experiment_run_id": str(row.run_id) if row.run_id else None,
        "status": row.status,
        "verdict": row.verdict or None,
        "error": row.error or None,
    } | {key: row.score.get(key) for key in SCORE_FIELDS}


def status_of(experiment: Experiment, rows: list[ExperimentItem]) -> str:
    """``running`` once an item was claimed (the row stays ``queued`` until it ends: one
    write less per item)."""
    if experiment.status == ExperimentStatus.QUEUED and any(
        row.status != ExperimentStatus.QUEUED for row in rows
    ):
        return ExperimentStatus.RUNNING
    return experiment.status


def tokens_used(experiment: Experiment, rows: list[ExperimentItem]) -> int:
    """What the items' runs and the judge spent (the budget's own count when there is one:
    it is what the budget is checked against)."""
    if experiment.token_budget is not None:
        return experiment.tokens_used
    return sum(
        (row.score.get("tokens") or {}).get("candidate", 0)
        + (row.score.get("judge") or {}).get("tokens", 0)
        for row in rows
        if row.score
    )


def experiment_summary(experiment: Experiment, rows: list[ExperimentItem]) -> dict[str, Any]:
    done = sum(1 for row in rows if row.status not in PENDING)
    return {
        "id": str(experiment.id),
        "dataset": str(experiment.dataset_id),
        "candidate": experiment.candidate,
        "tools": {"live": experiment.live_tools} if experiment.live_tools else "recorded",
        "status": status_of(experiment, rows),
        "progress": {"done": done, "total": len(rows)},
        "budget": {"tokens": experiment.token_budget, "used": tokens_used(experiment, rows)},
        "judge": experiment.judge or None,
        "created_by": experiment.created_by,
        "created_at": experiment.created_at,
        "finished_at": experiment.finished_at,
    }


def experiment_detail(experiment: Experiment) -> dict[str, Any]:
    rows = experiment_rows(experiment)
    return experiment_summary(experiment, rows) | {
        "summary": summary(rows),
        "items": [item_result(row) for row in rows],
    }


def list_experiments(tenant: Any) -> list[dict[str, Any]]:
    experiments = Experiment.objects.filter(tenant=tenant).prefetch_related("items")
    return [experiment_summary(e, list(e.items.all())) for e in experiments[:200]]


def export_lines(experiment: Experiment) -> Iterator[str]:
    """JSON Lines: the experiment (``"type": "experiment"``, with its summary), then one line
    per item (``"type": "item"``)."""
    rows = experiment_rows(experiment)
    head = experiment_summary(experiment, rows) | {"summary": summary(rows)}
    yield json.dumps({"type": "experiment", **head}, default=str, ensure_ascii=False) + "\n"
    for row in rows:
        yield (
            json.dumps({"type": "item", **item_result(row)}, default=str, ensure_ascii=False) + "\n"
        )
