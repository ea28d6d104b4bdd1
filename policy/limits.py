"""Tenant limits: admission of new runs, pacing of model calls, tool calls per run.

New runs are refused (429 with ``Retry-After``) before running ones are slowed: a new run is
turned away while the tenant's model calls of the last minute are at ``ADMISSION_HEADROOM`` of
its per-minute limit, so runs already in flight keep the rest; only when they use it up are
their model calls paced (they wait, they do not fail).
"""

from __future__ import annotations

import time
from decimal import Decimal

from django.conf import settings

from policy import budget
from policy.errors import RateLimited, TenantBusy, TooManyConcurrentRuns
from policy.limit_values import LimitValues
from policy.limiter import get_limiter
from policy.models import TenantLimits

ADMISSION_HEADROOM = 0.8
RUN_LEASE_S = 3600
# How often a running run refreshes its concurrency slot: far inside the lease.
SLOT_REFRESH_S = 60
COUNTER_TTL_S = 7 * 86_400
MINUTE_MS = 60_000


def tenant_limits(tenant: str) -> LimitValues:
    """The tenant's ``TenantLimits`` row over the deployment defaults (settings)."""
    row = TenantLimits.objects.filter(tenant=tenant).first()

    def pick(name: str, default: float | int | None) -> float | int | None:
        value = getattr(row, name, None) if row else None
        return default if value is None else value

    return LimitValues(
        runs_per_second=int(pick("runs_per_second", settings.HARNESS_TENANT_RUNS_PER_SECOND)),
        max_concurrent_runs=int(
            pick("max_concurrent_runs", settings.HARNESS_TENANT_MAX_CONCURRENT_RUNS)
        ),
        model_calls_per_minute=int(
            pick("model_calls_per_minute", settings.HARNESS_TENANT_MODEL_CALLS_PER_MINUTE)
        ),
        max_tokens_per_run=_positive(
            pick("max_tokens_per_run", settings.HARNESS_TENANT_MAX_TOKENS_PER_RUN)
        ),
        max_cost_per_run_micros=budget.usd_to_micros(pick("max_cost_per_run_usd", None)),
        max_tool_calls_per_run=_positive(
            pick("max_tool_calls_per_run", settings.HARNESS_TENANT_MAX_TOOL_CALLS_PER_RUN)
        ),
        daily_tokens=_positive(pick("daily_tokens", settings.HARNESS_TENANT_DAILY_TOKENS)),
        daily_cost_micros=budget.usd_to_micros(
            pick("daily_cost_usd", Decimal(str(settings.HARNESS_TENANT_DAILY_COST_USD)))
        ),
        daily_tool_calls=_positive(
            pick("daily_tool_calls", settings.HARNESS_TENANT_DAILY_TOOL_CALLS)
        ),
        alert_thresholds=tuple(
            sorted(set(pick("alert_thresholds", None) or settings.HARNESS_BUDGET_ALERT_THRESHOLDS))
        ),
        alert_url=(row.alert_url if row else "") or "",
    )


def _positive(value: float | int | None) -> int | None:
    return int(value) if value else None


def admit_run(tenant: str, run_id: str, limits: LimitValues | None = None) -> LimitValues:
    """Admit a new run or raise a 429 error with ``Retry-After``.

    Checks, in order: the tenant's daily budget, model-call headroom for runs in flight, new
    runs per second, concurrent runs (this run takes a slot; ``release_run`` frees it).
    ``limits``: the tenant's, if the caller read them already.
    """
    limits = limits or tenant_limits(tenant)
    budget.check_tenant_day(tenant, limits)
    limiter = get_limiter()
    used, retry_after = limiter.rate_usage(f"model:{tenant}", MINUTE_MS)
    if used >= limits.model_calls_per_minute * ADMISSION_HEADROOM:
        raise TenantBusy(
            f"Tenant {tenant} is near its limit of {limits.model_calls_per_minute} model calls "
            f"per minute ({used} in the last minute); new runs wait so that running ones can "
            "finish.",
            retry_after,
            {"limit": limits.model_calls_per_minute, "used": used, "limiter": limiter.name},
        )
    rate = limiter.hit_rate(f"runs:{tenant}", limits.runs_per_second, 1000)
    if not rate.allowed:
        raise RateLimited(
            f"Tenant {tenant} may start {limits.runs_per_second} runs per second.",
            rate.retry_after_s,
            {"limit": limits.runs_per_second, "limiter": limiter.name},
        )
    if not limiter.acquire_slot(
        f"concurrent:{tenant}", run_id, limits.max_concurrent_runs, RUN_LEASE_S
    ):
        raise TooManyConcurrentRuns(
            f"Tenant {tenant} has {limits.max_concurrent_runs} runs in flight, its limit.",
            1,
            {"limit": limits.max_concurrent_runs, "limiter": limiter.name},
        )
    return limits


def resume_run_slot(tenant: str, run_id: str) -> None:
    """A run resuming after an approval takes its slot back, over the limit if need be:
    it was admitted once and is not refused a second time."""
    get_limiter().acquire_slot(f"concurrent:{tenant}", run_id, 1, RUN_LEASE_S, force=True)


def release_run(tenant: str, run_id: str) -> None:
    """Free the run's concurrency slot (it ended or waits for a human)."""
    get_limiter().release_slot(f"concurrent:{tenant}", run_id)


def pace_model_call(
    tenant: str,
    run_id: str,
    max_wait_s: float | None,
    limit: int | None = None,
    refresh_slot: bool = True,
) -> bool:
    """Take one of the tenant's model calls per minute, waiting for one if need be.

    Returns False when none frees up within ``max_wait_s`` (the run's remaining wall time).
    Also refreshes the run's concurrency lease, unless ``refresh_slot`` is False (a driver
    that refreshed it lately: the lease lasts ``RUN_LEASE_S``). ``limit``: the tenant's model
    calls per minute when the caller already knows it (a driver reads the tenant's limits
    once).
    """
    limiter = get_limiter()
    if limit is None:
        limit = tenant_limits(tenant).model_calls_per_minute
    if refresh_slot:
        limiter.acquire_slot(f"concurrent:{tenant}", run_id, 1, RUN_LEASE_S, force=True)
    deadline = None if max_wait_s is None else time.monotonic() + max_wait_s
    while True:
        rate = limiter.hit_rate(f"model:{tenant}", limit, MINUTE_MS)
        if rate.allowed:
            return True
        wait = max(rate.retry_after_s, 0.05)
        if deadline is not None and time.monotonic() + wait > deadline:
            return False
        time.sleep(wait)


def clear_limits() -> None:
    """Forget every shared counter, rate and slot (operators, and tests between cases)."""
    get_limiter().clear()
