"""Charts for the console, drawn on the server as inline SVG: no script, no CDN, readable
without JavaScript, and each bar a link to the runs behind it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

WIDTH = 1320  # about the width it is shown at: text keeps its size
HEIGHT = 150
GAP = 2


@dataclass(frozen=True)
class Segment:
    value: float
    tone: str  # a CSS class: ok, failed, held, busy, waiting, stopped
    title: str


@dataclass(frozen=True)
class Bar:
    label: str  # under the bar (may be empty)
    segments: Sequence[Segment]
    link: str
    title: str

    @property
    def total(self) -> float:
        return sum(s.value for s in self.segments)


def stacked_bars(bars: Sequence[Bar], unit: str, height: int = HEIGHT) -> SafeString:
    """A bar per item, its segments stacked from the bottom; the tallest bar fills the
    height. The highest value is written on the axis."""
    if not bars:
        return mark_safe("")
    top = max((bar.total for bar in bars), default=0) or 1
    step = WIDTH / len(bars)
    width = max(step - GAP, 1)
    plot = height - 16  # room for the labels under the bars
    drawn = []
    for i, bar in enumerate(bars):
        x = i * step
        y = plot
        rects = []
        for segment in bar.segments:
            if segment.value <= 0:
                continue
            h = plot * segment.value / top
            y -= h
            rects.append(
                format_html(
                    '<rect class="seg-{}" x="{}" y="{}" width="{}" height="{}">'
                    "<title>{}</title></rect>",
                    segment.tone,
                    _at(x),
                    _at(y),
                    _at(width),
                    _at(h),
                    segment.title,
                )
            )
        label = (
            format_html(
                '<text x="{}" y="{}" class="bar-label">{}</text>',
                _at(x + width / 2),
                height - 3,
                bar.label,
            )
            if bar.label
            else ""
        )
        drawn.append(
            format_html(
                '<a href="{}"><title>{}</title><rect class="bar-hit" x="{}" y="0" '
                'width="{}" height="{}"></rect>{}</a>{}',
                bar.link,
                bar.title,
                _at(x),
                _at(width),
                plot,
                _joined(rects),
                label,
            )
        )
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}">'
        '<text x="0" y="10" class="axis-label">{} {}</text>{}</svg>',
        WIDTH,
        height,
        unit,
        _number(top),
        unit,
        _joined(drawn),
    )


def legend(items: Sequence[tuple[str, str, str]]) -> SafeString:
    """``(tone, label, link)`` swatches."""
    return format_html_join(
        " ",
        '<a class="legend-item" href="{}"><span class="swatch seg-{}"></span>{}</a>',
        ((link, tone, label) for tone, label, link in items),
    )


def _at(value: float) -> str:
    """A coordinate as SVG reads it (format_html would escape a float before formatting)."""
    return f"{value:.1f}"


def _joined(parts: Sequence[SafeString]) -> SafeString:
    return format_html_join("", "{}", ((part,) for part in parts))


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.2f}"
