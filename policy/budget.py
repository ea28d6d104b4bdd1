"""The budget ledger: tokens, cost, tool calls and wall time, per run and per tenant-day.

A run's row is read once by its driver, spent from in memory (the driver is the run's only
writer, fenced by its lease) and written when a driven segment ends (``RunLedger``). Each model
call must fit what the run has left: its prompt estimate plus
``HARNESS_COMPLETION_RESERVE_TOKENS`` for the answer. The tenant's day is charged with a
conditional ``UPDATE … SET reserved = reserved + n WHERE used + reserved + n <= limit``
(``_reserve_on_day``) at admission (``reserve_run``): a run with its own limit reserves that
limit; a run without one reserves what its agent is expected to spend (``RunEstimate``: the p95
of its recent runs, or ``HARNESS_DEFAULT_RUN_RESERVE_TOKENS``), and grows that hold by one such
UPDATE when a call would not fit it (``run_room``). What a run did not use goes back when it
ends. With ``HARNESS_DEFAULT_RUN_RESERVE_TOKENS=0`` a run without a limit reserves per model
call instead (``reserve_day``, settled as soon as the call is answered). PostgreSQL re-checks
the condition under the row lock and SQLite serialises writers, so concurrent runs (and
processes) can never both take the last tokens: spend exceeds a limit only by what a call uses
beyond its own reservation.

Lock order: the run row (the step's fenced UPDATE), then the tenant's day row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from policy.errors import BudgetAboveMaximum, TenantBudgetExhausted
from policy.limit_values import LimitValues
from policy.models import BudgetLedger

MICROS_PER_USD = 1_000_000


def usd_to_micros(value: Any) -> int | None:
    """USD (Decimal, float, str) to integer micro-USD; empty or zero means no limit."""
    if value in (None, "", 0):
        return None
    micros = int(Decimal(str(value)) * MICROS_PER_USD)
    return micros or None


def micros_to_usd(micros: int | None) -> float | None:
    return None if micros is None else round(micros / MICROS_PER_USD, 6)


# --- per-run budgets -------------------------------------------------------------------------


@dataclass(frozen=True)
class RunBudget:
    """A run's limits; ``None`` means unlimited."""

    max_tokens: int | None = None
    max_cost_micros: int | None = None
    max_tool_calls: int | None = None
    max_calls_per_tool: int | None = None
    deadline_s: float | None = None


REQUEST_KEYS = ("max_tokens", "max_cost_usd", "max_tool_calls", "max_calls_per_tool")


def resolve_run_budget(
    agent: RunBudget, requested: dict[str, Any] | None, limits: LimitValues
) -> RunBudget:
    """The agent's limits, lowered or raised by the request, never above the tenant's maximum.

    A request above the maximum is refused (``budget_above_maximum``); an agent default above
    it is capped silently.
    """
    requested = requested or {}
    ceilings = {
        "max_tokens": limits.max_tokens_per_run,
        "max_cost_usd": limits.max_cost_per_run_micros,
        "max_tool_calls": limits.max_tool_calls_per_run,
        "max_calls_per_tool": limits.max_tool_calls_per_run,
    }
    defaults = {
        "max_tokens": agent.max_tokens,
        "max_cost_usd": agent.max_cost_micros,
        "max_tool_calls": agent.max_tool_calls,
        "max_calls_per_tool": agent.max_calls_per_tool,
    }
    values: dict[str, int | None] = {}
    for key in REQUEST_KEYS:
        ceiling = ceilings[key]
        if requested.get(key) is not None:
            value = usd_to_micros(requested[key]) if key == "max_cost_usd" else int(requested[key])
            if ceiling is not None and (value is None or value > ceiling):
                shown = micros_to_usd(ceiling) if key == "max_cost_usd" else ceiling
                raise BudgetAboveMaximum(
                    f"budget.{key} may be at most {shown} for this tenant.",
                    {"field": key, "maximum": shown, "requested": requested[key]},
                )
        else:
            value = defaults[key]
            if ceiling is not None:
                value = ceiling if value is None else min(value, ceiling)
        values[key] = value
    return RunBudget(
        max_tokens=values["max_tokens"],
        max_cost_micros=values["max_cost_usd"],
        max_tool_calls=values["max_tool_calls"],
        max_calls_per_tool=values["max_calls_per_tool"],
        deadline_s=agent.deadline_s,
    )


