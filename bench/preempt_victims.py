"""Where a seed's lost work comes from: every preemption `fleet` carried out, with what the plan reckoned and what
then happened. Not a timing.

    python bench/preempt_victims.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 \
        --size-to-trace --seed 2 [--each]

Runs `fleet` on the seed's trace as bench_simulate.py does (the same run, so the same figures). For each
preemption the engine carried out (a victim stopped for a preemptor): the victim's class and accelerators, the
minutes it had run since its last checkpoint when stopped, the accelerator-hours that cost (that work and the
restart its next run spends), and the preemptor's size and class; from the cycle that first planned it, the
preemptor's credible start by waiting (`reserve.credible_earliest`) and when the victims would stop
(`victims.stop_hours`), as the wait-or-preempt rule weighed them; and when the preemptor then actually started.
"Hindsight": the accelerator-hours the preemption bought by the reckoning's own wait (the preemptor's need times
the hours from its actual start to the start it was reckoned to have by waiting; 0 when it started no sooner)
against what it cost. "Churn": whether the same preemptor had stopped the same victim before (`again`: the victim
restarted in between, so what the first stop bought was given back), else how soon the preemptor then started
(within an hour, later, never); and how many victims were stopped more than once. "Waited again": each victim's
minutes from its stop to its next start, split by whether its preemptor was of a lower class than it or not
(`victims.waits_again` charges the latter at least their restart): how many, how many restarted, how many waited at
least their restart minutes, the median. One JSON line of totals by
class, by victim size, by whether it bought at least what it cost, by churn, and by the lost work's cause;
`--each`: a line per preemption first.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.plan import reserve, victims
from reconciler.plan.state import amount
from reconciler.simulate import engine, loop
from reconciler.simulate.state import kept_hours


class Probe:
    def __init__(self) -> None:
        self.now = 0
        self.weighed: dict[str, dict[str, Any]] = {}      # preemptor -> the rule's last weighing this cycle
        self.planned: dict[tuple[str, str], dict[str, Any]] = {}   # (victim, preemptor) -> first plan of it
        self.starts: dict[str, list[int]] = defaultdict(list)
        self.done: list[dict[str, Any]] = []
        self.reason = ""
        self.values: dict[str, int] = {}                 # class name -> priority value


def watch() -> Probe:
    """Watch every run from now on (the rule's weighings, the loop's plans and stops, the engine's starts and
    stops) without changing what it decides; the probe collects what `summary` reads."""
    pr = Probe()
    weigh, step, stop, start = victims.cheaper_to_wait, loop.step, engine.Engine.stop, engine.Engine._try_start
    act_stop = loop.SimActuator.stop

    def weighed(st, job, opt, chosen):  # type: ignore[no-untyped-def]
        why = weigh(st, job, opt, chosen)
        pr.values = pr.values or {c.name: c.value for c in st.fleet.prio.classes}
        if why is None:
            pr.weighed[job.id] = {"start_h": reserve.credible_earliest(st, job),
                                  "stop_h": victims.stop_hours(st, chosen)[0], "need": amount(job, opt),
                                  "reckoned_lost_acc_h": round(sum(c.lost for c in chosen) / 60, 2)}
        return why

    def stepped(*a, **k):  # type: ignore[no-untyped-def]
        pr.weighed = {}
        thought = step(*a, **k)
        for p in thought.plan.preemptions:
            if (p.job, p.by) not in pr.planned:
                pr.planned[p.job, p.by] = {"planned_s": pr.now, **pr.weighed.get(p.by, {})}
        return thought

    def stopped(self, j, why):  # type: ignore[no-untyped-def]
        if why == "preempt" and j.state == "running":
            elapsed = (self.now - j.run_start_s) / 3600
            kept = kept_hours(j, elapsed)
            spent = min(elapsed, j.overhead_h)
            by = pr.reason.split("preempted by ", 1)[1].split(" ", 1)[0].rstrip(":") \
                if "preempted by " in pr.reason else "?"
            pre = self.by_id.get(by)
            pr.done.append({"t_s": self.now, "victim": j.id, "cls": j.cls, "acc": j.accelerators,
                            "since_ckpt_min": round((elapsed - spent - kept) * 60, 1),
                            "ran_min": round(elapsed * 60, 1), "restart_min": round(j.restart_h * 60, 1),
                            "lost_acc_h": round((elapsed - spent - kept + (spent if elapsed < j.overhead_h else 0) + j.restart_h)
                                                  * j.accelerators, 2),
                            "by": by, "by_cls": pre.cls if pre else "?", **pr.planned.get((j.id, by), {})})
        return stop(self, j, why)

    def started(self, j):  # type: ignore[no-untyped-def]
        was = j.state
        start(self, j)
        if was == "starting" and j.state == "running":
            pr.starts[j.id].append(self.now)

    def act(self, action):  # type: ignore[no-untyped-def]
        pr.reason = action.reason
        return act_stop(self, action)

    orig_step = loop.FleetLoop.step

    def tick(self, sim, now_s):  # type: ignore[no-untyped-def]
        pr.now = now_s
        return orig_step(self, sim, now_s)

    victims.cheaper_to_wait, loop.step, loop.FleetLoop.step = weighed, stepped, tick   # type: ignore[assignment]
    engine.Engine.stop, engine.Engine._try_start, loop.SimActuator.stop = stopped, started, act  # type: ignore
    return pr


def churn(pr: Probe, end_s: int) -> None:
    """Label each preemption carried out (in `pr.done`, in time order) by what followed: `again` when the same
    preemptor had already stopped the same victim (the victim restarted in between: what the first stop bought
    was given back), else by when the preemptor next started after the stop: `started within 1 h`, `started
    later`, `never started` (by `end_s`), and sets it as `e["churn"]`."""
    seen: set[tuple[str, str]] = set()
    for e in pr.done:
        pair = (e["victim"], e["by"])
        if pair in seen:
            e["churn"] = "again"
            continue
        seen.add(pair)
        after = [t for t in pr.starts.get(e["by"], []) if t >= e["t_s"]]
        e["churn"] = "never started" if not after or after[0] > end_s else \
            "started within 1 h" if after[0] - e["t_s"] <= 3600 else "started later"


def waited_again(pr: Probe) -> dict[str, dict[str, Any]]:
    """Each preemption's victim's wait (minutes) from its stop to its next start, by whether it is of a lower class
    than its preemptor ("victim of a lower class") or not ("victim of its preemptor's class or higher"): how many,
    how many started again, how many of those waited at least their restart minutes, and their median wait."""
    got: dict[str, list[tuple[float, float]]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    for e in pr.done:
        key = "victim of a lower class" if pr.values.get(e["cls"], 0) < pr.values.get(e["by_cls"], 0) \
            else "victim of its preemptor's class or higher"
        counts[key] += 1
        nxt = [t for t in pr.starts.get(e["victim"], []) if t > e["t_s"]]
        if nxt:
            got[key].append(((nxt[0] - e["t_s"]) / 60, e.get("restart_min", 0.0)))
    out = {}
    for key in sorted(counts):
        waits = sorted(w for w, _ in got[key])
        out[key] = {"n": counts[key], "started again": len(waits),
                    "waited at least their restart": sum(w >= r for w, r in got[key]),
                    "median_min": round(waits[len(waits) // 2], 1) if waits else None}
    return out


def summary(pr: Probe, d: dict[str, Any], end_s: int, each: bool = False) -> dict[str, Any]:
    """The totals of the run's preemptions carried out (`pr`, the run's figures `d`), by class, size, hindsight,
    and churn (`churn`); with `each`, a line per preemption is printed first."""
    totals: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    churn(pr, end_s)
    for e in pr.done:
        after = [t for t in pr.starts.get(e["by"], []) if t >= e.get("planned_s", e["t_s"])]
        e["by_started_after_h"] = round((after[0] - e["planned_s"]) / 3600, 2) if after and "planned_s" in e else None
        if e.get("start_h") is not None and e["by_started_after_h"] is not None:
            e["bought_acc_h"] = round(max(0.0, e["start_h"] - e["by_started_after_h"]) * e["need"], 2)
        worth = "unknown" if "bought_acc_h" not in e else "bought >= cost" if e["bought_acc_h"] >= e["lost_acc_h"] \
            else "bought < cost"
        for key, val in (("victim class", e["cls"]), ("victim accelerators", str(e["acc"])),
                         ("preemptor class", e["by_cls"]), ("hindsight", worth), ("churn", e["churn"])):
            t = totals[key][val]
            t[0] += 1
            t[1] = round(t[1] + e["lost_acc_h"], 2)
        if each:
            print(json.dumps(e))
    stops = defaultdict(int)
    for e in pr.done:
        stops[e["victim"]] += 1
    return {"preemptions": d["preemptions"], "lost_per_run": d["_lost_per_run"],
            "lost_by": {k: round(x, 1) for k, x in sorted(d.get("lost_by", {}).items())},
            "carried_out": len(pr.done), "victims stopped more than once": sum(n > 1 for n in stops.values()),
            "most stops of one victim": max(stops.values(), default=0), "waited again": waited_again(pr),
            "by": {k: {kk: {"n": n, "lost_acc_h": x} for kk, (n, x) in sorted(v.items())}
                   for k, v in totals.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    bs.seed_args(ap, 2)
    ap.add_argument("--each", action="store_true", help="a line per preemption before the totals")
    args = ap.parse_args()
    s, _ = bs.seed_trace(args)
    pr = watch()
    d = bs.run_one(s, args.seed, "fleet")
    print(json.dumps({"seed": args.seed, **summary(pr, d, int(s.days * 86400), args.each)}))


if __name__ == "__main__":
    main()
