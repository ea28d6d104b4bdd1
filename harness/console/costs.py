"""The console's cost page: a chart of cost per day by agent and model, the report table with
its totals, and the same figures as a CSV file.

Reads ``harness.reports.cost_report`` only; the admin class (``CostReportAdmin``) parses the
form and hands the result here.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.http import HttpResponse
from django.utils import timezone
from django.utils.safestring import SafeString

from harness.console.charts import Bar, Segment, legend, stacked_bars
from harness.console.dashboard import day_range, run_list_link
from harness.console.reads import format_cost
from harness.reports import DIMENSIONS, CostFilter, cost_report

DEFAULT_DAYS = 30
MAX_CHART_DAYS = 366  # a bar a day: a longer range is refused (an open one is cut to its end)
SERIES_TONES = 8  # seg-s0 … seg-s7 in costs.css; more series share colours
CSV_COLUMNS = ["day", "tenant", "agent", "model", "user"]
CSV_MEASURES = [
    "runs",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cost_usd",
    "unpriced_calls",
]
# What a spreadsheet reads as a formula when a cell starts with it (OWASP, "CSV injection").
FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


class DateInput(forms.DateInput):
    input_type = "date"  # the browser's date picker; it sends YYYY-MM-DD


class CostReportForm(forms.Form):
    group_by = forms.MultipleChoiceField(
        choices=[(name, name) for name in DIMENSIONS],
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    start = forms.DateField(required=False, label="From", widget=DateInput)
    end = forms.DateField(required=False, label="To", widget=DateInput)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        start, end = data.get("start"), data.get("end")
        if start and end and start > end:
            self.add_error("end", "'To' is before 'From'.")
        elif start and end and (end - start).days >= MAX_CHART_DAYS:
            self.add_error("start", f"Pick at most {MAX_CHART_DAYS} days.")
        return data


def default_query(today: date | None = None) -> dict[str, Any]:
    """What the page shows when opened: the last 30 days (UTC) by tenant, agent and model."""
    today = today or timezone.now().date()
    return {
        "group_by": ["tenant", "agent", "model"],
        "start": (today - timedelta(days=DEFAULT_DAYS - 1)).isoformat(),
        "end": today.isoformat(),
    }


@dataclass(frozen=True)
class CostPage:
    report: dict[str, Any]
    chart: SafeString
    legend: SafeString
    chart_unit: str
    days: int


def cost_page(group_by: Sequence[str], where: CostFilter) -> CostPage:
    """The table grouped as asked, and the chart: a bar per day of the range, stacked by
    agent and model (cost in USD; tokens when nothing in the range has a price)."""
    report = cost_report(group_by, where)
    for row in [*report["rows"], report["totals"]]:
        row["cost_label"] = amount(row)
    daily = cost_report(["day", "agent", "model"], where)["rows"]
    days = _days(where, daily)
    priced = any(row["cost_usd"] for row in daily)
    unit = "USD" if priced else "tokens"
    series = sorted({(row["agent"], row["model"]) for row in daily})
    tone = {key: f"s{i % SERIES_TONES}" for i, key in enumerate(series)}
    by_day: dict[date, list[Segment]] = {}
    for row in daily:
        value = float(row["cost_usd"]) if priced else float(row["total_tokens"])
        name = f"{row['agent']} · {row['model'] or '—'}"
        title = f"{row['day']:%Y-%m-%d} {name}: {amount(row)}, {row['total_tokens']:,} tokens"
        by_day.setdefault(row["day"], []).append(
            Segment(value, tone[(row["agent"], row["model"])], title)
        )
    bars = [
        Bar(
            label=f"{day:%m-%d}" if len(days) <= 31 or i % 7 == 0 else "",
            segments=by_day.get(day, []),
            link=run_list_link(**day_range(day)),
            title=f"{day:%Y-%m-%d}: " + _day_total(by_day.get(day, []), unit),
        )
        for i, day in enumerate(days)
    ]
    swatches = [
        (tone[key], f"{key[0]} · {key[1] or '—'}", run_list_link(agent__exact=key[0]))
        for key in series
    ]
    return CostPage(report, stacked_bars(bars, unit), legend(swatches), unit, len(days))


def cost_csv(rows: Iterable[dict[str, Any]], filename: str) -> HttpResponse:
    """The report's rows as a CSV download; text cells a spreadsheet would run as a formula
    are neutralised (a leading apostrophe), numbers are written as they are."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS + CSV_MEASURES)
    for row in rows:
        keys = [_cell(row.get(name)) for name in CSV_COLUMNS]
        writer.writerow(keys + [row[name] for name in CSV_MEASURES])
    return response


def csv_rows(where: CostFilter) -> list[dict[str, Any]]:
    """Every row of the export: one per day, tenant, agent, model and user."""
    return cost_report(CSV_COLUMNS, where)["rows"]


def neutralise(text: str) -> str:
    """A text cell a spreadsheet shows as text: one starting like a formula gets a leading
    apostrophe (OWASP's advice for CSV injection)."""
    return f"'{text}" if text.startswith(FORMULA_LEADS) else text


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, date):
        return value.isoformat()
    return neutralise(str(value))


def amount(row: dict[str, Any]) -> str:
    return format_cost(row["cost_usd"], row["unpriced_calls"])


def _day_total(segments: Sequence[Segment], unit: str) -> str:
    total = sum(s.value for s in segments)
    return f"{Decimal(str(total)):.4f} USD" if unit == "USD" else f"{int(total):,} tokens"


def _days(where: CostFilter, rows: Sequence[dict[str, Any]]) -> list[date]:
    seen = [row["day"] for row in rows]
    first = where.start or min(seen, default=None)
    last = where.end or max(seen, default=None)
    if first is None or last is None:
        return []
    first = max(first, last - timedelta(days=MAX_CHART_DAYS - 1))
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]