def open_run_budget(tenant: str, run_id: str, run_budget: RunBudget) -> None:
    """Create the run's ledger row with its limits (call in the run's creating transaction)."""
    BudgetLedger.objects.create(
        key=_run_key(run_id),
        tenant=tenant,
        run_id=run_id,
        tokens_limit=run_budget.max_tokens,
        cost_limit_micros=run_budget.max_cost_micros,
        tool_calls_limit=run_budget.max_tool_calls,
        calls_per_tool_limit=run_budget.max_calls_per_tool,
        wall_time_limit_ms=(
            int(run_budget.deadline_s * 1000) if run_budget.deadline_s is not None else None
        ),
    )


@dataclass(frozen=True)
class Reservation:
    run_key: str
    day_key: str
    tokens: int
    cost_micros: int


@dataclass(frozen=True)
class BudgetStop:
    """Why a model call may not be sent: ``kind`` is tokens, cost or wall_time."""

    kind: str
    scope: str
    message: str


# --- a driver's view of one run's budget (engine v2) ------------------------------------------
#
# A run's ledger row is read once per drive and kept in the driver's memory: only the driver
# (fenced by its lease) spends from it. What reaches the tenant's day row depends on the run:
# - ``reserved``: the run holds part of the day since admission (``reserve_run``): its own
#   token/cost limit, or, without one, what its agent is expected to spend. Its calls draw from
#   that in memory, and what it did not use goes back when it ends. Nothing touches the day row
#   per step, unless a call of a run without a limit would not fit its hold: the hold then
#   grows by one conditional UPDATE (``run_room``), or the run stops on the tenant's budget.
# - ``per_call``: the tenant has a daily limit, the run has none of its own and reserved no
#   estimate (``HARNESS_DEFAULT_RUN_RESERVE_TOKENS=0``, or queued before estimates): each model
#   call reserves from the day row (one conditional UPDATE) and settles when it is answered.
# - ``unlimited``: no daily limit: usage is added to the day when the run's segment ends.


@dataclass
class RunLedger:
    tenant: str
    run_id: str
    tokens_limit: int | None
    cost_limit_micros: int | None
    tool_calls_limit: int | None
    calls_per_tool_limit: int | None
    wall_time_limit_ms: int | None
    wall_time_ms: int
    tokens_used: int
    cost_used_micros: int
    model_calls: int
    tool_calls_used: int
    # What the run holds on the tenant's day row (``reserved`` mode): its admission reservation
    # (grown if it was an estimate), less what earlier segments spent from it.
    day_tokens_reserved: int
    day_cost_reserved_micros: int
    # Spent this segment, not yet added to the day row.
    segment_tokens: int = 0
    segment_cost_micros: int = 0
    segment_model_calls: int = 0
    segment_tool_calls: int = 0

    @property
    def mode(self) -> str:
        if self.day_tokens_reserved or self.day_cost_reserved_micros:
            return "reserved"
        return "per_call"


def load_run_ledger(tenant: str, run_id: str) -> RunLedger:
    """The run's budget row as the driver will keep it (one query)."""
    row = BudgetLedger.objects.filter(key=_run_key(run_id)).first()
    if row is None:  # a run queued before budgets existed: no per-run limits
        row, _ = BudgetLedger.objects.get_or_create(
            key=_run_key(run_id), defaults={"tenant": tenant, "run_id": run_id}
        )
    return RunLedger(
        tenant=tenant,
        run_id=run_id,
        tokens_limit=row.tokens_limit,
        cost_limit_micros=row.cost_limit_micros,
        tool_calls_limit=row.tool_calls_limit,
        calls_per_tool_limit=row.calls_per_tool_limit,
        wall_time_limit_ms=row.wall_time_limit_ms,
        wall_time_ms=row.wall_time_ms,
        tokens_used=row.tokens_used,
        cost_used_micros=row.cost_used_micros,
        model_calls=row.model_calls,
        tool_calls_used=row.tool_calls_used,
        day_tokens_reserved=row.tokens_reserved,
        day_cost_reserved_micros=row.cost_reserved_micros,
    )


