"""What the wait-or-preempt rule (plan/victims.py `cheaper_to_wait`) chose on a seed's trace. Not a timing.

    python bench/preempt_choices.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 \
        --size-to-trace --seed 2
    python bench/preempt_choices.py --jobs 10000 --days 30 --seed 1

Runs `fleet` on the seed's trace as bench_simulate.py does (the same run, so the same figures), counting every
weighing of the rule (most are in the improvement phase's runs, not carried out) by its choice and by what the
job's credible start was: `later` (a start the reckoning can tell), `now` or `none` (it cannot tell: the rule
then preempts). One JSON line: the run's preemptions and lost work per accelerator-hour run, and the counts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.plan import reserve, victims


def main() -> None:
    ap = argparse.ArgumentParser()
    bs.seed_args(ap, 1)
    args = ap.parse_args()
    s, _ = bs.seed_trace(args)
    counts: Counter[str] = Counter()
    weigh = victims.cheaper_to_wait

    def counted(st, job, opt, chosen):  # type: ignore[no-untyped-def]
        start = reserve.credible_earliest(st, job)
        why = weigh(st, job, opt, chosen)
        kind = "none" if start is None else "now" if start <= 0 else "later"
        counts[f"{kind} {'wait' if why else 'preempt'}"] += 1
        return why

    victims.cheaper_to_wait = counted     # preempt.py calls it through the module
    d = bs.run_one(s, args.seed, "fleet")
    print(json.dumps({"seed": args.seed, "preemptions": d["preemptions"], "lost_per_run": d["_lost_per_run"],
                      "weighings": dict(sorted(counts.items()))}))


if __name__ == "__main__":
    main()
