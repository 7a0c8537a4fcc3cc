"""What the reconcile loop's actions came to on a benchmark trace: `fleet` on bench_simulate.py's generated trace
of a seed (or its Alibaba replay), every action the loop's decisions asked for, tallied by kind and result
(done, failed, skipped), the failures by cause, and the cycles in which a cluster's later actions were held
back by a failure earlier in the cycle.

    python bench/loop_actions.py --jobs 10000 --days 30 --seed 3
    python bench/loop_actions.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 --size-to-trace \
        --seed 1

Not a timing. It wraps `reconcile.act.execute` as the simulated loop calls it, without changing what it
decides or does, so the run is the one bench_simulate.py measures. A failed start whose cause is that its
units were "failed or taken" is the simulated actuator's refusal (the plan's units and the simulated nodes
disagree); "does not answer" is a cluster that is down.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.reconcile import act
from reconciler.simulate import loop
from reconciler.simulate.policies import make


def cause(message: str) -> str:
    """A failure's message without its names and numbers: the kind of failure."""
    if "failed or taken" in message:
        return "units failed or taken"
    if "does not answer" in message:
        return "cluster does not answer"
    return re.sub(r"\d+", "N", message.split(":")[0])[:80]


def main() -> None:
    ap = argparse.ArgumentParser()
    bs.seed_args(ap, seed=3)
    args = ap.parse_args()
    s, sim = bs.seed_engine(args)
    policy = make("fleet", sim)
    tally: Counter[tuple[str, str]] = Counter()
    causes: Counter[str] = Counter()
    held: Counter[str] = Counter()          # cluster -> cycles with an action skipped for an earlier failure
    executed = act.execute          # the loop's own call (simulate/loop.py imports it), watched

    def watch(decision: Any, actuator: Any) -> Any:
        results = executed(decision, actuator)
        for r in results:
            tally[(r.action.kind, r.status)] += 1
            if r.status == "failed":
                causes[cause(r.message)] += 1
            elif r.status == "skipped":
                causes["skipped: " + ("the cluster failed earlier" if "failed earlier" in r.message else
                                      "the job's action was refused earlier" if "was refused" in r.message else
                                      "the cluster's capacity held" if "not released" in r.message else
                                      cause(r.message))] += 1
        for c in {r.action.cluster for r in results if r.status == "skipped" and "failed earlier" in r.message}:
            held[c] += 1
        return results

    loop.execute = watch            # type: ignore[attr-defined,assignment]
    sim.run(policy)
    print(f"seed {args.seed}: {sum(tally.values())} actions; by kind and result:")
    for (kind, status), n in sorted(tally.items()):
        print(f"  {kind:7} {status:8} {n}")
    print("failures and skips by cause:")
    for c, n in causes.most_common():
        print(f"  {n:6}  {c}")
    print("cycles in which a failure held back a cluster's later actions (cycles of "
          f"{s.interval // 60} min):")
    for c, n in sorted(held.items()):
        print(f"  {c}: {n} ({n * s.interval / 3600:.1f} h)")


if __name__ == "__main__":
    main()
