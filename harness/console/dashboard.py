"""The console's home: what happened lately in the tenants a staff user may see.

Plain reads over runs, spans, approvals, budgets and webhook deliveries, bounded by a window
(runs per hour over a day, spend per day over a week); each figure carries the run-list
filter that shows the runs behind it. Experiment runs are left out: they are not traffic.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate, TruncHour
from django.urls import reverse
from django.utils import timezone

from harness.console.reads import User, format_cost, granted_tenant_slugs
from harness.models import DeliveryStatus, Run, RunOutcome, RunStatus, Tenant, WebhookDelivery
from harness.siem.delivery import siem_status
from policy import services as policy
from traces.queries import list_problem_spans
from traces.span_records import PolicyCheck, ToolCallSpan, record_of

# Enough spans to rank the refusing rules and failing tools of a busy day; the table shows
# the first few.
PROBLEM_SPANS = 5000
LATENCY_RUNS = 2000


@dataclass(frozen=True)
class HourBar:
    start: datetime
    counts: dict[str, int]  # by status
    link: str

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class ProblemRow:
    tool: str
    check: str
    rule: str
    refused: int
    failed: int
    link: str


@dataclass(frozen=True)
class WaitingApproval:
    tenant: str
    tool: str
    rule: str
    run_id: str
    expires_at: datetime
    link: str


@dataclass(frozen=True)
class Latency:
    runs: int
    run_p50_s: float | None
    run_p95_s: float | None
    step_p50_s: float | None
    step_p95_s: float | None


@dataclass(frozen=True)
class SpendRow:
    day: Any
    agent: str
    model: str
    runs: int
    tokens: int
    cost_usd: Decimal
    link: str
    unpriced_calls: int = 0

    @property
    def cost(self) -> str:
        """The cost for people: "no price" rather than $0 when no call behind it had one."""
        return format_cost(self.cost_usd, self.unpriced_calls)


@dataclass(frozen=True)
class BudgetUse:
    tenant: str
    tokens_used: int
    tokens_limit: int | None
    cost_usd: float | None
    cost_limit_usd: float | None
    tool_calls: int
    tool_calls_limit: int | None

    @property
    def tokens_percent(self) -> int | None:
        return _percent(self.tokens_used, self.tokens_limit)

    @property
    def cost_percent(self) -> int | None:
        return _percent(self.cost_usd or 0, self.cost_limit_usd)

    @property
    def tool_calls_percent(self) -> int | None:
        return _percent(self.tool_calls, self.tool_calls_limit)


@dataclass
class Dashboard:
    now: datetime
    hours: int
    days: int
    runs: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    by_outcome: dict[str, int] = field(default_factory=dict)
    hourly: list[HourBar] = field(default_factory=list)
    problems: list[ProblemRow] = field(default_factory=list)
    approvals: list[WaitingApproval] = field(default_factory=list)
    latency: Latency | None = None
    spend: list[SpendRow] = field(default_factory=list)
    spend_by_day: list[tuple[Any, int, Decimal, str]] = field(default_factory=list)
    budgets: list[BudgetUse] = field(default_factory=list)
    failing_webhooks: int = 0
    failing_webhooks_link: str = ""
    # The SIEM's cursors and their lag (deployment-wide sinks: superusers only).
    siem: list[dict[str, Any]] = field(default_factory=list)

    @property
    def with_problems(self) -> int:
        return sum(n for outcome, n in self.by_outcome.items() if outcome != RunOutcome.CLEAN)


def build_dashboard(
    user: User, now: datetime | None = None, hours: int = 24, days: int = 7
) -> Dashboard:
    """The home page's figures for ``user``'s tenants: the last ``hours`` hours of runs, and
    spend over the last ``days`` days."""
    now = now or timezone.now()
    slugs = granted_tenant_slugs(user)
    board = Dashboard(now=now, hours=hours, days=days)
    since = now - timedelta(hours=hours)
    runs = _runs(slugs).filter(created_at__gte=since, created_at__lte=now)
    _count_runs(board, runs)
    _hourly(board, runs, since)
    _problems(board, slugs, since)
    _approvals(board, slugs, now)
    _latency(board, runs)
    _spend(board, slugs, now)
    _budgets(board, slugs)
    _webhooks(board, slugs)
    if slugs is None:
        board.siem = siem_status()
    return board


def run_list_link(**filters: Any) -> str:
    """The run list filtered as the admin's own filters do (``status__exact``, ``tool``…)."""
    params = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in filters.items()}
    run_list = reverse("admin:harness_run_changelist")
    return f"{run_list}?{urlencode(params)}" if params else run_list


