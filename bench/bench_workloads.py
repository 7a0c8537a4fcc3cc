"""Benchmark of issue 26's workloads in `fleet simulate`: what elastic gangs and queued provisioning change.

    python bench/bench_workloads.py [--jobs 300] [--days 3] [--seeds 3] [--share 0.5] [--load 0.9] [--interval 300]

The `fleet` policy only, per seed 1..--seeds on the same generated trace: `base` (the trace as generated, on the
fleet with no queued pool), `elastic` (--share of the eligible training jobs as elastic gangs, `workers` from a
quarter of their units to all of them, same duration at all of them), `queued` (the base trace on the fleet whose
on-demand TPU v6e pools are `provisioning: queued`: flex-start price where FACTS.md has one,
QUEUED_GRANT_MINUTES more to get each unit), `all kinds` (Ray, elastic and groups). "most interruptions of one
job": the most times one job was stopped while it ran (faults, preemptions, moves and elastic resizes, each a
restart). Each cell is the mean over
the seeds and, in brackets, the lowest and highest seed's figure. (The policies against each other:
bench/bench_simulate.py.)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.simulate.engine import Engine
from reconciler.simulate.faults import FaultModel
from reconciler.simulate.generate import KINDS, generate
from reconciler.simulate.policies import make
from reconciler.simulate.results import result
from reconciler.simulate.trace import Trace, load_trace, write_lines
from reconciler.sources import read_worktree


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--days", type=float, default=3.0)
    ap.add_argument("--interval", type=int, default=300)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--repo", type=Path, default=Path("."))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--share", type=float, default=0.5)
    workloads_table(ap.parse_args())


def _queued(files: dict[str, bytes], on: bool) -> dict[str, bytes]:
    """The fleet with every on-demand TPU v6e pool of a gcp cluster (min 0) queued (`on`), or none queued."""
    out = dict(files)
    for path, raw in files.items():
        if path.startswith("fleet/clusters/"):
            doc = yaml.safe_load(raw)
            for p in doc.get("pools", []):
                p.pop("provisioning", None)
                if on and doc.get("provider") == "gcp" and p["accelerator"] == "tpu-v6e" \
                        and p.get("capacity", "on-demand") == "on-demand" and not p.get("min"):
                    p["provisioning"] = "queued"
                out[path] = yaml.safe_dump(doc, sort_keys=False).encode()
    return out


def workloads_table(args: argparse.Namespace) -> None:
    catalog = load_catalog()
    files = read_worktree(args.repo)
    fleets = {"base": _queued(files, False), "queued": _queued(files, True)}
    variants = (("base", "base", 0.0, frozenset()), ("elastic", "base", args.share, frozenset({"elastic"})),
                ("queued", "queued", 0.0, frozenset()), ("all kinds", "base", args.share, KINDS))
    rows: dict[str, dict[str, list[float]]] = {}
    for name, fleet, share, kinds in variants:
        for seed in range(1, args.seeds + 1):
            repo = fleets[fleet]
            v = check({p: b for p, b in repo.items() if not p.startswith("jobs/")}, catalog)
            text = write_lines(generate(v, args.jobs, args.days, seed, args.load, share, kinds))
            trace = load_trace("generated.jsonl", text.encode(), repo, catalog)
            assert isinstance(trace, Trace), trace[:5]
            t0 = time.perf_counter()
            sim = Engine(trace, FaultModel(), seed, args.days, args.interval)
            sim.run(make("fleet", sim))
            d = result(sim, "fleet", args.days, seed).doc
            waits = d["queue_wait_minutes"]
            cells = {"research wait p50 (min)": waits.get("research", {}).get("p50", 0.0),
                     "production wait p99 (min)": waits.get("production", {}).get("p99", 0.0),
                     "goodput": d["goodput"], "cost ($)": d["cost_usd"],
                     "completed": float(d["jobs"]["completed"]), "lost acc-h": d["lost_accelerator_hours"],
                     "most interruptions of one job": float(max((j.interruptions for j in sim.jobs), default=0))}
            print(json.dumps({"variant": name, "seed": seed, "wall_s": round(time.perf_counter() - t0, 1),
                              **cells}), flush=True)
            for k, x in cells.items():
                rows.setdefault(k, {}).setdefault(name, []).append(float(x))
    names = [n for n, *_ in variants]
    print(f"\n{args.jobs} generated jobs, {args.days:g} days, load {args.load}, seeds 1-{args.seeds}, `fleet` policy, "
          f"default faults; mean [lowest, highest seed]\n")
    print("| | " + " | ".join(f"`{n}`" for n in names) + " |\n|---|" + "---:|" * len(names))
    for metric, by in rows.items():
        fmt = "{:.1%}" if metric == "goodput" else "{:,.0f}" if metric in ("cost ($)", "completed") \
            or metric.startswith("most") else "{:,.1f}"
        print(f"| {metric} | " + " | ".join(
            f"{fmt.format(sum(by[n]) / len(by[n]))} [{fmt.format(min(by[n]))}, {fmt.format(max(by[n]))}]"
            for n in names) + " |")


if __name__ == "__main__":
    main()