def run_room(ledger: RunLedger, tokens: int, cost: int, elapsed_ms: int) -> BudgetStop | None:
    """Whether the run's limits leave room for a call of ``tokens``/``cost``: its own limits
    (no I/O), then, for a run holding an estimate of the day, whether its hold covers the call
    (growing it by one conditional UPDATE when not, which is the only I/O)."""
    if (
        ledger.wall_time_limit_ms is not None
        and ledger.wall_time_ms + elapsed_ms >= ledger.wall_time_limit_ms
    ):
        return BudgetStop(
            "wall_time",
            "run",
            f"The run used its wall-time limit of {ledger.wall_time_limit_ms / 1000:g} s.",
        )
    if ledger.tokens_limit is not None and ledger.tokens_used + tokens > ledger.tokens_limit:
        return BudgetStop(
            "tokens",
            "run",
            f"The run has used its token budget: {ledger.tokens_used} of {ledger.tokens_limit} "
            f"tokens spent, and the next model call needs up to {tokens}.",
        )
    if (
        ledger.cost_limit_micros is not None
        and ledger.cost_used_micros + cost > ledger.cost_limit_micros
    ):
        return BudgetStop(
            "cost",
            "run",
            f"The run has used its cost budget: {micros_to_usd(ledger.cost_used_micros)} of "
            f"{micros_to_usd(ledger.cost_limit_micros)} USD spent, and the next model call may "
            f"cost up to {micros_to_usd(cost)} USD.",
        )
    return _cover_call(ledger, tokens, cost)


def _estimated(limit: int | None, held: int) -> bool:
    """A measure the run holds an estimate of (no limit of its own, yet part of the day)."""
    return limit is None and held > 0


def _cover_call(ledger: RunLedger, tokens: int, cost: int) -> BudgetStop | None:
    """A run without a limit of its own holds an estimate of the day: a call that would take
    it past that hold grows it by the shortfall, if the day can cover it (the same conditional
    UPDATE as admission, against the limit the day row was last reserved under), or stops the
    run on the tenant's budget. Growing by the shortfall only, not a larger step, leaves the
    rest of the day to other runs. The run's row records the new hold at once (a second,
    unconditional UPDATE of a row only this driver writes), so a driver that dies before its
    segment ends still gives it back when the run ends."""
    # The hold covers what the run spends from it this segment (earlier segments' spend was
    # drawn from it when they were written, ``save_run_ledger``).
    grow_tokens = grow_cost = 0
    if _estimated(ledger.tokens_limit, ledger.day_tokens_reserved):
        grow_tokens = max(0, ledger.segment_tokens + tokens - ledger.day_tokens_reserved)
    if _estimated(ledger.cost_limit_micros, ledger.day_cost_reserved_micros):
        grow_cost = max(0, ledger.segment_cost_micros + cost - ledger.day_cost_reserved_micros)
    if not grow_tokens and not grow_cost:
        return None
    day_key = _day_key(ledger.tenant)
    granted = (
        BudgetLedger.objects.filter(key=day_key)
        .filter(_room_of_row("tokens", grow_tokens), _room_of_row("cost", grow_cost))
        .update(
            tokens_reserved=F("tokens_reserved") + grow_tokens,
            cost_reserved_micros=F("cost_reserved_micros") + grow_cost,
            updated_at=timezone.now(),
        )
    )
    if not granted:
        return _day_stop(ledger.tenant, day_key, tokens, cost, grow_tokens)
    BudgetLedger.objects.filter(key=_run_key(ledger.run_id)).update(
        tokens_reserved=F("tokens_reserved") + grow_tokens,
        cost_reserved_micros=F("cost_reserved_micros") + grow_cost,
    )
    ledger.day_tokens_reserved += grow_tokens
    ledger.day_cost_reserved_micros += grow_cost
    return None