def _runs(slugs: frozenset[str] | None) -> QuerySet[Run]:
    runs = Run.objects.filter(experiment=False)
    return runs if slugs is None else runs.filter(tenant__slug__in=sorted(slugs))


def _count_runs(board: Dashboard, runs: QuerySet[Run]) -> None:
    by_status = dict(runs.values_list("status").annotate(n=Count("id")).order_by())
    by_outcome = dict(runs.values_list("outcome").annotate(n=Count("id")).order_by())
    board.by_status = {s: by_status[s] for s in RunStatus.values if by_status.get(s)}
    board.by_outcome = {o: by_outcome[o] for o in RunOutcome.values if by_outcome.get(o)}
    board.runs = sum(by_status.values())


def _hourly(board: Dashboard, runs: QuerySet[Run], since: datetime) -> None:
    rows = (
        runs.annotate(hour=TruncHour("created_at"))
        .values_list("hour", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts: dict[datetime, Counter[str]] = defaultdict(Counter)
    for hour, status, n in rows:
        counts[hour][status] += n
    start = since.replace(minute=0, second=0, microsecond=0)
    for i in range(board.hours + 1):
        hour = start + timedelta(hours=i)
        if hour > board.now:
            break
        link = run_list_link(created_at__gte=hour, created_at__lt=hour + timedelta(hours=1))
        board.hourly.append(HourBar(hour, dict(counts.get(hour, {})), link))


def _problems(board: Dashboard, slugs: frozenset[str] | None, since: datetime) -> None:
    """Refused policy checks and failed tool calls, by tool and by the check and rule that
    refused (a failed call has no rule: its error code stands in)."""
    refused: Counter[tuple[str, str, str]] = Counter()
    failed: Counter[tuple[str, str, str]] = Counter()
    for span in list_problem_spans(slugs, since, PROBLEM_SPANS):
        record = record_of(span["kind"], span["attributes"])
        if isinstance(record, PolicyCheck):
            if record.refused:
                refused[(record.tool or span["name"], record.check, record.rule_name)] += 1
        elif isinstance(record, ToolCallSpan):
            failed[(span["name"], "tool", record.error_code or "")] += 1
    keys = sorted(set(refused) | set(failed), key=lambda k: -(refused[k] + failed[k]))
    for tool, check, rule in keys[:12]:
        kind = RunOutcome.REFUSED if refused[(tool, check, rule)] else RunOutcome.TOOL_FAILED
        link = run_list_link(tool=tool, had=kind, created_at__gte=since)
        board.problems.append(
            ProblemRow(
                tool, check, rule, refused[(tool, check, rule)], failed[(tool, check, rule)], link
            )
        )


def _approvals(board: Dashboard, slugs: frozenset[str] | None, now: datetime) -> None:
    for approval in policy.list_waiting_approvals(slugs, now, limit=20):
        board.approvals.append(
            WaitingApproval(
                tenant=approval.tenant,
                tool=approval.tool,
                rule=approval.rule,
                run_id=approval.run_id,
                expires_at=approval.expires_at,
                link=reverse("admin:harness_run_change", args=[approval.run_id]),
            )
        )


def _latency(board: Dashboard, runs: QuerySet[Run]) -> None:
    """Percentiles of the runs that succeeded in the window: their duration, and their
    duration over their steps."""
    rows = runs.filter(
        status=RunStatus.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False
    ).values_list("started_at", "finished_at", "steps")[:LATENCY_RUNS]
    durations, per_step = [], []
    for started, finished, steps in rows:
        seconds = (finished - started).total_seconds()
        durations.append(seconds)
        if steps:
            per_step.append(seconds / steps)
    board.latency = Latency(
        runs=len(durations),
        run_p50_s=_quantile(durations, 50),
        run_p95_s=_quantile(durations, 95),
        step_p50_s=_quantile(per_step, 50),
        step_p95_s=_quantile(per_step, 95),
    )


def _spend(board: Dashboard, slugs: frozenset[str] | None, now: datetime) -> None:
    since = (now - timedelta(days=board.days - 1)).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    rows = (
        _runs(slugs)
        .filter(created_at__gte=since, created_at__lte=now)
        .annotate(day=TruncDate("created_at"))
        .values_list("day", "agent", "model_route")
        .annotate(
            runs=Count("id"),
            prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"),
            cost=Sum("cost_usd"),
            unpriced=Sum("unpriced_calls"),
        )
        .order_by("-day", "agent", "model_route")
    )
    per_day: dict[Any, list[Any]] = {}
    for day, agent, model, n, prompt, completion, cost, unpriced in rows:
        tokens = (prompt or 0) + (completion or 0)
        cost = cost or Decimal(0)
        link = run_list_link(agent__exact=agent, **day_range(day))
        board.spend.append(SpendRow(day, agent, model or "—", n, tokens, cost, link, unpriced or 0))
        total = per_day.setdefault(day, [0, Decimal(0)])
        total[0] += tokens
        total[1] += cost
    for i in range(board.days - 1, -1, -1):
        day = (now - timedelta(days=i)).date()
        tokens, cost = per_day.get(day, [0, Decimal(0)])
        board.spend_by_day.append((day, tokens, cost, run_list_link(**day_range(day))))


def _budgets(board: Dashboard, slugs: frozenset[str] | None) -> None:
    """Today's use against the limits in force now (a day with no use yet has no ledger row,
    and a limit changed today applies from now: the limits come from the tenant's settings)."""
    tenants = Tenant.objects.order_by("slug").values_list("slug", flat=True)
    for slug in tenants if slugs is None else sorted(slugs):
        usage = policy.tenant_day_usage(slug)
        limits = policy.tenant_limits(slug)
        board.budgets.append(
            BudgetUse(
                tenant=slug,
                tokens_used=usage["tokens_used"],
                tokens_limit=limits.daily_tokens,
                cost_usd=usage["cost_usd"],
                cost_limit_usd=policy.micros_to_usd(limits.daily_cost_micros),
                tool_calls=usage["tool_calls"],
                tool_calls_limit=limits.daily_tool_calls,
            )
        )


def _webhooks(board: Dashboard, slugs: frozenset[str] | None) -> None:
    deliveries = WebhookDelivery.objects.filter(
        Q(status=DeliveryStatus.FAILED) | Q(status=DeliveryStatus.PENDING, attempts__gt=0)
    )
    if slugs is not None:
        deliveries = deliveries.filter(run__tenant__slug__in=sorted(slugs))
    board.failing_webhooks = deliveries.count()
    failed = urlencode({"status__exact": DeliveryStatus.FAILED})
    board.failing_webhooks_link = f"{reverse('admin:harness_webhookdelivery_changelist')}?{failed}"


def day_range(day: Any) -> dict[str, Any]:
    start = timezone.make_aware(datetime.combine(day, datetime.min.time()))
    return {"created_at__gte": start, "created_at__lt": start + timedelta(days=1)}


def _quantile(values: Iterable[float], percent: int) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[percent - 1]


def _percent(used: float, limit: float | None) -> int | None:
    if not limit:
        return None
    return round(100 * used / limit)
