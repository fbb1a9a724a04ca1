"""Server-rendered SVG charts (pure functions: data in, SVG text out).

:func:`line_chart` draws one or more series over a time window. The SVG carries what a reader (or a
test) needs without parsing coordinates: ``<title>`` and ``aria-label`` name the chart, each series'
``<path>`` has ``data-series`` and ``data-last`` (its newest value), and the legend prints the newest
values as text. Every text is XML-escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

__all__ = ["Series", "line_chart", "nice_ceiling", "format_value"]


@dataclass(frozen=True)
class Series:
    """A named line: ``points`` are ``(unix seconds, value)`` in time order; ``css`` a class name."""

    name: str
    points: tuple[tuple[float, float], ...]
    css: str = "s1"


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is >= ``value`` (1 for value <= 0)."""
    if value <= 0 or math.isnan(value):
        return 1.0
    exp = math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        candidate = step * 10**exp
        if candidate >= value * (1 - 1e-12):
            return candidate
    return 10.0 ** (exp + 1)


def format_value(value: float, unit: str = "") -> str:
    """A short label: integers as such, else one decimal; ``unit`` appended after a space."""
    text = str(int(value)) if float(value).is_integer() else f"{value:.1f}"
    return f"{text} {unit}".strip()


def _clock(ts: float) -> str:
    import time

    return time.strftime("%H:%M", time.localtime(ts))


def line_chart(
    title: str,
    series: list[Series],
    *,
    start: float,
    end: float,
    width: int = 480,
    height: int = 160,
    unit: str = "",
    y_max: float | None = None,
) -> str:
    """An SVG line chart of ``series`` between ``start`` and ``end`` (see the module docstring).

    The y axis runs from 0 to ``y_max`` (default: :func:`nice_ceiling` of the largest value). Raises
    ValueError when ``end <= start`` or the size leaves no room to draw.
    """
    if end <= start:
        raise ValueError("a chart needs end > start")
    left, right, top, bottom = 44, 8, 8, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    if plot_w <= 0 or plot_h <= 0:
        raise ValueError(f"a {width}x{height} chart leaves no room to draw")
    peak = max((v for s in series for _, v in s.points), default=0.0)
    top_value = y_max if y_max is not None and y_max > 0 else nice_ceiling(peak)

    def x(t: float) -> float:
        return left + (min(max(t, start), end) - start) / (end - start) * plot_w

    def y(v: float) -> float:
        return top + plot_h - min(max(v, 0.0), top_value) / top_value * plot_h

    t = escape(title)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{t}"><title>{t}</title>'
    ]
    out.append(f'<text class="title" x="{left + plot_w}" y="{top + 12}" text-anchor="end">{t}</text>')
    for frac in (0.0, 0.5, 1.0):
        gy = y(top_value * frac)
        out.append(f'<line class="grid" x1="{left}" y1="{gy:.1f}" x2="{left + plot_w}" y2="{gy:.1f}"/>')
        label = escape(format_value(top_value * frac, unit))
        out.append(f'<text class="axis" x="{left - 4}" y="{gy + 4:.1f}" text-anchor="end">{label}</text>')
    for ts, anchor in ((start, "start"), (end, "end")):
        out.append(
            f'<text class="axis" x="{x(ts):.1f}" y="{top + plot_h + 14}" text-anchor="{anchor}">{_clock(ts)}</text>'
        )
    legend_x = left
    for s in series:
        pts = [(x(ts), y(v)) for ts, v in s.points if start <= ts <= end]
        name, css = escape(s.name), escape(s.css)
        last = s.points[-1][1] if s.points else 0.0
        if pts:
            d = "M" + " L".join(f"{px:.1f},{py:.1f}" for px, py in pts)
            out.append(
                f'<path class="line {css}" d="{d}" data-series="{name}" data-last="{format_value(last)}"/>'
            )
            out.append(f'<circle class="dot {css}" cx="{pts[-1][0]:.1f}" cy="{pts[-1][1]:.1f}" r="3"/>')
        legend = f"{s.name}: {format_value(last, unit)}" if s.points else f"{s.name}: no data"
        out.append(f'<text class="legend {css}" x="{legend_x}" y="{height - 4}">{escape(legend)}</text>')
        legend_x += 8 * len(legend) + 16
    out.append("</svg>")
    return "".join(out)
