"""Where two policies' kept accelerator-hours part: a decomposition of the gap on bench_simulate.py's generated
trace of a seed (the issue-22 question: why `fleet` completes fewer accelerator-hours than `cheapest`).

    python bench/gap.py [--policies cheapest,fleet] [--jobs 10000] [--days 30] [--seed 1] [--repo .] [--json F]

Per policy, one run of the seed (the same engine, trace and faults bench_simulate.py runs), watched without
changing it (a subclass of the engine that only counts). Accelerator-hours, split so that the parts add up:

    paid = held + idle                (idle: paid units, or parts of units, no job holds)
    held = running + starting         (starting: placed, its gang not running yet: provisioning, or a part of
                                       the gang not ready)
    running = kept + lost + at risk   (kept: goodput's numerator; lost: redone work and restarts, by cause;
                                       at risk: a gang's progress since its checkpoint when the run ends)

and the work of the jobs (hours of their first option x the accelerators it asks): completed, the progress of
jobs unfinished at the end, and what those still had to do, by priority class and by team. Paid, idle and
held per (capacity, accelerator), and per elastic pool how often it grew and shrank and how many of its
units were provisioned again within an hour of being released (a pool shrunk and then needed again).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.simulate.cluster import ABSENT, SimPool
from reconciler.simulate.engine import SCALE_DOWN_S, Engine
from reconciler.simulate.policies import make
from reconciler.simulate.results import result
from reconciler.simulate.state import SimJob

REGROW_S = 3600


class Metered(Engine):
    """The engine, counting per pool what it pays, what jobs hold and what runs; decides nothing differently."""

    def __init__(self, *a: Any, **k: Any) -> None:
        self.paid_n: Counter[str] = Counter()
        self.held_n: Counter[str] = Counter()
        self.run_n: Counter[str] = Counter()
        self.paid_h: defaultdict[str, float] = defaultdict(float)
        self.held_h: defaultdict[str, float] = defaultdict(float)
        self.run_h: defaultdict[str, float] = defaultdict(float)
        self.grew: Counter[str] = Counter()
        self.shrank: Counter[str] = Counter()
        self.regrew: Counter[str] = Counter()
        self.released_at: dict[tuple[str, int], int] = {}
        self.early: Counter[str] = Counter()        # units released idle for less than SCALE_DOWN_S
        self.early_min: defaultdict[str, float] = defaultdict(float)    # ... and the minutes they were idle short of it
        self.cause = ""                             # a fault or a reclaim takes the unit, not a release
        self.stops: dict[str, Counter[str]] = defaultdict(Counter)   # job -> why it was stopped while running
        self.origin: dict[tuple[str, int], tuple[str, int, bool]] = {}  # unit -> (why provisioned, when, held a job)
        self.unused: Counter[str] = Counter()       # units released without holding a job, by why provisioned
        self.unused_h: defaultdict[str, float] = defaultdict(float)     # ... and the accelerator-hours they were paid
        self.t0 = 0
        super().__init__(*a, **k)

    def _accrue(self, t: int) -> None:
        dt = (t - self.t0) / 3600
        if dt > 0:
            for counts, hours in ((self.paid_n, self.paid_h), (self.held_n, self.held_h), (self.run_n, self.run_h)):
                for key, n in counts.items():
                    if n:
                        hours[key] += n * dt
            self.t0 = t
        super()._accrue(t)

    def _set(self, p: SimPool, i: int, state: str, until_s: int = 0) -> None:
        u = p.units[i]
        was, old = p.paid(u), u.state
        super()._set(p, i, state, until_s)
        now = p.paid(u)
        if was != now:
            self.paid_n[p.key] += p.rp.unit_accelerators if now else -p.rp.unit_accelerators
        if not p.fixed and old == ABSENT and state != ABSENT:
            self.grew[p.key] += 1
            self.origin[(p.key, i)] = (self.cause or "resize", self.now, False)
            if self.now - self.released_at.get((p.key, i), -REGROW_S - 1) <= REGROW_S:
                self.regrew[p.key] += 1
        elif not p.fixed and state == ABSENT and old != ABSENT and not self.cause:
            self.shrank[p.key] += 1
            why, since, held = self.origin.pop((p.key, i), ("?", self.now, True))
            if not held:
                self.unused[why] += 1
                self.unused_h[why] += (self.now - since) / 3600 * p.rp.unit_accelerators
            self.released_at[(p.key, i)] = self.now
            if self.now - u.idle_since_s < SCALE_DOWN_S:
                self.early[p.key] += 1
                self.early_min[p.key] += (SCALE_DOWN_S - (self.now - u.idle_since_s)) / 60

    def stop(self, j: SimJob, why: str) -> None:
        if j.state == "running":
            self.stops[j.id][why] += 1
        super().stop(j, why)

    def _fail(self, p: SimPool, i: int, what: str) -> None:
        self.cause = "fault"
        super()._fail(p, i, what)
        self.cause = ""

    def _reclaim(self, p: SimPool, i: int) -> None:
        self.cause = "spot"
        super()._reclaim(p, i)
        self.cause = ""

    def _groups(self, j: SimJob, counts: Counter[str], sign: int) -> None:
        for g in j.groups():
            counts[g.pool.key] += sign * g.per_unit * len(g.units)

    def place(self, j: SimJob, *a: Any, **k: Any) -> bool:
        self.cause = "place"
        ok = super().place(j, *a, **k)
        self.cause = ""
        if ok:
            self._groups(j, self.held_n, 1)
            for g in j.groups():
                for i in g.units:
                    why, since, _ = self.origin.get((g.pool.key, i), ("", 0, True))
                    self.origin[(g.pool.key, i)] = (why, since, True)
        return ok

    def _try_start(self, j: SimJob) -> None:
        was = j.state
        super()._try_start(j)
        if was != "running" and j.state == "running":
            self._groups(j, self.run_n, 1)

    def _release(self, j: SimJob) -> None:
        self._groups(j, self.held_n, -1)
        if j.state == "running":
            self._groups(j, self.run_n, -1)
        super()._release(j)


def measure(s: bs.Setup, seed: int, policy: str) -> dict[str, Any]:
    trace, _ = bs._trace(s, seed)
    sim = Metered(trace, bs.faults_of(s), seed, s.days, s.interval)
    sim.run(make(policy, sim))
    c = sim.c
    kind: dict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))
    for key, p in sim.pools.items():
        k = f"{p.rp.capacity} {p.rp.accelerator}"
        kind[k]["paid"] += sim.paid_h[key]
        kind[k]["held"] += sim.held_h[key]
        kind[k]["running"] += sim.run_h[key]
    work: dict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))
    for j in sim.jobs:
        if j.submit_s >= sim.end_s:
            continue
        for by in (f"class {j.cls}", f"team {j.team}"):
            if j.state == "done":
                work[by]["completed"] += j.work_h * j.asked
            else:
                work[by]["unfinished progress"] += j.done_h * j.asked
                work[by]["unfinished left"] += (j.work_h - j.done_h) * j.asked
                work[by]["unfinished jobs"] += 1
                work[by]["never started"] += j.first_start_s is None
                end = "running" if j.state == "running" else "waiting, interrupted" if j.interruptions else "waiting"
                work[by][f"unfinished progress, {end} at the end"] += j.done_h * j.asked
                work[by]["unfinished, interrupted"] += j.interruptions > 0
    held, running = sum(sim.held_h.values()), sum(sim.run_h.values())
    pools = {key: {"paid": round(sim.paid_h[key]), "held": round(sim.held_h[key]), "grew": sim.grew[key],
                   "shrank": sim.shrank[key], "regrew within 1 h": sim.regrew[key],
                   "released early": sim.early[key], "minutes early": round(sim.early_min[key])}
             for key, p in sim.pools.items() if not p.fixed and (sim.grew[key] or sim.paid_h[key])}
    return {
        "policy": policy, "seed": seed,
        "paid": c.paid_acc_h, "idle": c.paid_acc_h - held, "held": held, "starting": held - running,
        "running": running, "kept": c.good_acc_h, "lost": c.lost_acc_h,
        "at risk at the end": running - c.good_acc_h - c.lost_acc_h,
        "lost by": dict(c.lost_by), "cost": c.cost_usd, "completed": c.completed_acc_h,
        "busy (engine)": c.busy_acc_h,
        "by kind": {k: dict(v) for k, v in sorted(kind.items())},
        "work": {k: dict(v) for k, v in sorted(work.items())}, "pools": pools,
        "released unused": {k: [n, round(sim.unused_h[k])] for k, n in sorted(sim.unused.items())},
        "result": result(sim, policy, s.days, seed).doc,
        "jobs": {j.id: [j.state, j.cls, j.asked, round(j.work_h, 3), round(j.done_h, 3), dict(sim.stops.get(j.id, {})),
                        j.first_start_s, j.finish_s] for j in sim.jobs if j.submit_s < sim.end_s},     # bench_simulate.py's figures of the same run
    }


def _row(label: str, xs: list[float], fmt: str = "{:,.0f}") -> str:
    cells = [fmt.format(x) for x in xs]
    diff = fmt.replace("{:", "{:+").format(xs[1] - xs[0]) if len(xs) == 2 else ""
    return f"| {label} | " + " | ".join(cells) + (f" | {diff} |" if diff else " |")


def table(ms: list[dict[str, Any]]) -> str:
    names = [m["policy"] for m in ms]
    head = "| accelerator-hours | " + " | ".join(f"`{n}`" for n in names)
    head += f" | `{names[1]}` - `{names[0]}` |" if len(ms) == 2 else " |"
    lines = [f"seed {ms[0]['seed']}", "", head, "|---|" + "---:|" * (len(ms) + (len(ms) == 2))]
    for key in ("paid", "idle", "held", "starting", "running", "kept", "lost", "at risk at the end", "completed"):
        lines.append(_row(key, [m[key] for m in ms]))
    for cause in sorted({c for m in ms for c in m["lost by"]}):
        lines.append(_row(f"lost to {cause}", [m["lost by"].get(cause, 0.0) for m in ms]))
    lines.append(_row("cost ($)", [m["cost"] for m in ms]))
    for why in sorted({w for m in ms for w in m.get("released unused", {})}):
        lines.append(_row(f"paid in units provisioned ({why}) and released unused",
                          [m.get("released unused", {}).get(why, [0, 0])[1] for m in ms]))
    for k in sorted({k for m in ms for k in m["by kind"]}):
        for part in ("paid", "held"):
            lines.append(_row(f"{part}: {k}", [m["by kind"].get(k, {}).get(part, 0.0) for m in ms]))
        lines.append(_row(f"idle: {k}", [m["by kind"].get(k, {}).get("paid", 0.0)
                                         - m["by kind"].get(k, {}).get("held", 0.0) for m in ms]))
    for by in sorted({k for m in ms for k in m["work"]}):
        for part in ("completed", "unfinished progress", "unfinished progress, running at the end",
                     "unfinished progress, waiting, interrupted at the end", "unfinished left", "unfinished jobs",
                     "unfinished, interrupted", "never started"):
            lines.append(_row(f"{by}: {part}", [m["work"].get(by, {}).get(part, 0.0) for m in ms]))
    lines += ["", "| elastic pool | " + " | ".join(f"`{n}` paid / grew / shrank / regrew in 1 h / released early (min)"
                                                 for n in names)
              + " |", "|---|" + "---:|" * len(ms)]
    for key in sorted({k for m in ms for k in m["pools"]}):
        cells = []
        for m in ms:
            p = m["pools"].get(key, {})
            cells.append(f"{p.get('paid', 0):,} / {p.get('grew', 0)} / {p.get('shrank', 0)} / "
                         f"{p.get('regrew within 1 h', 0)} / {p.get('released early', 0)} ({p.get('minutes early', 0):,})")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default="cheapest,fleet")
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--days", type=float, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repo", type=Path, default=ROOT)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = ap.parse_args()
    s = bs.Setup(repo=args.repo, jobs=args.jobs, days=args.days, load=0.9, interval=300, restart_minutes=None,
                 trace=None, alibaba=None, from_day=0, size_to_trace=False, size_load=0.9)
    ms = [measure(s, args.seed, p) for p in args.policies.split(",")]
    if args.json is not None:
        args.json.write_text(json.dumps(ms, indent=1))
    print(table(ms))


if __name__ == "__main__":
    main()
