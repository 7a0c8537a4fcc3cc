"""Inline SVG charts for the HTML report. Pure: numbers in, SVG text out.

Drawn in Python, not by a JavaScript library from a CDN, so the report is one self-contained file that
renders offline (a CI artifact opened on a plane). Every label is escaped; sizes are fixed so the charts
lay out the same everywhere. Colours come from CSS classes in the HTML template.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

LABEL_W, BAR_W, ROW_H, VALUE_W = 220, 420, 22, 150


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}"><title>{escape(title)}</title>{"".join(body)}</svg>')


def _label(y: float, text: str) -> str:
    short = text if len(text) <= 30 else text[:29] + "…"
    return (f'<text class="label" x="{LABEL_W - 8}" y="{y + ROW_H * 0.68:.1f}" text-anchor="end">'
            f'{escape(short)}<title>{escape(text)}</title></text>')


def _bar_row(y: float, name: str, cls: str, x: float, w: float, text_x: float, text: str) -> list[str]:
    """A label, a bar with a tooltip, and the value as text."""
    return [_label(y, name),
            f'<rect class="{cls}" x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{ROW_H - 6}">'
            f'<title>{escape(name)}: {escape(text)}</title></rect>',
            f'<text class="value" x="{text_x:.1f}" y="{y + ROW_H * 0.68:.1f}">{escape(text)}</text>']


def hbars(items: Sequence[tuple[str, float]], fmt: Callable[[float], str], title: str) -> str:
    """One horizontal bar per (label, value >= 0), scaled to the largest."""
    top = max((v for _, v in items), default=0.0) or 1.0
    body = []
    for i, (name, value) in enumerate(items):
        y = i * ROW_H
        w = max(0.0, value) / top * BAR_W
        body += _bar_row(y, name, "bar", LABEL_W, w, LABEL_W + w + 6, fmt(value))
    return _svg(LABEL_W + BAR_W + VALUE_W, max(ROW_H, len(items) * ROW_H), body, title)


def delta_bars(items: Sequence[tuple[str, float]], fmt: Callable[[float], str], title: str) -> str:
    """Diverging bars around a zero line: increases to the right, decreases to the left."""
    top = max((abs(v) for _, v in items), default=0.0) or 1.0
    half = BAR_W / 2
    zero = LABEL_W + half
    body = [f'<line class="axis" x1="{zero}" y1="0" x2="{zero}" y2="{max(ROW_H, len(items) * ROW_H)}"/>']
    for i, (name, value) in enumerate(items):
        y = i * ROW_H
        w = abs(value) / top * (half - 4)
        x = zero if value >= 0 else zero - w
        body += _bar_row(y, name, "up" if value > 0 else "down", x, w, LABEL_W + BAR_W + 6, fmt(value))
    return _svg(LABEL_W + BAR_W + VALUE_W, max(ROW_H, len(items) * ROW_H), body, title)


def utilization(items: Sequence[tuple[str, int, int]], title: str) -> str:
    """Per pool: a full-width track is what the pool pays for, the fill the share of it jobs occupy (pools of
    very different sizes stay comparable), "used/paid (pct)" beside."""
    body = []
    for i, (name, used, paid) in enumerate(items):
        y = i * ROW_H
        share = min(used, paid) / paid if paid else 0.0
        text = f"{used}/{paid} ({used / paid:.0%})" if paid else f"{used}/0"
        body.append(_label(y, name))
        body.append(f'<rect class="track" x="{LABEL_W}" y="{y + 3}" width="{BAR_W}" height="{ROW_H - 6}"/>')
        body.append(f'<rect class="used" x="{LABEL_W}" y="{y + 3}" width="{share * BAR_W:.1f}" height="{ROW_H - 6}">'
                    f'<title>{escape(name)}: {used} of {paid} accelerators occupied</title></rect>')
        body.append(f'<text class="value" x="{LABEL_W + BAR_W + 6}" y="{y + ROW_H * 0.68:.1f}">{escape(text)}</text>')
    return _svg(LABEL_W + BAR_W + VALUE_W, max(ROW_H, len(items) * ROW_H), body, title)


def burndown(items: Sequence[tuple[str, float, float, float]], fmt: Callable[[float], str], title: str) -> str:
    """Per team (name, spent so far, forecast at month end, budget): the track is the larger of budget and
    forecast, the dark fill what is spent, the light fill the forecast, a tick the budget."""
    body = []
    for i, (name, spent, forecast, budget) in enumerate(items):
        y, top = i * ROW_H, max(budget, forecast, 1e-9)
        over = forecast > budget + 0.005
        text = f"{fmt(forecast)} of {fmt(budget)}" + (" (over)" if over else "")
        body.append(_label(y, name))
        body.append(f'<rect class="track" x="{LABEL_W}" y="{y + 3}" width="{BAR_W}" height="{ROW_H - 6}"/>')
        body.append(f'<rect class="{"up" if over else "forecast"}" x="{LABEL_W}" y="{y + 3}" '
                    f'width="{forecast / top * BAR_W:.1f}" height="{ROW_H - 6}"><title>{escape(name)}: forecast '
                    f'{escape(fmt(forecast))}</title></rect>')
        body.append(f'<rect class="bar" x="{LABEL_W}" y="{y + 3}" width="{spent / top * BAR_W:.1f}" '
                    f'height="{ROW_H - 6}"><title>{escape(name)}: spent {escape(fmt(spent))}</title></rect>')
        x = LABEL_W + budget / top * BAR_W
        body.append(f'<line class="budget" x1="{x:.1f}" y1="{y + 1}" x2="{x:.1f}" y2="{y + ROW_H - 1}"/>')
        body.append(f'<text class="value" x="{LABEL_W + BAR_W + 6}" y="{y + ROW_H * 0.68:.1f}">{escape(text)}</text>')
    return _svg(LABEL_W + BAR_W + VALUE_W + 60, max(ROW_H, len(items) * ROW_H), body, title)


def line(points: Sequence[tuple[str, float | None]], fmt: Callable[[float], str], title: str) -> str:
    """A line through the points in order (oldest left); None (an invalid commit) breaks the line."""
    width, height, left, right, top_pad, bottom = 760, 240, 90, 20, 16, 28
    values = [v for _, v in points if v is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo * 0.9, (hi * 1.1 if hi else 1.0)
    n = len(points)

    def xy(i: int, v: float) -> tuple[float, float]:
        x = left + (i * (width - left - right) / (n - 1) if n > 1 else (width - left - right) / 2)
        y = top_pad + (hi - v) / (hi - lo) * (height - top_pad - bottom)
        return x, y

    body = [f'<line class="axis" x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}"/>',
            f'<line class="axis" x1="{left}" y1="{top_pad}" x2="{left}" y2="{height - bottom}"/>',
            f'<text class="label" x="{left - 6}" y="{top_pad + 4}" text-anchor="end">{escape(fmt(hi))}</text>',
            f'<text class="label" x="{left - 6}" y="{height - bottom}" text-anchor="end">{escape(fmt(lo))}</text>']
    segment: list[str] = []
    for i, (name, v) in enumerate(points):
        if v is None:
            if len(segment) > 1:
                body.append(f'<polyline class="line" points="{" ".join(segment)}"/>')
            segment = []
            continue
        x, y = xy(i, v)
        segment.append(f"{x:.1f},{y:.1f}")
        body.append(f'<circle class="dot" cx="{x:.1f}" cy="{y:.1f}" r="{3 if n <= 60 else 1.5}">'
                    f'<title>{escape(name)}: {escape(fmt(v))}</title></circle>')
    if len(segment) > 1:
        body.append(f'<polyline class="line" points="{" ".join(segment)}"/>')
    if points:
        body.append(f'<text class="label" x="{left}" y="{height - 8}">{escape(points[0][0])}</text>')
        body.append(f'<text class="label" x="{width - right}" y="{height - 8}" text-anchor="end">'
                    f'{escape(points[-1][0])}</text>')
    return _svg(width, height, body, title)