def _day_stop(tenant: str, day_key: str, tokens: int, cost: int, grow_tokens: int) -> BudgetStop:
    """Why the day could not grow a run's hold, from the day row and the limits it keeps."""
    row = BudgetLedger.objects.filter(key=day_key).first() or BudgetLedger(key=day_key)
    if grow_tokens:
        return BudgetStop(
            "tokens",
            "tenant",
            f"Tenant {tenant} has used its daily token budget: {row.tokens_used} of "
            f"{row.tokens_limit} tokens spent today ({row.tokens_reserved} held by runs in "
            f"flight), and the next model call needs up to {tokens}.",
        )
    return BudgetStop(
        "cost",
        "tenant",
        f"Tenant {tenant} has used its daily cost budget: {micros_to_usd(row.cost_used_micros)} "
        f"of {micros_to_usd(row.cost_limit_micros)} USD spent today, and the next model call "
        f"may cost up to {micros_to_usd(cost)} USD.",
    )


def reserve_day(
    tenant: str, tokens: int, cost: int, limits: LimitValues
) -> Reservation | BudgetStop:
    """``per_call`` mode: reserve one model call from the tenant's day (one conditional
    UPDATE; the row is created on the day's first call)."""
    day_key = _day_key(tenant)
    for _attempt in range(2):
        granted = _reserve_on_day(day_key, tokens, cost, limits, model_calls=1)
        if granted:
            return Reservation(run_key="", day_key=day_key, tokens=tokens, cost_micros=cost)
        if BudgetLedger.objects.filter(key=day_key).exists():
            return _tenant_stop(tenant, day_key, limits, tokens, cost)
        _ensure_day_row(tenant)
    return _tenant_stop(tenant, day_key, limits, tokens, cost)


def settle_day(reservation: Reservation, tokens: int, cost: int) -> None:
    """Replace a ``per_call`` reservation with the real usage (one UPDATE)."""
    BudgetLedger.objects.filter(key=reservation.day_key).update(
        tokens_reserved=F("tokens_reserved") - reservation.tokens,
        tokens_used=F("tokens_used") + tokens,
        cost_reserved_micros=F("cost_reserved_micros") - reservation.cost_micros,
        cost_used_micros=F("cost_used_micros") + cost,
        updated_at=timezone.now(),
    )


def spend(ledger: RunLedger, tokens: int, cost: int, per_call: bool) -> None:
    """Count one answered model call on the run, in memory."""
    ledger.tokens_used += tokens
    ledger.cost_used_micros += cost
    ledger.model_calls += 1
    if not per_call:  # per-call usage (the call included) is already on the day row
        ledger.segment_tokens += tokens
        ledger.segment_cost_micros += cost
        ledger.segment_model_calls += 1


def save_run_ledger(ledger: RunLedger, elapsed_ms: int, ended: bool) -> None:
    """At the end of a driven segment (call inside its transaction, after the run row):
    write the run's row, and add to the tenant's day what it does not have yet; a run that
    ended gives back what it held on the day since admission.

    What the segment spent out of the run's hold moves from the day's reserved to its used
    (the hold shrinks by as much), so a run that pauses is not counted twice, and the day's
    used + reserved stays within its limit."""
    now = timezone.now()
    ledger.wall_time_ms += max(0, elapsed_ms)
    drawn_tokens = min(ledger.segment_tokens, ledger.day_tokens_reserved)
    drawn_cost = min(ledger.segment_cost_micros, ledger.day_cost_reserved_micros)
    released_tokens = ledger.day_tokens_reserved if ended else drawn_tokens
    released_cost = ledger.day_cost_reserved_micros if ended else drawn_cost
    BudgetLedger.objects.filter(key=_run_key(ledger.run_id)).update(
        tokens_used=ledger.tokens_used,
        cost_used_micros=ledger.cost_used_micros,
        model_calls=ledger.model_calls,
        tool_calls_used=ledger.tool_calls_used,
        wall_time_ms=ledger.wall_time_ms,
        tokens_reserved=ledger.day_tokens_reserved - released_tokens,
        cost_reserved_micros=ledger.day_cost_reserved_micros - released_cost,
        updated_at=now,
    )
    changes = (
        ledger.segment_tokens,
        ledger.segment_cost_micros,
        ledger.segment_model_calls,
        ledger.segment_tool_calls,
        released_tokens,
        released_cost,
    )
    if any(changes) or elapsed_ms > 0:
        day_added = {
            "tokens_used": F("tokens_used") + ledger.segment_tokens,
            "cost_used_micros": F("cost_used_micros") + ledger.segment_cost_micros,
            "model_calls": F("model_calls") + ledger.segment_model_calls,
            "tool_calls_used": F("tool_calls_used") + ledger.segment_tool_calls,
            "tokens_reserved": F("tokens_reserved") - released_tokens,
            "cost_reserved_micros": F("cost_reserved_micros") - released_cost,
            "wall_time_ms": F("wall_time_ms") + max(0, elapsed_ms),
            "updated_at": now,
        }
        # The day's row exists except at the day's first segment: update, create it if missing.
        if not BudgetLedger.objects.filter(key=_day_key(ledger.tenant)).update(**day_added):
            day_key = _ensure_day_row(ledger.tenant)
            BudgetLedger.objects.filter(key=day_key).update(**day_added)
    ledger.day_tokens_reserved -= released_tokens
    ledger.day_cost_reserved_micros -= released_cost
    ledger.segment_tokens = ledger.segment_cost_micros = 0
    ledger.segment_model_calls = ledger.segment_tool_calls = 0


