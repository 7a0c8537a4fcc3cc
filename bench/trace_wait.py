"""Why a job waited: `fleet` on bench_simulate.py's generated trace of a seed (or its Alibaba replay), and for the
longest waits of one priority class (or the jobs named), what the plan said while each job waited and who held
the pools it could use.

    python bench/trace_wait.py [--jobs 2000] [--days 7] [--seed 2] [--class critical] [--top 3] [--repo .]
    python bench/trace_wait.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 --size-to-trace \
        --seed 1 --class production --top 40 --changes 0
    python bench/trace_wait.py --jobs 10000 --days 30 --seed 1 --job serving/pretrain-02262 --changes 30

Not a timing. For each of the --top longest waits of --class (a job never started waits to the trace's end),
or for each `--job` given:
its arrival, first start and wait in hours, its options; then, each time it changes while the job waits, the
plan's reasons for it, its expected start and reservation, and the placements on its candidate pools (job,
class value, units, whether its team borrows that accelerator, kept from what runs or not), and the
reservations held on those pools: the first `--changes` of them (0: none, only the waits). It watches the
plan and the planner's final state through `planner.plan_with_state` (what the loop's plan calls), without
changing what it decides (it asks for the reasons and expected starts the loop's plan leaves out), so the run is
the one bench_simulate.py measures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.plan import planner
from reconciler.simulate.policies import make


def main() -> None:
    ap = argparse.ArgumentParser()
    bs.seed_args(ap, seed=2)
    ap.add_argument("--class", dest="cls", default="critical")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--job", action="append", default=[], help="a job to follow (repeatable); else --class")
    ap.add_argument("--changes", type=int, default=None, help="the plan changes printed per job (default: all)")
    args = ap.parse_args()
    s, sim = bs.seed_engine(args)
    policy = make("fleet", sim)
    wanted = set(args.job) or {j.id for j in sim.jobs if j.cls == args.cls}
    log: dict[str, list[tuple[float, tuple[Any, ...]]]] = {}
    planned = planner.plan_with_state

    def watch(*a: Any, **kw: Any) -> Any:
        # the loop plans without reasons and expected starts (for_people=False); ask for them here: the
        # placements are the same either way (tests/test_incremental.py), so the run is the one measured
        plan, st = out = planned(*a, **{**kw, "for_people": True})
        for p in plan.pending:
            if p.job not in wanted:
                continue
            info = st.fleet.by_job[p.job]
            pools = sorted({ps.pool.key for opt in info.options for ps in st.candidates(info, opt)})
            held = tuple((k, tuple(sorted((j, st.live[j].info.priority, st.live[j].units,
                                           st.quota.is_borrowing(st.live[j].info.team, st.live[j].option.accelerator),
                                           st.live[j].kept) for j in st.on_pool.get(k, ())))) for k in pools)
            res = tuple((r.job, r.pool_key, r.units, round(r.start_hours, 2)) for r in st.reservation_of.values()
                        if r.pool_key in pools)
            seen = (p.reasons, p.expected_start, p.reservation, held, res)
            entries = log.setdefault(p.job, [])
            if not entries or entries[-1][1] != seen:
                entries.append((sim.now / 3600, seen))
        return out

    planner.plan_with_state = watch   # type: ignore[assignment]
    sim.run(policy)
    end = int(s.days * 86400)

    def wait_s(j: Any) -> int:
        return (j.first_start_s if j.first_start_s is not None else end) - j.submit_s

    jobs = sorted((j for j in sim.jobs if j.id in wanted), key=lambda j: (-wait_s(j), j.id))
    what = "followed" if args.job else args.cls
    print(f"{len(jobs)} {what} jobs in the trace (seed {args.seed}); the longest waits:")
    for j in jobs[:len(jobs) if args.job else args.top]:
        start = "never" if j.first_start_s is None else f"{j.first_start_s / 3600:.2f}"
        print(f"\n{j.id}: arrived at hour {j.submit_s / 3600:.2f}, started at {start}, waited "
              f"{wait_s(j) / 60:.0f} min; options {[(o.accelerator, o.count) for o in j.options]}")
        for hour, (reasons, expected, reservation, held, res) in log.get(j.id, [])[:args.changes]:
            print(f"  hour {hour:.2f}: expected start {expected} h, reservation {reservation}")
            for r in reasons:
                print(f"    reason: {r}")
            for key, occupants in held:
                print(f"    {key}: " + ("; ".join(f"{o[0]} (class value {o[1]}, units {o[2]}, team borrows: {o[3]}, "
                                                  f"running: {o[4]})" for o in occupants) or "empty"))
            for r in res:
                print(f"    reservation on its pools: {r}")


if __name__ == "__main__":
    main()
