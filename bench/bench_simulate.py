"""Benchmark of `fleet simulate`: every policy on the same traces and faults, over several seeds, with spreads.

    python bench/bench_simulate.py [--jobs 10000] [--days 30] [--interval 300] [--load 0.9]
                                   [--seeds 1,2,3] [--policies fleet,fifo,cheapest,kueue,kueue-multikueue]
                                   [--restart-minutes 10] [--trace FILE] [--repo .] [--jobs-parallel N]
                                   [--arrival-jitter-minutes 5]
    python bench/bench_simulate.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 --size-to-trace
    python bench/bench_simulate.py --from-lines RUN.out [MORE.out ...]     # the tables of saved outputs

Per seed: a generated trace of --jobs jobs over --days on the repository's fleet (seeded by the seed; or
--trace FILE, the same trace for every seed but that the seed moves each job's arrival up to
--arrival-jitter-minutes (5, a loop interval; 0: as given) earlier or later), the default fault model seeded by the
seed, and every policy on it, the loop every --interval seconds of simulated time. One JSON line per run
(wall and CPU seconds, the load average, the figures), then per metric a table: each policy's mean and
its range (min-max) over the seeds; then `fleet` against each other policy seed by seed (`paired`). Bigger is better for jobs and accelerator-hours completed and goodput;
smaller for waits, lost work, dollars per kept accelerator-hour and violations.

--alibaba CSV imports an Alibaba cluster-trace-gpu-v2023 pod list (a given trace, jittered as --trace), --from-day
keeps the jobs submitted from that day on; --size-to-trace replays it on an H100 fleet sized so the trace's
demand is --size-load (0.9) of its capacity, instead of the repository's fleet (reconciler/simulate/sizing.py).
--jobs-parallel N runs N (seed, policy) runs at once in worker processes; the figures are those of a
sequential run (each run is the same function of the same inputs), only wall time changes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.problems import FleetError
from reconciler.simulate.alibaba import import_pods
from reconciler.simulate.engine import Engine
from reconciler.simulate.faults import FaultModel
from reconciler.simulate.generate import generate
from reconciler.simulate.policies import make
from reconciler.simulate.results import result
from reconciler.simulate.sizing import Demand, demand, jittered, sized_repo, window
from reconciler.simulate.trace import Trace, load_trace, write_lines
from reconciler.sources import read_worktree

ROOT = Path(__file__).resolve().parents[1]

METRICS: list[tuple[str, Callable[[dict[str, Any]], float], str]] = [
    ("jobs completed", lambda d: d["jobs"]["completed"], "{:,.0f}"),
    ("accelerator-hours completed", lambda d: d["accelerator_hours_completed"], "{:,.0f}"),
    ("production queue wait p99 (min)", lambda d: d["queue_wait_minutes"].get("production", {}).get("p99", 0.0),
     "{:,.0f}"),
    ("production jobs never started", lambda d: d["queue_wait_minutes"].get("production", {}).get("never_started", 0),
     "{:,.0f}"),
    ("production queue wait p99 by accelerator (min)",
     lambda d: d["queue_wait_minutes"].get("production", {}).get("p99_by_accelerator", 0.0), "{:,.0f}"),
    ("production queue wait mean (min)", lambda d: d["queue_wait_minutes"].get("production", {}).get("mean", 0.0),
     "{:,.0f}"),
    ("critical queue wait p99 (min)", lambda d: d["queue_wait_minutes"].get("critical", {}).get("p99", 0.0),
     "{:,.0f}"),
    ("goodput", lambda d: d["goodput"], "{:.3f}"),
    ("allocation", lambda d: d["allocation"], "{:.3f}"),
    ("$ per kept accelerator-hour", lambda d: d["usd_per_kept_accelerator_hour"], "{:,.2f}"),
    ("lost accelerator-hours (incl. restarts)", lambda d: d["lost_accelerator_hours"], "{:,.0f}"),
    ("lost per accelerator-hour run", lambda d: d["_lost_per_run"], "{:.4f}"),
    ("cost ($)", lambda d: d["cost_usd"], "{:,.0f}"),
    ("preemptions", lambda d: d["preemptions"], "{:,.0f}"),
    ("violations: quota accelerator-hours", lambda d: d["violations"]["quota_accelerator_hours"], "{:,.0f}"),
    ("violations: budget team-hours", lambda d: d["violations"]["budget_hours"], "{:,.1f}"),
    ("violations: nominal quota withheld, accelerator-hours",
     lambda d: d["violations"]["nominal_withheld_accelerator_hours"], "{:,.0f}"),
    ("violations: priority inverted within a team, accelerator-hours",
     lambda d: d["violations"].get("priority_inverted_accelerator_hours", 0.0), "{:,.0f}"),
]


HIGHER_IS_BETTER = {"jobs completed", "accelerator-hours completed", "goodput", "allocation"}
"""The metrics where more is better; for every other one of METRICS less is, but `cost ($)`."""
NEITHER = {"cost ($)"}
"""Not better or worse by itself: a policy that runs more work pays more (`$ per kept accelerator-hour` judges)."""


def paired(docs: dict[str, list[dict[str, Any]]], ref: str = "fleet") -> str:
    """`ref` against each other policy seed by seed: every policy of a seed ran on the same trace and faults, so
    the difference per seed is the comparison, not the two means (their spread is mostly the seeds' own). Per
    metric and policy: the mean difference `ref` minus the policy, its range over the seeds, and on how many
    seeds `ref` is better and worse (the rest are ties). Empty when `ref` did not run or ran alone."""
    if ref not in docs or len(docs) < 2:
        return ""
    mine = {d["seed"]: d for d in docs[ref]}
    others = [n for n in docs if n != ref]
    lines = [f"`{ref}` minus each policy, seed by seed: mean difference [min-max], then on how many seeds `{ref}` "
             "is better / worse (the rest tie).", "",
             "| metric | " + " | ".join(f"against `{n}`" for n in others) + " |", "|---|" + "---:|" * len(others)]
    for label, get, fmt in METRICS:
        cells = []
        for n in others:
            pairs = [(float(get(mine[d["seed"]])), float(get(d))) for d in docs[n] if d["seed"] in mine]
            if not pairs:
                cells.append("–")
                continue
            diffs = [a - b for a, b in pairs]
            signed = fmt.replace("{:", "{:+")
            cell = f"{signed.format(statistics.fmean(diffs))} [{signed.format(min(diffs))} to {signed.format(max(diffs))}]"
            if label not in NEITHER:
                sign = 1 if label in HIGHER_IS_BETTER else -1
                better = sum(1 for x in diffs if x * sign > 0)
                worse = sum(1 for x in diffs if x * sign < 0)
                cell += f", {better}/{worse} of {len(diffs)}"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def tables(docs: dict[str, list[dict[str, Any]]], seeds: list[int]) -> str:
    """Each policy's mean over its seeds [min-max]; a policy run on fewer seeds than the others (`--from-lines`)
    says which in its column's head, so no mean is read as over seeds it did not run."""
    names = list(docs)

    def head(n: str) -> str:
        mine = [d["seed"] for d in docs[n]]
        return f"`{n}`" if mine == seeds else f"`{n}` (seeds {', '.join(map(str, mine))})"

    lines = [f"Mean over seeds {', '.join(map(str, seeds))} [min-max]; stdev in the JSON lines.", "",
             "| metric | " + " | ".join(head(n) for n in names) + " |", "|---|" + "---:|" * len(names)]
    for label, get, fmt in METRICS:
        cells = []
        for n in names:
            xs = [float(get(d)) for d in docs[n]]
            cells.append(f"{fmt.format(statistics.fmean(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Setup:
    """What every run needs, picklable: a worker process builds its traces from it (`_trace`)."""

    repo: Path
    jobs: int
    days: float
    load: float
    interval: int
    restart_minutes: float | None
    trace: Path | None
    alibaba: Path | None
    from_day: float
    size_to_trace: bool
    size_load: float
    jitter_minutes: float = 0.0     # a given trace as given; the command line's default is JITTER_MINUTES


JITTER_MINUTES = 5.0
"""--arrival-jitter-minutes' default: a given trace's jobs arrive up to one loop interval (at the default --interval
300) earlier or later, drawn per seed (`sizing.jittered`), so that its seeds are runs that differ."""
MAX_JITTER_MINUTES = 1440.0


def jitter_of(minutes: float | None, given: bool) -> float | str:
    """--arrival-jitter-minutes as the run uses it (None on the command line: not given), or why it cannot be
    used: a number from 0 to a day, not NaN or infinite (NaN passes a `< 0` test and then moved every job to
    minute 0), and only for a given trace (--trace, --alibaba). A generated trace's arrivals are drawn by the seed
    already: a jitter given with one was accepted and ignored before, so a run said to be moved was not."""
    if minutes is None:
        return JITTER_MINUTES if given else 0.0
    if not 0.0 <= minutes <= MAX_JITTER_MINUTES:
        return f"--arrival-jitter-minutes: give 0 to {MAX_JITTER_MINUTES:g} minutes"
    if minutes and not given:
        return ("--arrival-jitter-minutes moves the arrivals of a given trace (an --alibaba pod list or a --trace "
                "file); a generated trace's arrivals are drawn by its seed already: leave the option out or give 0")
    return minutes

_TRACES: dict[tuple[Setup, int], tuple[Trace, dict[str, Any]]] = {}


def _fixed_trace(s: Setup, seed: int) -> tuple[Trace, dict[str, Any]]:
    """The one trace of --trace or --alibaba (windowed by --from-day), on the repository's fleet or, with
    --size-to-trace, on a fleet sized to it (reconciler/simulate/sizing.py); and what was done to it. With
    `jitter_minutes`, each job arrives up to that much earlier or later, drawn by `seed` (`sizing.jittered`):
    the fleet is sized to the trace as given, the same for every seed."""
    files, catalog = read_worktree(s.repo), load_catalog()
    info: dict[str, Any] = {}
    if s.alibaba is not None:
        on = sized_repo(files, catalog, Demand(1.0, 1.0, 1.0), s.size_load)[0] if s.size_to_trace else files
        v = check({p: b for p, b in on.items() if not p.startswith("jobs/")}, catalog)
        imported = import_pods(str(s.alibaba), s.alibaba.read_text(), v)
        assert not imported.problems, imported.problems[:5]
        lines = imported.lines
        info["imported"] = {"pods": len(lines), "skipped": imported.skipped}
    else:
        assert s.trace is not None
        lines = [line for line in s.trace.read_text().splitlines() if line.strip()]
    if s.from_day:
        lines = window(lines, s.from_day * 1440)
    d = demand(lines, s.days)
    info["demand_gpus"] = {"on_demand": round(d.on_demand, 2), "spot": round(d.spot, 2)}
    if s.size_to_trace:
        files, size = sized_repo(files, catalog, d, s.size_load)
        info["sized_fleet"] = {**asdict(size), "gpus": size.gpus,
                               "load": round((d.on_demand + d.spot) / size.gpus, 3)}
    if s.jitter_minutes:
        lines = jittered(lines, seed, s.jitter_minutes)
        info["arrival_jitter_minutes"] = s.jitter_minutes
    trace = load_trace(str(s.alibaba or s.trace), write_lines(lines).encode(), files, catalog)
    assert isinstance(trace, Trace), trace[:5]
    info["jobs"] = len(trace.jobs)
    return trace, info


def _trace(s: Setup, seed: int) -> tuple[Trace, dict[str, Any]]:
    """The seed's trace (generated per seed; a given trace is the same for every seed but for its jitter), built
    once per process."""
    given = s.trace is not None or s.alibaba is not None
    key = (s, seed if not given or s.jitter_minutes else 0)
    if key not in _TRACES:
        if given:
            _TRACES[key] = _fixed_trace(s, seed)
        else:
            files, catalog = read_worktree(s.repo), load_catalog()
            v = check({p: b for p, b in files.items() if not p.startswith("jobs/")}, catalog)
            text = write_lines(generate(v, s.jobs, s.days, seed, s.load))
            trace = load_trace("generated.jsonl", text.encode(), files, catalog)
            assert isinstance(trace, Trace), trace[:5]
            _TRACES[key] = (trace, {"jobs": len(trace.jobs)})
    return _TRACES[key]


def seed_args(ap: argparse.ArgumentParser, seed: int) -> None:
    """The arguments of the one-seed tools (trace_wait.py, waits_by_size.py): the trace as this script builds it."""
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--alibaba", type=Path, default=None, help="an Alibaba pod list, as bench_simulate.py")
    ap.add_argument("--from-day", type=float, default=0.0)
    ap.add_argument("--size-to-trace", action="store_true")
    ap.add_argument("--arrival-jitter-minutes", type=float, default=None,
                    help=f"--alibaba: each job arrives up to this much earlier or later, drawn by the seed, as "
                         f"bench_simulate.py ({JITTER_MINUTES:g} unless given; 0: the trace as given)")
    ap.add_argument("--repo", type=Path, default=ROOT)


def unreadable(path: Path | None) -> str | None:
    """Why a trace or pod list given on the command line cannot be read, or None (no file given, or readable)."""
    if path is None:
        return None
    try:
        with path.open("rb"):
            return None
    except OSError as e:
        return f"{path}: cannot be read ({e.strerror or e}); give the path of the file"


def seed_trace(args: argparse.Namespace) -> tuple[Setup, Trace]:
    """`seed_args`' set-up and the seed's trace (the one `run_one` replays); a trace that does not load exits with
    its message."""
    if (why := unreadable(args.alibaba)) is not None:
        sys.exit(f"error: {why}")
    if isinstance(jitter := jitter_of(args.arrival_jitter_minutes, args.alibaba is not None), str):
        sys.exit(f"error: {jitter}")
    s = Setup(repo=args.repo, jobs=args.jobs, days=args.days, load=0.9, interval=300, restart_minutes=None,
              trace=None, alibaba=args.alibaba, from_day=args.from_day, size_to_trace=args.size_to_trace,
              size_load=0.9, jitter_minutes=jitter)
    try:
        return s, _trace(s, args.seed)[0]
    except FleetError as e:
        sys.exit(f"error: {e.message}" + (f" ({e.hint})" if e.hint else ""))


def seed_engine(args: argparse.Namespace) -> tuple[Setup, Engine]:
    """`seed_trace`, and an engine on that trace as `run_one` builds it (a one-seed bench tool's start)."""
    s, trace = seed_trace(args)
    return s, Engine(trace, faults_of(s), args.seed, s.days, s.interval)


def faults_of(s: Setup) -> FaultModel:
    return FaultModel() if s.restart_minutes is None else FaultModel(restart_minutes=s.restart_minutes)


def run_one(s: Setup, seed: int, name: str) -> dict[str, Any]:
    """One policy on one seed's trace: its figures and how long it took. The same in any process."""
    trace, _ = _trace(s, seed)
    t0, c0 = time.perf_counter(), time.process_time()
    sim = Engine(trace, faults_of(s), seed, s.days, s.interval)
    policy = make(name, sim)
    sim.run(policy)
    d = dict(result(sim, name, s.days, seed).doc)
    d["_lost_per_run"] = round(sim.c.lost_acc_h / sim.c.busy_acc_h, 4) if sim.c.busy_acc_h else 0.0
    if s.trace is not None or s.alibaba is not None:
        d["arrival_jitter_minutes"] = s.jitter_minutes
    return {"policy": name, "seed": seed, "wall_s": round(time.perf_counter() - t0, 1),
            "cpu_s": round(time.process_time() - c0, 1), "load_avg": os.getloadavg()[0], "pid": os.getpid(),
            "cycles": getattr(policy, "cycles", None),
            "lost_by": {k: round(x, 1) for k, x in sorted(sim.c.lost_by.items())}, **d}


def _run_star(task: tuple[Setup, int, str]) -> dict[str, Any]:
    return run_one(*task)


def run_all(s: Setup, seeds: list[int], policies: list[str], parallel: int) -> Iterator[dict[str, Any]]:
    """Every (seed, policy) run, yielded in seed, then policy order. With `parallel` > 1, in that many worker
    processes (`fleet` runs first: they take longest); each run is the same function on the same inputs, so
    the figures are those of a sequential run."""
    tasks = [(s, seed, name) for seed in seeds for name in policies]
    if parallel <= 1:
        yield from map(_run_star, tasks)
        return
    order = sorted(range(len(tasks)), key=lambda i: (tasks[i][2] != "fleet", i))
    with ProcessPoolExecutor(max_workers=parallel, mp_context=get_context("spawn")) as pool:
        futures = {i: pool.submit(_run_star, tasks[i]) for i in order}
        for i in range(len(tasks)):
            yield futures[i].result()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--interval", type=int, default=300)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--policies", default="fleet,fifo,cheapest,kueue,kueue-multikueue")
    ap.add_argument("--restart-minutes", type=float, default=None)
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--alibaba", type=Path, default=None, help="an Alibaba cluster-trace-gpu-v2023 pod list")
    ap.add_argument("--from-day", type=float, default=0.0, help="keep the jobs submitted from this day on")
    ap.add_argument("--size-to-trace", action="store_true", help="replay on a fleet sized to the trace")
    ap.add_argument("--size-load", type=float, default=0.9, help="--size-to-trace: demand over capacity")
    ap.add_argument("--arrival-jitter-minutes", type=float, default=None,
                    help=f"--trace/--alibaba: each job arrives up to this much earlier or later, drawn per seed "
                         f"({JITTER_MINUTES:g} unless given; 0: the trace as given, the same for every seed)")
    ap.add_argument("--jobs-parallel", type=int, default=1, help="runs at once, in worker processes")
    ap.add_argument("--repo", type=Path, default=Path("."))
    args = ap.parse_args()
    if args.size_to_trace and args.alibaba is None:
        ap.error("--size-to-trace sizes an H100 fleet to an Alibaba pod list: give --alibaba CSV")
    if args.trace is not None and args.alibaba is not None:
        ap.error("give --trace or --alibaba, not both")
    for given_file in (args.trace, args.alibaba):
        if (why := unreadable(given_file)) is not None:
            ap.error(why)
    seeds = [int(x) for x in args.seeds.split(",")]
    policies = args.policies.split(",")
    if isinstance(jitter := jitter_of(args.arrival_jitter_minutes, args.trace is not None or args.alibaba is not None),
                  str):
        ap.error(jitter)
    s = Setup(args.repo.resolve(), args.jobs, args.days, args.load, args.interval, args.restart_minutes,
              args.trace, args.alibaba, args.from_day, args.size_to_trace, args.size_load, jitter)
    print(json.dumps({"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                      "load_avg": os.getloadavg(), "jobs_parallel": args.jobs_parallel}), flush=True)
    if args.trace is not None or args.alibaba is not None:
        print(json.dumps(_trace(s, seeds[0])[1]), flush=True)
    t0 = time.perf_counter()
    docs: dict[str, list[dict[str, Any]]] = {n: [] for n in policies}
    for d in run_all(s, seeds, policies, args.jobs_parallel):
        docs[d["policy"]].append(d)
        print(json.dumps(d), flush=True)
    given = args.alibaba or args.trace
    size = (f"trace {given}" + (f" from day {args.from_day:g}" if args.from_day else "")
            + (" on a fleet sized to it" if args.size_to_trace else "")
            + (f", arrivals moved up to {jitter:g} min by the seed" if jitter else "") if given is not None
            else f"generated: {args.jobs} jobs, {args.days:g} days, load {args.load}")
    print(f"\n{size}, interval {args.interval} s, restart {faults_of(s).restart_minutes:g} min, "
          f"{time.perf_counter() - t0:.0f} s wall with {args.jobs_parallel} process(es)\n")
    print(tables(docs, seeds))
    print(paired(docs))


def from_lines(outputs: list[tuple[str, str]]) -> tuple[dict[str, list[dict[str, Any]]], list[int]]:
    """The runs of earlier outputs of this script, (name, text) each (their JSON lines with a `policy` and a
    `seed`; the rest is skipped), each policy's in seed order: tables of runs made apart, e.g. more seeds added
    later. A (policy, seed) given twice must have the same figures (a run is a function of its inputs), and a
    line that starts a JSON object must be one (a run cut off while writing); else SystemExit naming it."""
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    for name, text in outputs:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.startswith("{"):
                continue
            try:
                d = json.loads(line)
            except ValueError as e:
                raise SystemExit(f"{name}:{number}: not a whole JSON line ({e}): was the run cut off? Remove the "
                                 "line or run that seed again") from None
            if isinstance(d, dict) and "policy" in d and "seed" in d:
                _add_run(runs, d)
    docs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in runs}   # the policies in the files' order
    for (name, _), d in sorted(runs.items(), key=lambda kv: kv[0][1]):
        docs[name].append(d)
    return docs, sorted({seed for _, seed in runs})


def _add_run(runs: dict[tuple[str, int], dict[str, Any]], d: dict[str, Any]) -> None:
    jitter = {r.get("arrival_jitter_minutes") or None for r in runs.values()} | {d.get("arrival_jitter_minutes") or None}
    if len(jitter) > 1:
        raise SystemExit(f"policy {d['policy']}, seed {d['seed']}: runs of a given trace with different arrival "
                         f"jitter ({', '.join(sorted(map(str, jitter)))}; None: the trace as given, 0 or a line from "
                         "before the jitter) cannot share a table: give the lines of one --arrival-jitter-minutes")
    key = (d["policy"], d["seed"])
    if key in runs and {k: v for k, v in runs[key].items() if k not in TIMING} != \
            {k: v for k, v in d.items() if k not in TIMING}:
        raise SystemExit(f"policy {key[0]}, seed {key[1]} is given twice with different figures: were they "
                         "run on different code, trace or fleet?")
    runs[key] = d


TIMING = {"wall_s", "cpu_s", "load_avg", "pid"}
"""What may differ between two runs of the same (policy, seed): how long it took, and where."""


def tabulate() -> None:
    """`--from-lines FILE...`: the tables of saved outputs, without running anything."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--from-lines", nargs="+", type=Path, required=True)
    args = ap.parse_args()
    for path in args.from_lines:
        if (why := unreadable(path)) is not None:
            ap.error(why)
    docs, seeds = from_lines([(str(p), p.read_text(errors="replace")) for p in args.from_lines])
    if not docs:
        raise SystemExit("no runs in the files given (JSON lines with a policy and a seed)")
    print(tables(docs, seeds))
    print(paired(docs))


if __name__ == "__main__":
    tabulate() if "--from-lines" in sys.argv else main()