@dataclass(frozen=True)
class RunEstimate:
    """What a run of an agent is expected to spend, for a run without a limit of its own:
    tokens and micro-USD (the caller computes it from the agent's recent runs)."""

    tokens: int
    cost_micros: int = 0


# Retry-After when the day is not spent but runs in flight hold what a new run needs: they
# give back what they do not use as they end, typically within seconds.
HELD_RETRY_AFTER_S = 5


def reserve_run(
    tenant: str,
    run_id: str,
    run_budget: RunBudget,
    limits: LimitValues,
    estimate: RunEstimate | None = None,
) -> None:
    """Budget-aware admission (call in the run's creating transaction, after
    ``open_run_budget``): in a tenant with a daily limit, a run reserves its own token or cost
    limit, or else ``estimate`` (capped at the day's limit, so that a day too small for it
    still admits one run at a time), up front; or it is refused with 429 — retry in a few
    seconds when runs in flight hold what it needs, at midnight UTC when the day is spent. So
    the runs that start can finish, instead of all starving half-way."""
    tokens = cost = 0
    if limits.daily_tokens is not None:
        tokens = run_budget.max_tokens or min(
            estimate.tokens if estimate else 0, limits.daily_tokens
        )
    if limits.daily_cost_micros is not None:
        cost = run_budget.max_cost_micros or min(
            estimate.cost_micros if estimate else 0, limits.daily_cost_micros
        )
    if not tokens and not cost:
        return
    day_key = _day_key(tenant)
    # The day's row exists except at the day's first run: try the UPDATE, create it if missing.
    granted = _reserve_on_day(day_key, tokens, cost, limits, model_calls=0)
    if not granted and not BudgetLedger.objects.filter(key=day_key).exists():
        _ensure_day_row(tenant)
        granted = _reserve_on_day(day_key, tokens, cost, limits, model_calls=0)
    if not granted:
        own = (limits.daily_tokens is not None and run_budget.max_tokens) or (
            limits.daily_cost_micros is not None and run_budget.max_cost_micros
        )
        _refuse_run(tenant, day_key, tokens, cost, limits, own=bool(own))
    BudgetLedger.objects.filter(key=_run_key(run_id)).update(
        tokens_reserved=tokens, cost_reserved_micros=cost
    )


