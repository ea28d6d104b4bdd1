"""What the console's experiment pages show (read only; masked data only).

- ``distributions``: cost, latency and steps per item, baseline against candidate: quartiles
  and a histogram over shared bins (so the two sides' bars compare).
- ``side_by_side``: one item's two trajectories, call by call, from the two runs' masked
  conversations, the first divergence marked, and the two answers diffed word by word.
- ``compare``: two experiments on one dataset, item by item.
"""

from __future__ import annotations

import difflib
import json
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from experiments.errors import ExperimentError
from experiments.errors import ExperimentErrorCode as Code
from experiments.models import Experiment, ExperimentItem
from experiments.queries import experiment_rows, status_of, summary
from experiments.recordings import calls_of
from gateway.messages import Message
from harness.models import Run

METRICS = (("cost_usd", "cost (USD)"), ("latency_ms", "latency (ms)"), ("steps", "steps"))
BINS = 6


@dataclass
class Distribution:
    metric: str
    label: str
    baseline: dict[str, float | None]
    candidate: dict[str, float | None]
    # [(bin label, baseline count, candidate count, baseline %, candidate %)]
    bins: list[tuple[str, int, int, int, int]] = field(default_factory=list)


def quartiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"min": None, "median": None, "max": None, "mean": None}
    return {
        "min": min(values),
        "median": float(statistics.median(values)),
        "max": max(values),
        "mean": float(statistics.fmean(values)),
    }


def distributions(rows: list[ExperimentItem]) -> list[Distribution]:
    scores = [row.score for row in rows if row.score]
    result = []
    for metric, label in METRICS:
        sides = {
            side: [
                float(s[metric][side])
                for s in scores
                if s.get(metric) and s[metric].get(side) is not None
            ]
            for side in ("baseline", "candidate")
        }
        shown = Distribution(
            metric, label, quartiles(sides["baseline"]), quartiles(sides["candidate"])
        )
        shown.bins = _histogram(sides["baseline"], sides["candidate"])
        result.append(shown)
    return result


Bins = list[tuple[str, int, int, int, int]]


def _histogram(baseline: list[float], candidate: list[float]) -> Bins:
    values = baseline + candidate
    if not values:
        return []
    low, high = min(values), max(values)
    width = (high - low) / BINS or 1.0
    count = BINS if high > low else 1

    def counts(side: list[float]) -> list[int]:
        tally = [0] * count
        for value in side:
            tally[min(int((value - low) / width), count - 1)] += 1
        return tally

    b, c = counts(baseline), counts(candidate)
    most = max([*b, *c, 1])
    return [
        (
            f"{low + i * width:.4g} to {low + (i + 1) * width:.4g}",
            b[i],
            c[i],
            round(100 * b[i] / most),
            round(100 * c[i] / most),
        )
        for i in range(count)
    ]


def experiment_page(experiment: Experiment, verdict: str = "") -> dict[str, Any]:
    rows = experiment_rows(experiment)
    return {
        "status": status_of(experiment, rows),
        "summary": summary(rows),
        "distributions": distributions(rows),
        "rows": [row for row in rows if not verdict or row.verdict == verdict],
        "verdicts": sorted({row.verdict for row in rows if row.verdict}),
        "done": sum(1 for row in rows if row.finished_at),
        "total": len(rows),
    }


@dataclass
class CallPair:
    step: int
    baseline: dict[str, Any] | None
    candidate: dict[str, Any] | None
    first_divergence: bool = False


def masked_calls(run: Run | None) -> list[dict[str, Any]]:
    """A run's calls from its masked conversation (what a person may read)."""
    if run is None:
        return []
    calls = calls_of([Message.from_dict(m) for m in run.messages])
    for call in calls:  # shown as JSON, as the model wrote them
        call["arguments"] = json.dumps(call["arguments"], ensure_ascii=False, sort_keys=True)
    return calls


def side_by_side(row: ExperimentItem) -> dict[str, Any]:
    baseline = masked_calls(row.item.run)
    candidate = masked_calls(row.run)
    first = (row.score.get("first_divergence") or {}).get("step")
    pairs = [
        CallPair(
            step=i + 1,
            baseline=baseline[i] if i < len(baseline) else None,
            candidate=candidate[i] if i < len(candidate) else None,
            first_divergence=first == i + 1,
        )
        for i in range(max(len(baseline), len(candidate)))
    ]
    answer = row.score.get("answer") or {}
    return {
        "pairs": pairs,
        "answer_diff": word_diff(answer.get("baseline") or "", answer.get("candidate") or ""),
        "answer": answer,
    }


def word_diff(before: str, after: str) -> list[tuple[str, str]]:
    """``[(kind, text)]`` with kind ``equal``, ``removed`` or ``added``: ``before`` turned into
    ``after`` word by word (whitespace kept)."""
    a, b = re.findall(r"\S+|\s+", before), re.findall(r"\S+|\s+", after)
    parts: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            parts.append(("equal", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            parts.append(("removed", "".join(a[i1:i2])))
        if j2 > j1:
            parts.append(("added", "".join(b[j1:j2])))
    return parts


def compare(first: Experiment, second: Experiment) -> dict[str, Any]:
    """Two experiments of one dataset, item by item (a dataset item either lacks is shown
    with a blank side)."""
    if first.dataset_id != second.dataset_id:
        raise ExperimentError(
            Code.UNSUPPORTED_CANDIDATE,
            "Only experiments on the same dataset can be compared.",
            {"datasets": [str(first.dataset_id), str(second.dataset_id)]},
        )
    rows_a, rows_b = experiment_rows(first), experiment_rows(second)
    by_item = {row.item_id: row for row in rows_b}
    return {
        "summaries": (summary(rows_a), summary(rows_b)),
        "pairs": [(row, by_item.get(row.item_id)) for row in rows_a],
    }
