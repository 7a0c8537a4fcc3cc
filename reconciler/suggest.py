"""Words for people: "did you mean" for a mistyped name, and unit numbers as a list. Pure.

A researcher who types `selfplay-v5` for `selfplay-v5p`, or `nvidia-h200` for `nvidia-h200-141gb`, should read
the name they meant first, then the list to choose from (the list alone hides the answer among 20 names).
The closeness measure is difflib's (Ratcliff/Obershelp, cutoff 0.6): good at typos and left-off suffixes.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like `name`, or None when none is close (difflib's cutoff 0.6)."""
    names = sorted(set(known))
    # `nvidia-h200` for `nvidia-h200-141gb`: the start of exactly one name is that name (difflib would rather
    # say `nvidia-b200`, one letter off)
    prefixed = [n for n in names if n.startswith(name)] if name else []
    if len(prefixed) == 1:
        return prefixed[0]
    found = difflib.get_close_matches(name, names, n=1)
    return found[0] if found else None


def did_you_mean(name: str, known: Iterable[str], *, choose: str = "use one of", limit: int = 12) -> str:
    """A hint: `did you mean `x`? use one of: a, b, c` (the list cut to `limit` names, with how many more)."""
    names = sorted(set(known))
    near = closest(name, names)
    shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
    return (f"did you mean `{near}`? " if near else "") + (f"{choose}: {shown}" if names else "")


def unit_list(units: Iterable[int]) -> str:
    """Unit numbers as people write them, a run of 3 or more consecutive ones as `first–last`: `0–5, 8`, never
    a range over a gap; `none` for no unit (never a Python list `[0, 1, 2]`)."""
    runs: list[list[int]] = []
    for u in sorted(units):
        if runs and u == runs[-1][-1] + 1:
            runs[-1].append(u)
        else:
            runs.append([u])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) >= 3 else ", ".join(map(str, r)) for r in runs) or "none"
