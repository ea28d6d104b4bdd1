"""A run's spans as a waterfall: each span a row, indented under its parent, with a bar placed
at its start and as long as it lasted on the run's own time axis (model calls, tool calls,
policy checks, approval waits). Each row's attributes are kept as pretty JSON, shown only when
the row is opened."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# A bar never shorter than this share of the axis, so that a 0.1 ms policy check stays visible.
MIN_BAR_PERCENT = 0.4


@dataclass(frozen=True)
class WaterfallRow:
    span_id: str
    depth: int
    kind: str
    name: str
    status: str
    start_ms: float  # from the first span's start
    duration_ms: float
    offset_percent: float
    width_percent: float
    attributes: str  # pretty JSON


@dataclass(frozen=True)
class Waterfall:
    total_ms: float
    rows: list[WaterfallRow]


def build_waterfall(spans: list[dict[str, Any]]) -> Waterfall:
    """``spans`` as ``traces.queries.get_trace`` gives them (in sequence order)."""
    if not spans:
        return Waterfall(0.0, [])
    origin = min(_at(span["started_at"]) for span in spans)
    end = max(_at(span["started_at"]) + span["duration_ms"] / 1000 for span in spans)
    total_ms = max((end - origin) * 1000, 0.001)
    depths: dict[str, int] = {}
    rows = []
    for span in spans:
        parent = span.get("parent_span_id") or ""
        depth = depths[parent] + 1 if parent in depths else 0
        depths[span["span_id"]] = depth
        start_ms = (_at(span["started_at"]) - origin) * 1000
        offset = min(100 * start_ms / total_ms, 100 - MIN_BAR_PERCENT)
        width = max(100 * span["duration_ms"] / total_ms, MIN_BAR_PERCENT)
        rows.append(
            WaterfallRow(
                span_id=span["span_id"],
                depth=depth,
                kind=span["kind"],
                name=span["name"],
                status=span["status"],
                start_ms=start_ms,
                duration_ms=span["duration_ms"],
                offset_percent=round(offset, 3),
                width_percent=round(min(width, 100 - offset), 3),
                attributes=json.dumps(
                    span["attributes"], indent=2, ensure_ascii=False, sort_keys=True, default=str
                ),
            )
        )
    return Waterfall(total_ms, rows)


def _at(moment: datetime) -> float:
    return moment.timestamp()
