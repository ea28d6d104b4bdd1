"""Cost reports: tokens and cost of runs per tenant, agent, user and day.

Costs are what the gateway priced each model call at (``Run.cost_usd``, summed at every
checkpoint of the loop; ``gateway.pricing`` says where a price comes from). Calls the gateway
had no price for add no cost and are counted in ``unpriced_calls``: a row whose cost is 0 with
unpriced calls has no price, it is not free.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate

from harness.models import Run

# Report dimension → the column it groups by.
DIMENSIONS = {
    "tenant": "tenant__slug",
    "agent": "agent",
    "model": "model_route",
    "user": "user_id",
    "day": "day",
}


@dataclass(frozen=True)
class CostFilter:
    """Which runs a report covers: tenants (``None``: all), and created from/to (inclusive
    UTC days)."""

    tenants: Iterable[str] | None = None
    start: date | None = None
    end: date | None = None
    agent: str | None = None
    user: str | None = None
    model: str | None = None


def cost_report(group_by: Sequence[str], where: CostFilter) -> dict[str, Any]:
    """Runs, tokens and cost grouped by ``group_by`` (a subset of ``DIMENSIONS``; columns
    come in that order), ordered by the groups; plus the totals over every row. Reads only."""
    unknown = [name for name in group_by if name not in DIMENSIONS]
    if unknown:
        raise ValueError(f"unknown dimensions: {', '.join(unknown)}")
    group_by = [name for name in DIMENSIONS if name in group_by]  # columns in a fixed order
    runs = Run.objects.filter(_conditions(where)).annotate(day=TruncDate("created_at"))
    columns = [DIMENSIONS[name] for name in group_by]
    measures = {
        "runs": Count("id"),
        "prompt_tokens": Sum("prompt_tokens"),
        "completion_tokens": Sum("completion_tokens"),
        "cost_usd": Sum("cost_usd"),
        "unpriced_calls": Sum("unpriced_calls"),
    }
    rows = runs.values(*columns).annotate(**measures).order_by(*columns) if columns else []
    totals = runs.aggregate(**measures)
    return {
        "group_by": group_by,
        "from": where.start,
        "to": where.end,
        "rows": [_row(row, group_by) for row in rows],
        "totals": _measures(totals),
    }


def _conditions(where: CostFilter) -> Q:
    q = Q(experiment=False)  # experiment runs are not production figures
    if where.tenants is not None:
        q &= Q(tenant__slug__in=list(where.tenants))
    if where.start is not None:
        q &= Q(created_at__date__gte=where.start)
    if where.end is not None:
        q &= Q(created_at__date__lte=where.end)
    if where.agent:
        q &= Q(agent=where.agent)
    if where.user:
        q &= Q(user_id=where.user)
    if where.model:
        q &= Q(model_route=where.model)
    return q


def _row(row: dict[str, Any], group_by: list[str]) -> dict[str, Any]:
    keys = {name: row[DIMENSIONS[name]] for name in group_by}
    return keys | _measures(row)


def _measures(row: dict[str, Any]) -> dict[str, Any]:
    prompt = row["prompt_tokens"] or 0
    completion = row["completion_tokens"] or 0
    return {
        "runs": row["runs"] or 0,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cost_usd": (row["cost_usd"] or Decimal(0)).quantize(Decimal("0.00000001")),
        "unpriced_calls": row["unpriced_calls"] or 0,
    }


__all__ = ["DIMENSIONS", "CostFilter", "cost_report"]
