"""What a driver asks of the policy around each step, read once per drive and kept in memory.

- Before each model call: pace it under the tenant's model calls per minute (waiting, never
  failing, within the run's wall time), then check the run's own budget in memory; a tenant
  with a daily limit is charged per call only for runs that reserved nothing at admission.
  A spent budget ends the run as ``budget_exceeded``, a spent wall time as
  ``deadline_exceeded``.
- After it: count the real usage (in memory; written with the step).
- Tool-call limits per run and per tool are counted in memory from the run's own counts (the
  decision chain asks and charges them: ``tool_calls``, ``charge_tool_call``).
- At the end of each driven segment: write the run's ledger row, settle the tenant's day,
  free the concurrency slot (``end_segment``, inside the segment's last transaction).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from gateway.messages import Message, ModelResponse, ToolSpec
from gateway.services import estimate_cost_usd
from gateway.tokens import estimate_tokens
from harness.agent_registry import AgentSpec
from harness.engine.decisions import LimitRefusal, ToolCallCount
from harness.models import Run, RunStatus
from policy import services as policy


@dataclass(frozen=True)
class Stop:
    status: RunStatus
    detail: str


class RunGuard:
    """Budget, pacing, tool-call limits and wall time of one driven segment of a run."""

    def __init__(self, run: Run) -> None:
        self.tenant = run.tenant.slug
        self.run_id = str(run.id)
        self.started = time.monotonic()
        self.limits = policy.tenant_limits(self.tenant)
        self.ledger = policy.load_run_ledger(self.tenant, self.run_id)
        self.tool_counts: dict[str, int] = dict(run.tool_call_counts or {})
        self._day_reservation: policy.Reservation | None = None
        self.crossings: list[policy.Crossing] = []
        # The run (re)takes its concurrency slot: a no-op for a new run, which took it at
        # admission; needed after a pause, a hand-off or a crash, which released or lost it.
        policy.resume_run_slot(self.tenant, self.run_id)
        self._slot_refreshed = time.monotonic()

    @property
    def _per_call(self) -> bool:
        daily = self.limits.daily_tokens is not None or self.limits.daily_cost_micros is not None
        return daily and self.ledger.mode == "per_call"

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def before_model_call(
        self, agent: AgentSpec, messages: list[Message], specs: list[ToolSpec]
    ) -> Stop | None:
        """Pace and admit the next model call; a ``Stop`` ends the run instead."""
        now = time.monotonic()
        refresh = now - self._slot_refreshed >= policy.SLOT_REFRESH_S
        if refresh:
            self._slot_refreshed = now
        if not policy.pace_model_call(
            self.tenant,
            self.run_id,
            self._remaining_s(),
            self.limits.model_calls_per_minute,
            refresh_slot=refresh,
        ):
            return Stop(
                RunStatus.DEADLINE_EXCEEDED,
                "The run stopped: the tenant's limit of model calls per minute kept it waiting "
                "past its wall-time limit.",
            )
        prompt = estimate_tokens(messages, specs)
        completion = settings.HARNESS_COMPLETION_RESERVE_TOKENS
        cost = policy.usd_to_micros(estimate_cost_usd(agent.model or None, prompt, completion))
        stop = policy.run_room(self.ledger, prompt + completion, cost or 0, self.elapsed_ms())
        if stop is None and self._per_call:
            granted = policy.reserve_day(self.tenant, prompt + completion, cost or 0, self.limits)
            if isinstance(granted, policy.BudgetStop):
                stop = granted
            else:
                self._day_reservation = granted
        if stop is None:
            return None
        status = (
            RunStatus.DEADLINE_EXCEEDED if stop.kind == "wall_time" else RunStatus.BUDGET_EXCEEDED
        )
        return Stop(status, f"The run stopped before finishing. {stop.message}")

    def after_model_call(self, response: ModelResponse | None) -> int:
        """Count the real usage (``None``: the call failed); returns its micro-USD. A per-call
        day reservation is settled at once (one UPDATE): held until the step commits, it would
        keep other runs of the tenant from tokens that are in fact left."""
        reservation, self._day_reservation = self._day_reservation, None
        tokens = response.usage.total_tokens if response else 0
        cost = (policy.usd_to_micros(response.cost_usd or 0.0) or 0) if response else 0
        if reservation is not None:
            policy.settle_day(reservation, tokens, cost)
        if response is not None:
            before = (self.ledger.tokens_used, self.ledger.cost_used_micros)
            policy.spend(self.ledger, tokens, cost, per_call=reservation is not None)
            self._note_run_crossings(before)
        return cost

    def _note_run_crossings(self, before: tuple[int, int]) -> None:
        ledger, thresholds = self.ledger, self.limits.alert_thresholds
        for measure, was, now, limit in (
            ("tokens", before[0], ledger.tokens_used, ledger.tokens_limit),
            ("cost", before[1], ledger.cost_used_micros, ledger.cost_limit_micros),
        ):
            self.crossings += policy.run_crossings(
                self.tenant, self.run_id, measure, was, now, limit, thresholds
            )

    def take_crossings(self) -> list[policy.Crossing]:
        """Thresholds of the run's own budget the last model call crossed (announced once:
        the driver writes them with the step)."""
        crossings, self.crossings = self.crossings, []
        return crossings

    def tool_calls(self, tool: str) -> ToolCallCount:
        """The run's tool calls so far (of ``tool``, and in all) and its limits; the decision
        chain says which limit one more would pass (``decisions.limit_refusal``)."""
        ledger = self.ledger
        return ToolCallCount(
            self.tool_counts.get(tool, 0),
            ledger.tool_calls_used,
            ledger.calls_per_tool_limit,
            ledger.tool_calls_limit,
        )

    def charge_tool_call(self, tool: str) -> LimitRefusal | None:
        """Count one call of ``tool`` as made: first against the tenant's daily tool calls,
        if it has a limit (charged where the day is kept; a refusal counts nothing), then in
        memory against the run's own."""
        daily = self.limits.daily_tool_calls
        if daily is not None and not policy.charge_day_tool_call(self.tenant, daily):
            return LimitRefusal(
                "daily_tool_calls", f"tenant {self.tenant} has used its tool calls for today"
            )
        self.tool_counts[tool] = self.tool_counts.get(tool, 0) + 1
        self.ledger.tool_calls_used += 1
        if daily is None:
            self.ledger.segment_tool_calls += 1
        return None

    def end_segment(self, ended: bool) -> list[policy.Crossing]:
        """Inside the segment's last transaction (pause, hand-off, finish): write the run's
        ledger and the tenant's day; ``ended`` gives back the run's admission reservation.
        Returns the thresholds of the tenant's day budget this run is first to announce."""
        if self._day_reservation is not None:  # a call reserved and never answered
            policy.settle_day(self._day_reservation, 0, 0)
            self._day_reservation = None
        policy.save_run_ledger(self.ledger, self.elapsed_ms(), ended=ended)
        self.started = time.monotonic()
        limits = self.limits
        if limits.daily_tokens is None and limits.daily_cost_micros is None:
            return []
        return policy.claim_day_crossings(self.tenant, limits.alert_thresholds)

    def snapshot(self) -> Callable[[], None]:
        """What ``end_segment`` changes in memory, kept: the returned function puts it back
        (when the transaction that wrote it rolled back, so that it is written again)."""
        ledger, reservation, started = copy.copy(self.ledger), self._day_reservation, self.started

        def restore() -> None:
            self.ledger, self._day_reservation, self.started = ledger, reservation, started

        return restore

    def release_slot(self) -> None:
        """After the segment's commit: free the concurrency slot."""
        policy.release_run(self.tenant, self.run_id)

    def counters(self) -> dict[str, Any]:
        return {"tool_call_counts": dict(self.tool_counts)}

    def _remaining_s(self) -> float | None:
        limit = self.ledger.wall_time_limit_ms
        if limit is None:
            return None
        return max(0.0, (limit - self.ledger.wall_time_ms - self.elapsed_ms()) / 1000)
