"""The HTML report of `fleet simulate --format html`: one self-contained page, inline SVG, no script, no
external asset, so it opens offline. Pure: results in, text out; every label escaped.

Per policy, charts over simulated time (hourly samples): queue length per priority class, accelerators
occupied and paid, cumulative cost, cumulative faults; above them the side-by-side table.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from .results import Result, markdown

W, H, PAD = 720, 180, 40
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def chart(title: str, series: Sequence[tuple[str, Sequence[float]]], unit: str) -> str:
    """Lines over the hours, one per (name, values), scaled to the largest value; a legend below."""
    top = max((max(vals, default=0.0) for _, vals in series), default=0.0) or 1.0
    n = max((len(vals) for _, vals in series), default=0)
    span = max(1, n - 1)
    body = [f'<rect x="{PAD}" y="10" width="{W - 2 * PAD}" height="{H - 40}" fill="none" stroke="#999"/>',
            f'<text x="{PAD}" y="{H - 12}" font-size="11">hour 0</text>',
            f'<text x="{W - PAD}" y="{H - 12}" font-size="11" text-anchor="end">hour {n - 1}</text>',
            f'<text x="{PAD - 4}" y="18" font-size="11" text-anchor="end">{escape(_short(top))}</text>',
            f'<text x="{PAD - 4}" y="{H - 30}" font-size="11" text-anchor="end">0</text>']
    legend = []
    for k, (name, vals) in enumerate(series):
        colour = COLOURS[k % len(COLOURS)]
        pts = " ".join(f"{PAD + i / span * (W - 2 * PAD):.1f},{10 + (1 - v / top) * (H - 40):.1f}"
                       for i, v in enumerate(vals))
        body.append(f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="1.5" points="{pts}">'
                    f"<title>{escape(name)}</title></polyline>")
        legend.append(f'<span class="key" style="color:{colour}">&#9632; {escape(name)}</span>')
    return (f'<figure><figcaption>{escape(title)} ({escape(unit)})</figcaption>'
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}"><title>{escape(title)}</title>{"".join(body)}</svg>'
            f'<div class="legend">{" ".join(legend)}</div></figure>')


def _short(x: float) -> str:
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.1f}{suffix}"
    return f"{x:.0f}"


def _table(results: Sequence[Result], trace: str) -> str:
    md = markdown(results, trace).splitlines()
    rows = [line for line in md if line.startswith("|") and not line.startswith("|---")]
    out = ['<table id="summary">']
    for k, line in enumerate(rows):
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        tag = "th" if k == 0 else "td"
        out.append("<tr>" + "".join(f"<{tag}>{escape(c)}</{tag}>" for c in cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def to_html(results: Sequence[Result], trace: str) -> str:
    first = results[0]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>fleet simulate: {escape(trace)}</title>",
             "<style>body{font-family:sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}"
             "figure{margin:1em 0}.key{margin-right:1em;font-size:12px}</style></head><body>",
             f"<h1>fleet simulate: {escape(trace)}</h1>",
             f'<p id="scope">{escape(str(first.days))} simulated days, seed {first.seed}, '
             f'{first.doc["jobs"]["submitted"]} jobs submitted.</p>', _table(results, trace)]
    for r in results:
        s = r.samples
        classes = list(s[0].queued) if s else []
        parts.append(f'<section class="policy" id="policy-{escape(r.policy)}"><h2>policy <code>{escape(r.policy)}'
                     "</code></h2>")
        parts.append(chart("queue length per class", [(c, [x.queued[c] for x in s]) for c in classes], "jobs"))
        parts.append(chart("accelerators", [("paid", [x.paid for x in s]), ("occupied", [x.occupied for x in s])],
                           "chips and GPUs"))
        parts.append(chart("cost so far", [("cost", [x.cost_usd for x in s])], "USD"))
        parts.append(chart("faults so far", [("faults", [x.faults for x in s])], "count"))
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
