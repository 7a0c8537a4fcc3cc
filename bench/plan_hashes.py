"""The plan JSON's hash of the example fleet and of four generated fleets (bench/generate.py), from git: run it
at two commits to check that a change to the planner's speed keeps its plans byte for byte.

    python bench/plan_hashes.py [--repo .]

One line per fleet: its name and the first 16 hex digits of the SHA-256 of `fleet plan`'s JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from generate import generate

from reconciler import pipeline
from reconciler.catalog import load_catalog
from reconciler.problems import FleetError
from reconciler.sources import read_worktree

FLEETS = [(4, 40, 6, 200, 1), (4, 40, 6, 200, 2), (6, 60, 8, 300, 3), (20, 1000, 50, 10_000, 7)]
"""(clusters, pools, teams, jobs, seed) of the generated fleets."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", type=Path, default=ROOT)
    args = ap.parse_args()
    catalog = load_catalog()
    try:
        inputs = [("example", read_worktree(args.repo))]
    except FleetError as e:
        sys.exit(f"error: {e.message}" + (f" ({e.hint})" if e.hint else ""))
    inputs += [(f"generated-{c}-{p}-{j}-{s}", {k: text.encode() for k, text in generate(c, p, t, j, s).items()})
               for c, p, t, j, s in FLEETS]
    for name, files in inputs:
        v = pipeline.check(files, catalog)
        if not v.ok:
            sys.exit(f"{name}: not valid: {v.errors[:3]}")
        print(name, hashlib.sha256(pipeline.plan(v).to_json().encode()).hexdigest()[:16], flush=True)


if __name__ == "__main__":
    main()
