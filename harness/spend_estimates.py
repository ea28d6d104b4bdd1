"""What a run of an agent is expected to spend, for budget-aware admission.

A run without a limit of its own, in a tenant with a daily budget, reserves this much of the
day when it is admitted (policy budget ``reserve_run``) and grows the hold only if it needs
more: the p95 of what the agent's last ``HISTORY_RUNS`` succeeded runs in the tenant spent,
plus one answer's reserve (a run's last call must fit ``HARNESS_COMPLETION_RESERVE_TOKENS`` on
top of what it spent before it); ``HARNESS_DEFAULT_RUN_RESERVE_TOKENS`` until the agent has
such a run. One indexed query (tenant, status, created_at), kept ``CACHE_S`` per process.
"""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING

from django.conf import settings

from gateway.services import estimate_cost_usd
from harness.agent_registry import AgentSpec
from harness.models import Run, RunStatus, Tenant
from policy import services as policy

if TYPE_CHECKING:
    from policy.limits import LimitValues

HISTORY_RUNS = 50
CACHE_S = 10.0

_cache: dict[tuple[str, str], tuple[float, policy.RunEstimate]] = {}
_lock = threading.Lock()


def run_estimate(
    tenant: Tenant, agent: AgentSpec, run_budget: policy.RunBudget, limits: LimitValues
) -> policy.RunEstimate | None:
    """The estimate a new run reserves, or None when it reserves none: no daily budget it
    would draw from without a limit of its own, or estimates switched off (the default of 0:
    each model call reserves from the day instead)."""
    default = settings.HARNESS_DEFAULT_RUN_RESERVE_TOKENS
    unbounded = (limits.daily_tokens is not None and run_budget.max_tokens is None) or (
        limits.daily_cost_micros is not None and run_budget.max_cost_micros is None
    )
    if not default or not unbounded:
        return None
    key = (tenant.slug, agent.name)
    now = time.monotonic()
    with _lock:
        cached = _cache.get(key)
    if cached is not None and now - cached[0] < CACHE_S:
        return cached[1]
    history = list(
        Run.objects.filter(tenant=tenant, agent=agent.name, status=RunStatus.SUCCEEDED)
        .order_by("-created_at")
        .values_list("prompt_tokens", "completion_tokens", "cost_usd")[:HISTORY_RUNS]
    )
    reserve = settings.HARNESS_COMPLETION_RESERVE_TOKENS
    route = agent.model or None
    if not history:
        # Not cached: an agent's first runs finish soon, and their history should count then.
        answer = min(reserve, default)
        return policy.RunEstimate(
            tokens=default,
            cost_micros=_micros(estimate_cost_usd(route, default - answer, answer)),
        )
    estimate = policy.RunEstimate(
        tokens=p95([p + c for p, c, _ in history]) + reserve,
        cost_micros=p95([_micros(cost) for _, _, cost in history])
        + _micros(estimate_cost_usd(route, 0, reserve)),
    )
    with _lock:
        _cache[key] = (now, estimate)
    return estimate


def forget_estimates() -> None:
    """Drop the cached estimates (tests; a deployment needs no such thing)."""
    with _lock:
        _cache.clear()


def p95(values: list[int]) -> int:
    """The nearest-rank 95th percentile (the largest value of fewer than 20)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _micros(usd: object) -> int:
    return policy.usd_to_micros(usd) or 0
