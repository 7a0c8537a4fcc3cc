"""bench/bench_reconcile.py runs the real loop against the test API servers with its own stack runner: a small
run of it, so that a change to what the loop asks of a stack runner cannot leave the benchmark broken unseen
(3abe97d's pool guard previews each infra stack before a resize; the benchmark's runner had no preview and the
benchmark stopped with an AttributeError)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_small_bench_reconcile_run_completes_its_steady_cycle_without_errors() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_reconcile.py"), "--jobs", "200", "--pools", "20",
                        "--clusters", "2"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["cycle"]["errors"] == [] and doc["cycle"]["actions"], doc["cycle"]
