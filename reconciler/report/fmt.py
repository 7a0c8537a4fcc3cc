"""Number and text formatting shared by the Markdown and HTML reports. Pure."""

from __future__ import annotations

from ..diff import QuotaChange
from ..plan.markdown import table_cell

CELL_CHARS = 300


def usd(x: float) -> str:
    """Whole dollars, for monthly figures: $12,400."""
    return f"-${-x:,.0f}" if round(x) < 0 else f"${x:,.0f}"


def usd2(x: float) -> str:
    """Dollars and cents, for hourly figures: $1,234.56."""
    return f"-${-x:,.2f}" if round(x, 2) < 0 else f"${x:,.2f}"


def signed(x: float) -> str:
    """A monthly change with its sign: +$1,200, -$300, $0."""
    r = round(x)
    return "$0" if r == 0 else (f"+${x:,.0f}" if r > 0 else f"-${-x:,.0f}")


def signed2(x: float) -> str:
    """An hourly change with its sign and cents: +$172.80, -$6.10, $0.00."""
    r = round(x, 2)
    return "$0.00" if r == 0 else (f"+${x:,.2f}" if r > 0 else f"-${-x:,.2f}")


def pct(delta: float, before: float) -> str:
    return f"{delta / before:+.1%}" if before > 0 else ("new" if round(delta) else "")


def cell(value: object) -> str:
    """Safe inside a Markdown table cell of a GitHub comment: bounded length, no pipes or newlines, and `&`, `<`
    and `>` as entities. A cell quotes text the pull request wrote (a commit subject, a price's `source`): raw,
    `<!--` hid the rest of the comment and `</details>` closed a fold early, since GitHub renders inline HTML."""
    s = str(value)
    s = s if len(s) <= CELL_CHARS else s[: CELL_CHARS - 1] + "…"
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return table_cell(s)


def with_spot(amount: str, spot: str | None) -> str:
    """A quota or a use, `N + S spot` beside a `spot:` quota (`fleet diff`, `fleet status`), else `N`."""
    return amount if spot is None else f"{amount} + {spot} spot"


def limits(lim: tuple[int, int | None, int | None, int] | None) -> tuple[str, str, str]:
    """nominal (with the `spot:` quota beside it, if any), borrowing limit, lending limit, as cells."""
    if lim is None:
        return "–", "–", "–"
    nominal = with_spot(str(lim[0]), str(lim[3]) if lim[3] else None)
    return nominal, "unlimited" if lim[1] is None else str(lim[1]), "all" if lim[2] is None else str(lim[2])


def quota_cells(q: QuotaChange) -> list[str]:
    """nominal / borrowing / lending as `before → after` (or the value when it did not change)."""
    out = []
    for b, a in zip(limits(q.before), limits(q.after), strict=True):
        out.append(a if a == b else f"{b} → {a}")
    return out


def sparkline(values: list[float | None]) -> str:
    """▁▂▃▅▇ over the values (a gap for an invalid commit), at most 120 characters wide."""
    if len(values) > 120:
        step = len(values) / 120
        values = [values[int(i * step)] for i in range(120)]
    real = [v for v in values if v is not None]
    lo, hi = (min(real), max(real)) if real else (0.0, 0.0)
    bars = "▁▂▃▄▅▆▇█"
    return "".join(" " if v is None else bars[0 if hi - lo < 1e-9 else int((v - lo) / (hi - lo) * 7)]
                   for v in values)
