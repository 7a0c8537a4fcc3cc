"""`fleet cost --history`'s reuse (history_reuse.py), checked at random against fresh computations.

1. No code reads a duration's raw double behind the methods `tracked.Tracked` overrides (C code such as
   `math.isfinite`, `%f`, `json`, `float.__repr__`): every duration is made a float whose raw double is wrong
   while every Python-level operation answers with the right value; the plan and its price must not change.
2. Random changes of the jobs' `duration_hours` that the trace says decide nothing, the last ones before a
   decision flips (found by bisection, to the adjacent float) and far ones, on the example and on random
   variants of it: each reused point is the fresh point, byte for byte (`repr`), and the first float past each
   edge is refused.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import operator
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reconciler import tracked
from reconciler.catalog import load_catalog
from reconciler.history_reuse import Reuse
from reconciler.load import ParseCache
from reconciler.models import MAX_DURATION_HOURS
from reconciler.pipeline import check, cost_point, plan, price
from reconciler.sources import read_worktree
from reconciler.validate import Validated

ROOT = Path(__file__).resolve().parents[1]
LOW = 1e-6    # the least duration the searches try (any value > 0 validates)


@pytest.fixture(scope="module")
def example() -> dict[str, bytes]:
    return {p: d for p, d in read_worktree(ROOT).items() if p.split("/")[0] in ("fleet", "policies", "jobs")}


def yaml_float(x: float) -> str:
    """`repr`, which YAML reads back as the same float (`1e-06` alone would be a string)."""
    r = repr(float(x))
    mantissa, e, exponent = r.partition("e")
    return r if not e or "." in mantissa else f"{mantissa}.0e{exponent}"


def retime(files: dict[str, bytes], path: str, hours: float) -> dict[str, bytes]:
    text = re.sub(r"(?m)^duration_hours:.*\n", "", files[path].decode())
    return {**files, path: (text + f"duration_hours: {yaml_float(hours)}\n").encode()}


def variant(files: dict[str, bytes], rng: random.Random) -> dict[str, bytes]:
    """Other quotas (more or fewer jobs wait, more reservations) and many other durations."""
    teams = files["policies/teams.yaml"].decode()
    for _ in range(rng.randint(1, 4)):
        ms = list(re.finditer(r"\{nominal: (\d+)", teams))
        m = rng.choice(ms)
        teams = teams[:m.start(1)] + str(max(0, int(m.group(1)) + rng.choice((-16, -8, 8, 64)))) + teams[m.end(1):]
    files = {**files, "policies/teams.yaml": teams.encode()}
    jobs = sorted(p for p in files if p.startswith("jobs/") and p.endswith(".yaml"))
    for path in rng.sample(jobs, len(jobs) // 2):
        files = retime(files, path, rng.choice((float(rng.randint(1, 800)), math.exp(rng.uniform(-3, 9)))))
    return files


# -- 1. the raw double -----------------------------------------------------------------------------------------

class Skewed(float):
    """A float whose raw double is another number than `right` (in another order), and whose Python-level
    operations use `right`."""

    __slots__ = ("right",)
    right: float

    def __new__(cls, right: float) -> Skewed:
        self = float.__new__(cls, (right * 104.729) % 613.0 + 1.0)   # another order, too
        self.right = right
        return self

    def __hash__(self) -> int:
        return hash(self.right)

    def __bool__(self) -> bool:
        return bool(self.right)

    def __int__(self) -> int:
        return int(self.right)

    def __float__(self) -> float:
        return self.right

    def __str__(self) -> str:
        return str(self.right)

    def __repr__(self) -> str:
        return repr(self.right)

    def __format__(self, spec: str) -> str:
        return format(self.right, spec)

    def __trunc__(self) -> int:
        return math.trunc(self.right)

    def __floor__(self) -> int:
        return math.floor(self.right)

    def __ceil__(self) -> int:
        return math.ceil(self.right)

    def __round__(self, n: Any = None) -> Any:
        return round(self.right, n)

    def __neg__(self) -> Skewed:
        return Skewed(-self.right)

    def __abs__(self) -> Skewed:
        return Skewed(abs(self.right))

    def __divmod__(self, other: Any) -> Any:
        return divmod(self.right, _right(other))

    def __copy__(self) -> Skewed:
        return self

    def __deepcopy__(self, memo: object) -> Skewed:
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:
        return float, (self.right,)


def _right(x: object) -> Any:
    return x.right if isinstance(x, Skewed) else x


def _skew(r: object) -> Any:
    return Skewed(r) if type(r) is float and math.isfinite(r) else r


def _binary(op: Callable[[Any, Any], Any], reflected: bool) -> Callable[[Skewed, object], object]:
    def f(self: Skewed, other: object) -> object:
        if not isinstance(other, (int, float)):
            return NotImplemented
        return _skew(op(_right(other), self.right) if reflected else op(self.right, _right(other)))
    return f


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    setattr(Skewed, f"__{_name}__", _binary(getattr(operator, _name), False))
    setattr(Skewed, f"__r{_name}__", _binary(getattr(operator, _name), True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Skewed, f"__{_name}__", _binary(getattr(operator, _name), False))


def shape(x: object) -> object:
    """`x` with every float as its exact value (a `Skewed` as its right one), for ==."""
    if isinstance(x, float):
        return ("float", float.hex(_right(x)))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, *(shape(getattr(x, f.name)) for f in dataclasses.fields(x)))
    if isinstance(x, (tuple, list)):
        return tuple(shape(e) for e in x)
    if isinstance(x, dict):
        return ("dict", *((shape(k), shape(v)) for k, v in x.items()))
    if isinstance(x, (set, frozenset)):
        return ("set", *sorted(repr(shape(e)) for e in x))
    return x


def skewed(v: Validated) -> Validated:
    jobs = tuple(j if j.duration_hours is None else j.model_copy(update={"duration_hours": Skewed(j.duration_hours)})
                 for j in v.loaded.jobs)
    return dataclasses.replace(v, loaded=dataclasses.replace(v.loaded, jobs=jobs))


def test_the_skewed_float_shows_what_reads_the_raw_double() -> None:
    x = Skewed(2.0)
    assert x + 1 == 3.0 and x < 2.5 and f"{x:g}" == "2" and round(x) == 2 and {2.0: 1}[x] == 1
    assert math.isfinite(x) and float.__repr__(x) == "210.458" and "%.2f" % x == "210.46"   # noqa: UP031


def test_no_code_reads_a_durations_raw_double(example: dict[str, bytes]) -> None:
    catalog, rng = load_catalog(), random.Random(7)
    for files, for_people in ((example, True), (example, False), (variant(example, rng), False)):
        v = check(files, catalog)
        assert v.ok
        fresh, other = price(plan(v, for_people=for_people), v), price(plan(skewed(v), for_people=for_people), v)
        assert shape(fresh) == shape(other), "a duration's raw double decided something"
        if for_people:
            assert fresh.plan.to_json() == other.plan.to_json()


# -- 2. reuse against fresh ------------------------------------------------------------------------------------

def asked(trace: tuple[tracked.Entry, ...]) -> set[int]:
    """The durations (by index) some question of the trace involves."""
    found: set[int] = set()

    def walk(node: tracked.Node) -> None:
        if node[0] == "var":
            found.add(node[1])
        elif node[0] != "const":
            for part in node[1:]:
                walk(part)
    for _, node, other, _ in trace:
        walk(node)
        if other is not None:
            walk(other)
    return found


def edge(holds: Callable[[float], bool], start: float, up: bool) -> tuple[float, float | None]:
    """(the farthest value from `start`, going up or down, with every value between holding; the next float
    past it, None at the end of the valid range), by doubling steps then bisection to adjacent floats."""
    lo, step, hi = start, max(start * 1e-3, 1e-6), None
    while hi is None:
        x = min(lo + step, MAX_DURATION_HOURS) if up else max(lo - step, LOW)
        if holds(x):
            if x == lo:
                return lo, None
            lo, step = x, step * 2
        else:
            hi = x
    while (mid := (lo + hi) / 2) not in (lo, hi):
        lo, hi = (mid, hi) if holds(mid) else (lo, mid)
    return lo, hi


def changes_to_check(reuse: Reuse, rng: random.Random) -> tuple[list[dict[int, float]], int]:
    """Changes of the durations (index: new value) that the last point's trace should reuse: each edge of a few
    asked durations, far values of durations no question asked, and all of these at once; and how many first
    floats past an edge it refused (asserted)."""
    last = reuse._last
    assert last is not None, "the base point was not traced"
    durations = list(last.durations)

    def holds_with(change: dict[int, float]) -> bool:
        return tracked.holds(last.trace, [change.get(i, d) for i, d in enumerate(durations)], last.token)

    ask = sorted(asked(last.trace))
    free = [i for i, d in enumerate(durations) if d is not None and i not in ask]
    assert ask and free
    changes: list[dict[int, float]] = []
    edges: dict[int, float] = {}
    refused = 0
    for i in rng.sample(ask, min(3, len(ask))):
        d = durations[i]
        assert d is not None
        for up in (True, False):
            at, past = edge(lambda x, i=i: holds_with({i: x}), d, up)   # type: ignore[misc]
            assert past is None or not holds_with({i: past}), "the first float past the edge holds"
            refused += past is not None
            if at != d:     # a duration whose hash was asked has no room to move
                changes.append({i: at})
                edges[i] = at
    for _ in range(3):          # durations no question asked: anything valid
        changes.append({i: rng.choice((LOW, 1e-3, 0.5, rng.uniform(1, 1000), MAX_DURATION_HOURS))
                        for i in rng.sample(free, rng.randint(1, 3))})
    changes.append({**edges, **{i: rng.uniform(1, 1000) for i in rng.sample(free, 2)}})
    return [c for c in changes if holds_with(c)], refused   # edges of several durations may not hold together


def test_random_duration_changes_reuse_only_points_equal_to_fresh_ones(example: dict[str, bytes]) -> None:
    catalog, cache, rng = load_catalog(), ParseCache(), random.Random(22)
    checked = refused = 0
    for files in (example, variant(example, rng), variant(example, rng)):
        reuse = Reuse()
        base = reuse.point("base", "d", "s", files, catalog, cache)
        assert repr(base) == repr(cost_point("base", "d", "s", files, catalog)) and reuse.computed == 1
        v = check(files, catalog)
        paths = [v.loaded.job_paths[j.id] for j in v.loaded.jobs]
        durations = [j.duration_hours for j in v.loaded.jobs]
        changes, past = changes_to_check(reuse, rng)
        refused += past
        for change in changes:
            moved = files
            for i, x in change.items():
                moved = retime(moved, paths[i], x)
            assert [j.duration_hours for j in check(moved, catalog).loaded.jobs] == \
                [change.get(i, d) for i, d in enumerate(durations)]
            r = copy.copy(reuse)
            got = r.point("c", "d", "s", moved, catalog, cache)
            assert r.reused == 1, f"not reused: {change}"
            want = cost_point("c", "d", "s", moved, catalog)
            assert repr(got) == repr(want), f"reused point differs from the fresh one: {change}"
            checked += 1
    assert checked >= 20 and refused >= 10
