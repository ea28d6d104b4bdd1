"""The console's home page: the dashboard's figures (``dashboard``) drawn as charts and
tables, above Django's list of models."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from harness.console.charts import Bar, Segment, legend, stacked_bars
from harness.console.dashboard import Dashboard, build_dashboard, run_list_link
from harness.console.reads import User, outcome_tone, status_tone
from harness.models import RunOutcome, RunStatus


def home_context(user: User) -> dict[str, Any]:
    board = build_dashboard(user)
    since = board.now - timedelta(hours=board.hours)
    return {
        "board": board,
        "runs_chart": _runs_chart(board),
        "runs_legend": legend(
            [
                (status_tone(s), RunStatus(s).label, run_list_link(status__exact=s))
                for s in board.by_status
            ]
        ),
        "outcomes": [
            (o, RunOutcome(o).label, n, outcome_tone(o), run_list_link(outcome__exact=o))
            for o, n in board.by_outcome.items()
        ],
        "spend_chart": _spend_chart(board),
        "runs_link": run_list_link(created_at__gte=since),
        "problems_link": run_list_link(created_at__gte=since, had="any"),
    }


def _runs_chart(board: Dashboard) -> Any:
    bars = []
    for i, hour in enumerate(board.hourly):
        local = timezone.localtime(hour.start)
        segments = [
            Segment(n, status_tone(status), f"{n} {RunStatus(status).label.lower()}")
            for status, n in sorted(hour.counts.items(), key=lambda kv: _status_order(kv[0]))
        ]
        label = f"{local:%H}" if i % 3 == 0 else ""
        title = f"{local:%Y-%m-%d %H}:00 — {hour.total} runs"
        bars.append(Bar(label, segments, hour.link, title))
    return stacked_bars(bars, unit="runs")


def _spend_chart(board: Dashboard) -> Any:
    bars = [
        Bar(
            f"{day:%a %d}",
            [Segment(tokens, "busy", f"{tokens:,} tokens, ${cost:.4f}")],
            link,
            f"{day:%Y-%m-%d}: {tokens:,} tokens, ${cost:.4f}",
        )
        for day, tokens, cost, link in board.spend_by_day
    ]
    return stacked_bars(bars, unit="tokens")


def _status_order(status: str) -> int:
    return list(RunStatus.values).index(status) if status in RunStatus.values else 99
