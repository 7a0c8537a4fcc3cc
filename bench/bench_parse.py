"""Benchmark: decoding and parsing one list page of the reconcile benchmark's JobSets and Workloads, alone (what
a memo of parsed objects by `resourceVersion` could save in `fleet reconcile`'s observe stage).

    python bench/bench_parse.py [--objects 500] [--repeat 10]

The objects are the tests' builders (tests/kube_objects.py, as bench_reconcile.py serves them): `--objects`
running jobs' JobSets and Workloads, one page of each. One JSON line: per kind, the page's bytes and the CPU
milliseconds of `wire.decode_page` and of `parse.parse_jobset` / `parse_workload` over its items, the mean
of `--repeat` runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from kube_objects import job_objects

from reconciler.observe import parse
from reconciler.observe.wire import decode_page


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    objs = [o for i in range(args.objects)
            for o in job_objects("team-001", f"job-{i:05d}", "pool-1", "running", admitted=400)]
    out: dict[str, object] = {"machine": f"{platform.machine()} {platform.python_version()}",
                              "objects": args.objects}
    for kind, plural, fn in (("JobSet", "jobsets", parse.parse_jobset), ("Workload", "workloads", parse.parse_workload)):
        body = json.dumps({"kind": "List", "metadata": {}, "items": [o for o in objs if o["kind"] == kind]}).encode()
        t = time.process_time()
        for _ in range(args.repeat):
            page = decode_page(plural, body)
        decode_ms = (time.process_time() - t) / args.repeat * 1000
        assert page is not None
        t = time.process_time()
        for _ in range(args.repeat):
            for raw in page[0]:
                fn(raw)
        parse_ms = (time.process_time() - t) / args.repeat * 1000
        out[plural] = {"bytes": len(body), "decode_cpu_ms": round(decode_ms, 1), "parse_cpu_ms": round(parse_ms, 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
