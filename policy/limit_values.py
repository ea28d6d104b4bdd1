"""A tenant's effective limits, as one value: read by ``policy.limits``, charged against by
``policy.budget`` (its own module so that neither imports the other for it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LimitValues:
    """A tenant's effective limits; ``None`` means unlimited."""

    runs_per_second: int
    max_concurrent_runs: int
    model_calls_per_minute: int
    max_tokens_per_run: int | None
    max_cost_per_run_micros: int | None
    max_tool_calls_per_run: int | None
    daily_tokens: int | None
    daily_cost_micros: int | None
    daily_tool_calls: int | None
    # Budget alerts: thresholds in percent (ascending), and where the day's alerts go.
    alert_thresholds: tuple[int, ...] = ()
    alert_url: str = ""