def _refuse_run(
    tenant: str, day_key: str, tokens: int, cost: int, limits: LimitValues, own: bool
) -> None:
    row = BudgetLedger.objects.get(key=day_key)
    # Spent already, or only held by runs in flight (which give back what they do not use)?
    spent = (
        limits.daily_tokens is not None and row.tokens_used + tokens > limits.daily_tokens
    ) or (
        limits.daily_cost_micros is not None
        and row.cost_used_micros + cost > limits.daily_cost_micros
    )
    left = max(0, (limits.daily_tokens or 0) - row.tokens_used - row.tokens_reserved)
    needs = "budget" if own else "expected spend (its agent's recent runs)"
    held = "" if spent else f" ({row.tokens_reserved} held by runs in flight until they end)"
    raise TenantBudgetExhausted(
        f"Tenant {tenant} cannot cover this run's {needs} {'today' if spent else 'now'}: it "
        f"needs {tokens} tokens, and {left} are left{held}.",
        _seconds_to_midnight() if spent else HELD_RETRY_AFTER_S,
        {
            "budget": "tokens" if tokens else "cost_micros",
            "needed": tokens or cost,
            "estimated": not own,
            "used": row.tokens_used,
            "reserved": row.tokens_reserved,
            "limit": limits.daily_tokens,
        },
    )


def _reserve_on_day(
    day_key: str, tokens: int, cost: int, limits: LimitValues, model_calls: int
) -> bool:
    """``UPDATE … SET reserved = reserved + n WHERE used + reserved + n <= limit`` on the
    tenant's day row; PostgreSQL re-checks the condition under the row lock, so two runs
    never take the same tokens. True if granted."""
    return bool(
        BudgetLedger.objects.filter(key=day_key)
        .filter(
            _room("tokens", limits.daily_tokens, tokens),
            _room("cost", limits.daily_cost_micros, cost),
        )
        .update(
            tokens_reserved=F("tokens_reserved") + tokens,
            cost_reserved_micros=F("cost_reserved_micros") + cost,
            model_calls=F("model_calls") + model_calls,
            tokens_limit=limits.daily_tokens,
            cost_limit_micros=limits.daily_cost_micros,
            updated_at=timezone.now(),
        )
    )


def release_run_budget(tenant: str, run_id: str) -> None:
    """Give back what a run that ended without a driver (cancelled while idle) held."""
    ledger = load_run_ledger(tenant, run_id)
    save_run_ledger(ledger, 0, ended=True)


def charge_day_tool_call(tenant: str, daily_limit: int) -> bool:
    """Count one tool call on the tenant's day, refused past ``daily_limit`` (one UPDATE)."""
    day_key = _ensure_day_row(tenant)
    return bool(
        BudgetLedger.objects.filter(key=day_key, tool_calls_used__lt=daily_limit).update(
            tool_calls_used=F("tool_calls_used") + 1,
            tool_calls_limit=daily_limit,
            updated_at=timezone.now(),
        )
    )


@dataclass(frozen=True)
class ToolLimits:
    tool_calls_limit: int | None = None
    calls_per_tool_limit: int | None = None


def run_tool_limits(run_id: str) -> ToolLimits:
    row = (
        BudgetLedger.objects.filter(key=_run_key(run_id))
        .values("tool_calls_limit", "calls_per_tool_limit")
        .first()
    )
    return ToolLimits(**row) if row else ToolLimits()


def check_tenant_day(tenant: str, limits: LimitValues) -> None:
    """Raise ``TenantBudgetExhausted`` when today's budget is spent: for tokens, when what is
    left could not pay for one model call's answer reserve. Retry at midnight UTC when spent
    indeed, in a few seconds when what is left is only held by runs in flight."""
    daily = (limits.daily_tokens, limits.daily_cost_micros, limits.daily_tool_calls)
    if all(limit is None for limit in daily):
        return
    row = BudgetLedger.objects.filter(key=_day_key(tenant)).first()
    if row is None:
        return
    least_call = settings.HARNESS_COMPLETION_RESERVE_TOKENS
    spent = [
        (name, used, held, limit)
        for name, used, held, limit in (
            ("tokens", row.tokens_used + least_call, row.tokens_reserved, limits.daily_tokens),
            (
                "cost_micros",
                row.cost_used_micros,
                row.cost_reserved_micros,
                limits.daily_cost_micros,
            ),
            ("tool_calls", row.tool_calls_used, 0, limits.daily_tool_calls),
        )
        if limit is not None and used + held >= limit
    ]
    if spent:
        name, used, held, limit = min(spent, key=lambda s: s[1] < s[3])  # spent indeed first
        what = name.replace("_micros", "")
        if used >= limit:
            raise TenantBudgetExhausted(
                f"Tenant {tenant} has spent its daily {what} budget.",
                _seconds_to_midnight(),
                {"budget": name, "used": used, "limit": limit},
            )
        raise TenantBudgetExhausted(
            f"Tenant {tenant}'s daily {what} budget is held by runs in flight; what they do "
            "not use goes back when they end.",
            HELD_RETRY_AFTER_S,
            {"budget": name, "used": used, "reserved": held, "limit": limit},
        )


