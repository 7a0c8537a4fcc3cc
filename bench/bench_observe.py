"""Benchmark: `fleet observe` of 20 clusters, each with 5,000 Workloads, 5,000 JobSets and 2,000 Nodes, from
local Kubernetes API servers (target: < 10 s on the 2-core machine, < 1 GiB peak memory).

    python bench/bench_observe.py [--clusters 20] [--workloads 5000] [--nodes 2000] [--page-size 500]
                                  [--typed]

The servers (tests/kube_api.py, one per cluster) run in a child process so the observer has the GIL to
itself, as it would against real API servers; their objects are the tests' builders (tests/kube_objects.py:
valid against the CRDs), in every phase, encoded once and renamed. The observer is the real code path
(`reconciler.observe.observe`: kubeconfig contexts, the official client, pagination, parsing, the frozen
snapshot), then the snapshot is written as `fleet observe --out FILE` does (cluster by cluster). One JSON line: the seconds
to observe (wall, and the observer's own CPU), the servers' CPU while they answered (they share the 2 cores
with the observer, so on this machine the wall time includes theirs), the seconds to write the snapshot, its
size and sha256 (without the servers' URLs, whose ports are random; `observed_at` is pinned: equal code gives equal bytes, so two versions can be compared), and
the observer's peak RSS (getrusage: the whole process, the Python interpreter and every import included).

`--typed` also times one cluster's Nodes read through the client's own deserialization (`CoreV1Api.list_node`
returning `V1Node` objects), against `--clusters 1 --workloads 0` of the real path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import platform
import re
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from kube_api import KubeCluster, write_kubeconfig
from kube_objects import job_objects, node

from reconciler.observe.files import write_snapshot
from reconciler.observe.kube import Target, observe

OBSERVED_AT = datetime(2026, 11, 23, 4, 0, tzinfo=UTC)
PHASES = ("running", "queued", "admitted", "succeeded", "failed", "evicted")


def _encoded(workloads: int, nodes: int) -> dict[str, list[tuple[tuple[str, str], bytes]]]:
    """Encode one object per (kind, phase) and rename it, instead of encoding 12,000 objects per cluster."""
    out: dict[str, list[tuple[tuple[str, str], bytes]]] = {"workloads": [], "jobsets": [], "nodes": []}
    templates = {p: [json.dumps(o, separators=(",", ":")) for o in job_objects("team", "JOBNAME", "v5p-s", p)]
                 for p in PHASES}
    for i in range(workloads):
        team, job = f"team-{i % 20}", f"job-{i:06d}"
        js, wl = templates[PHASES[i % len(PHASES)]]
        out["jobsets"].append(((team, job), js.replace("JOBNAME", job).replace('"team"', f'"{team}"').encode()))
        out["workloads"].append(((team, f"jobset-{job}-0a1b2"),
                                 wl.replace("JOBNAME", job).replace('"team"', f'"{team}"').encode()))
    tpl = json.dumps(node("NODENAME", node_pool="v5p-4x4x4-sUNIT"), separators=(",", ":"))
    for i in range(nodes):
        out["nodes"].append((("", f"node-{i:05d}"), tpl.replace("NODENAME", f"node-{i:05d}")
                             .replace("UNIT", str(i // 16)).encode()))
    return out


def _serve(n: int, workloads: int, nodes: int, conn: mp.connection.Connection) -> None:
    objs = _encoded(workloads, nodes)
    servers = []
    for i in range(n):
        c = KubeCluster(f"c{i:02d}").start()
        for plural, items in objs.items():
            c.add_listed(plural, items)
        servers.append(c)
    conn.send(([c.url for c in servers], time.process_time()))
    conn.recv()                                   # serve until the benchmark is done
    conn.send(time.process_time())


def _cpu_s() -> float:
    """CPU seconds of this process (all threads): on a loaded machine, closer to the quiet wall time."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--workloads", type=int, default=5000)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--page-size", type=int, default=500)
    ap.add_argument("--typed", action="store_true")
    args = ap.parse_args()
    parent, child = mp.Pipe()
    proc = mp.get_context("fork").Process(target=_serve, args=(args.clusters, args.workloads, args.nodes, child),
                                          daemon=True)
    t = time.perf_counter()
    proc.start()
    urls, server_cpu_ready = parent.recv()
    setup_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        kc = write_kubeconfig(Path(tmp) / "kubeconfig", {f"ctx-{i:02d}": u for i, u in enumerate(urls)})
        targets = [Target(f"c{i:02d}", f"ctx-{i:02d}", "bench") for i in range(len(urls))]
        t, cpu = time.perf_counter(), _cpu_s()
        snap = observe(targets, str(kc), OBSERVED_AT, page_size=args.page_size)
        observe_s, observe_cpu_s = time.perf_counter() - t, _cpu_s() - cpu
        observe_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t = time.perf_counter()
        write_snapshot(Path(tmp) / "snapshot.json", snap)
        json_s = time.perf_counter() - t
        written_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # before the hash's copies
        data = (Path(tmp) / "snapshot.json").read_bytes()
        snapshot_mib = len(data) / 2**20
        sha = hashlib.sha256(re.sub(rb'"server":"[^"]*"', b"", data)).hexdigest()[:16]   # ports are random
        del data
        typed_s = None
        if args.typed:
            from kubernetes import client, config

            cfg = client.Configuration()
            config.load_kube_config(config_file=str(kc), context="ctx-00", client_configuration=cfg)
            api = client.CoreV1Api(client.ApiClient(cfg))
            t = time.perf_counter()
            cont = None
            while True:
                page = api.list_node(limit=args.page_size, _continue=cont)
                cont = page.metadata._continue
                if not cont:
                    break
            typed_s = time.perf_counter() - t
    parent.send("done")
    server_cpu_s = parent.recv() - server_cpu_ready     # answering the observer (and the --typed read)
    proc.join(5)
    bad = [c.name for c in snap.clusters if c.status != "ok"]
    counts = [sum(len(c.workloads) for c in snap.clusters), sum(len(c.jobsets) for c in snap.clusters),
              sum(len(c.nodes) for c in snap.clusters)]
    print(json.dumps({"machine": f"{platform.machine()} {platform.python_version()}", "clusters": args.clusters,
                      "workloads": counts[0], "jobsets": counts[1], "nodes": counts[2], "not_ok": bad,
                      "page_size": args.page_size, "server_setup_s": round(setup_s, 2),
                      "observe_s": round(observe_s, 2), "observe_cpu_s": round(observe_cpu_s, 2),
                      "servers_cpu_s": round(server_cpu_s, 2),
                      "load_average_1m": round(os.getloadavg()[0], 1), "snapshot_write_s": round(json_s, 2),
                      "snapshot_mib": round(snapshot_mib, 1), "snapshot_sha256": sha,
                      "peak_rss_after_observe_mib": round(observe_rss),
                      "peak_rss_mib": round(written_rss),
                      **({"typed_list_nodes_one_cluster_s": round(typed_s, 2)} if typed_s is not None else {})}))


if __name__ == "__main__":
    main()
