"""When a policy went over quota, and with what: `violations.quota_accelerator_hours` (reconciler/simulate/rules.py
`over_quota`) traced to the placements that raised it. Not a timing.

    python bench/over_quota.py --jobs 10000 --days 30 --seed 4 [--policies kueue] [--top 15]
    python bench/over_quota.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 --size-to-trace --seed 1

Runs each policy on the seed's trace as bench_simulate.py does (the same runs: the total printed is the JSON's),
and wraps `Watch.change`: each placement that raises the accelerators over quota is an episode, printed with its
hour, team, accelerator, the accelerators placed, the accelerators over quota after it, and the team's use of
that accelerator against its fleet-wide nominal + borrowing limit (per cluster: where the team runs it).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from withheld import each_policy

from reconciler.simulate.engine import Engine

Episode = dict[str, Any]


def watch(sim: Engine) -> list[Episode]:
    """Wrap the engine's `Watch.change` to record every placement that raised the accelerators over quota."""
    w, episodes = sim.watch, []
    change = w.change

    def watched(team: str, acc: str, accelerators: int, usd_h: float, spot: str = "",
                value: int | None = None) -> None:
        before = w.over_quota
        change(team, acc, accelerators, usd_h, spot, value)
        if w.over_quota > before:
            charged = w.ledger.charged(team, acc, spot)
            nominal, borrow, _ = w.ledger.limits(team, charged)
            where: Counter[str] = Counter()
            for j in sim.jobs:
                if j.team == team and j.pool is not None and j.state in ("starting", "running") \
                        and w.ledger.charged(team, j.pool.rp.accelerator, j.spot) == charged:
                    where[j.pool.rp.cluster] += len(j.units) * j.per_unit
            episodes.append({"hour": round(sim.now / 3600, 2), "team": team, "accelerator": charged,
                             "placed": accelerators, "over": w.over_quota,
                             "use": w.ledger.usage[(team, charged)], "nominal": nominal, "borrowing_limit": borrow,
                             "by_cluster": dict(sorted(where.items()))})

    w.change = watched  # type: ignore[method-assign]
    return episodes


def main() -> None:
    for name, sim, episodes, args in each_policy(watch):
        print(f"## `{name}`, seed {args.seed}: {sim.c.over_quota_acc_h:,.2f} accelerator-hours over quota, "
              f"{len(episodes)} placements that raised it")
        if episodes:
            print("\n| hour | team | accelerator | placed | over after | team's use | nominal + borrowing | by cluster |")
            print("|---:|---|---|---:|---:|---:|---|---|")
        for e in episodes[:args.top]:
            limit = f"{e['nominal']} + {e['borrowing_limit']}" if e["borrowing_limit"] is not None \
                else f"{e['nominal']} + any"
            clusters = ", ".join(f"{c} {n}" for c, n in e["by_cluster"].items())
            print(f"| {e['hour']} | {e['team']} | {e['accelerator']} | {e['placed']} | {e['over']} | {e['use']} | "
                  f"{limit} | {clusters} |")
        print()


if __name__ == "__main__":
    main()
