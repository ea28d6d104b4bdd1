"""Budget alerts: a threshold (e.g. 50 %, 80 %, 100 %) of a tenant's daily budget or of one
run's budget, crossed once per period.

A run's own thresholds are crossed in its driver's memory (one writer: the fenced driver), so
they are known exactly when a model call is counted. The day's thresholds are crossed by many
runs at once: each crossing is claimed by inserting a ``BudgetAlert`` row under a unique
constraint, so exactly one run announces it, however many cross it together.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from policy.models import BudgetAlert, BudgetLedger

MEASURES = ("tokens", "cost")


@dataclass(frozen=True)
class Crossing:
    """One threshold crossed: ``period`` is ``day:<date>`` or ``run:<id>``."""

    tenant: str
    period: str
    measure: str
    threshold: int
    used: int
    limit: int

    def event(self) -> dict[str, object]:
        """The ``budget.threshold`` event's data (cost in micro-USD)."""
        return {
            "period": self.period,
            "measure": self.measure,
            "threshold": self.threshold,
            "used": self.used,
            "limit": self.limit,
        }


def crossed(before: int, after: int, limit: int | None, thresholds: tuple[int, ...]) -> list[int]:
    """The thresholds a usage going from ``before`` to ``after`` of ``limit`` crossed."""
    if not limit or after <= before:
        return []
    return [t for t in thresholds if before * 100 < t * limit <= after * 100]


def run_crossings(
    tenant: str,
    run_id: str,
    measure: str,
    before: int,
    after: int,
    limit: int | None,
    thresholds: tuple[int, ...],
) -> list[Crossing]:
    """A run's own budget: the thresholds one counted model call crossed (no I/O)."""
    return [
        Crossing(tenant, f"run:{run_id}", measure, t, after, limit or 0)
        for t in crossed(before, after, limit, thresholds)
    ]


def claim_day_crossings(tenant: str, thresholds: tuple[int, ...]) -> list[Crossing]:
    """The tenant's day: read its usage (one query) and claim every threshold it has passed
    that no one announced yet (call inside the caller's transaction)."""
    day = timezone.now().date().isoformat()
    row = (
        BudgetLedger.objects.filter(key=f"tenant:{tenant}:{day}")
        .values("tokens_used", "tokens_limit", "cost_used_micros", "cost_limit_micros")
        .first()
    )
    if row is None or not thresholds:
        return []
    claimed = []
    usage = {
        "tokens": (row["tokens_used"], row["tokens_limit"]),
        "cost": (row["cost_used_micros"], row["cost_limit_micros"]),
    }
    for measure, (used, limit) in usage.items():
        for threshold in crossed(0, used, limit, thresholds):
            crossing = Crossing(tenant, f"day:{day}", measure, threshold, used, limit)
            if _claim(crossing):
                claimed.append(crossing)
    return claimed


def record_run_crossings(crossings: list[Crossing]) -> None:
    """Keep a run's crossings with the day's (one multi-row insert; already unique)."""
    BudgetAlert.objects.bulk_create([_row(c) for c in crossings], ignore_conflicts=True)


def _claim(crossing: Crossing) -> bool:
    try:
        with transaction.atomic():
            _row(crossing).save(force_insert=True)
    except IntegrityError:
        return False
    return True


def _row(crossing: Crossing) -> BudgetAlert:
    return BudgetAlert(
        tenant=crossing.tenant,
        period=crossing.period,
        measure=crossing.measure,
        threshold=crossing.threshold,
        used=crossing.used,
        limit=crossing.limit,
    )