def run_usage(run_id: str) -> dict[str, Any] | None:
    row = BudgetLedger.objects.filter(key=_run_key(run_id)).first()
    return _usage(row) if row else None


def tenant_day_usage(tenant: str) -> dict[str, Any]:
    row = BudgetLedger.objects.filter(key=_day_key(tenant)).first()
    usage = _usage(row) if row else _usage(BudgetLedger(key=_day_key(tenant), tenant=tenant))
    return {"day": timezone.now().date().isoformat()} | usage


def _usage(row: BudgetLedger) -> dict[str, Any]:
    return {
        "tokens_used": row.tokens_used,
        "tokens_reserved": row.tokens_reserved,
        "tokens_limit": row.tokens_limit,
        "cost_usd": micros_to_usd(row.cost_used_micros),
        "cost_limit_usd": micros_to_usd(row.cost_limit_micros),
        "model_calls": row.model_calls,
        "tool_calls": row.tool_calls_used,
        "tool_calls_limit": row.tool_calls_limit,
        "calls_per_tool_limit": row.calls_per_tool_limit,
        "wall_time_s": round(row.wall_time_ms / 1000, 3),
        "wall_time_limit_s": (
            row.wall_time_limit_ms / 1000 if row.wall_time_limit_ms is not None else None
        ),
    }


def _room(kind: str, limit: int | None, amount: int) -> Q:
    if limit is None:
        return Q()
    used, reserved = _columns(kind)
    return Q(**{f"{used}__lte": limit - amount - F(reserved)})


def _room_of_row(kind: str, amount: int) -> Q:
    used, reserved = _columns(kind)
    limit = "tokens_limit" if kind == "tokens" else "cost_limit_micros"
    return Q(**{f"{limit}__isnull": True}) | Q(**{f"{limit}__gte": F(used) + F(reserved) + amount})


def _columns(kind: str) -> tuple[str, str]:
    if kind == "tokens":
        return "tokens_used", "tokens_reserved"
    return "cost_used_micros", "cost_reserved_micros"


def _tenant_stop(
    tenant: str, day_key: str, limits: LimitValues, tokens: int, cost: int
) -> BudgetStop:
    row = BudgetLedger.objects.get(key=day_key)
    if limits.daily_tokens is not None and (
        row.tokens_used + row.tokens_reserved + tokens > limits.daily_tokens
    ):
        return BudgetStop(
            "tokens",
            "tenant",
            f"Tenant {tenant} has used its daily token budget: {row.tokens_used} of "
            f"{limits.daily_tokens} tokens spent today ({row.tokens_reserved} reserved by "
            f"calls in flight), and the next model call needs up to {tokens}.",
        )
    return BudgetStop(
        "cost",
        "tenant",
        f"Tenant {tenant} has used its daily cost budget: "
        f"{micros_to_usd(row.cost_used_micros)} of {micros_to_usd(limits.daily_cost_micros)} "
        f"USD spent today, and the next model call may cost up to {micros_to_usd(cost)} USD.",
    )


def _run_key(run_id: str) -> str:
    return f"run:{run_id}"


def _day_key(tenant: str) -> str:
    return f"tenant:{tenant}:{timezone.now().date().isoformat()}"


def _ensure_day_row(tenant: str) -> str:
    key = _day_key(tenant)
    if not BudgetLedger.objects.filter(key=key).exists():
        BudgetLedger.objects.get_or_create(
            key=key, defaults={"tenant": tenant, "day": timezone.now().date()}
        )
    return key


def _seconds_to_midnight() -> float:
    now = timezone.now()
    midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), now.tzinfo)
    return (midnight - now).total_seconds()
