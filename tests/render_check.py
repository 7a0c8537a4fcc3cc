"""Reading rendered output back as a (much simplified) Kueue would: used by the render tests.

`admission(files)` parses the ClusterQueues and JobSets of every cluster, matches each JobSet's pods to the
one ResourceFlavor whose nodeLabels its nodeSelector carries, and returns per (cluster, team, flavor,
resource) the quota and the usage, so tests can check that Kueue's quota rules admit every placed job.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import yaml

DEVICES = ("google.com/tpu", "nvidia.com/gpu", "aws.amazon.com/neuron")


@dataclass
class Cell:
    nominal: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    used: int = 0
    declared: bool = False          # False: the ClusterQueue does not list this flavor/resource


@dataclass
class ClusterView:
    cohort_of: dict[str, str | None] = field(default_factory=dict)         # team -> cohort
    parent: dict[str, str | None] = field(default_factory=dict)            # cohort -> parent
    cells: dict[tuple[str, str, str], Cell] = field(default_factory=lambda: defaultdict(Cell))  # team, flavor, res
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)

    def root(self, team: str) -> str | None:
        c = self.cohort_of.get(team)
        while c is not None and self.parent.get(c):
            c = self.parent[c]
        return c


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def admission(files: dict[str, str]) -> dict[str, ClusterView]:
    views: dict[str, ClusterView] = defaultdict(ClusterView)
    for path, text in files.items():
        if not path.endswith("/kueue.yaml"):
            continue
        v = views[path.split("/")[0]]
        for d in docs(text):
            if d["kind"] == "ResourceFlavor":
                v.flavors[d["metadata"]["name"]] = d["spec"]["nodeLabels"]
            elif d["kind"] == "Cohort":
                v.parent[d["metadata"]["name"]] = d["spec"].get("parentName")
            elif d["kind"] == "ClusterQueue":
                team = d["metadata"]["name"]
                v.cohort_of[team] = d["spec"].get("cohortName")
                for rg in d["spec"]["resourceGroups"]:
                    for fl in rg["flavors"]:
                        for r in fl["resources"]:
                            if r["name"] in DEVICES:
                                v.cells[(team, fl["name"], r["name"])] = Cell(
                                    r["nominalQuota"], r.get("borrowingLimit"), r.get("lendingLimit"), declared=True)
    for path, text in files.items():
        if "/jobsets/" not in path and "/services/" not in path:
            continue
        v = views[path.split("/")[0]]
        for obj in docs(text):
            if obj["kind"] == "Service":
                continue
            team = obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
            for pod, pods in workload_pods(obj):
                selector = pod["nodeSelector"]
                matches = [f for f, labels in v.flavors.items() if labels.items() <= selector.items()]
                assert len(matches) == 1, f"{path}: nodeSelector {selector} matches flavors {matches}"
                for res, n in pod["containers"][0]["resources"]["requests"].items():
                    if res in DEVICES:
                        v.cells[(team, matches[0], res)].used += pods * n
    return dict(views)


def workload_pods(obj: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
    """(pod spec, how many pods) of a JobSet, Deployment or LeaderWorkerSet."""
    if obj["kind"] == "JobSet":
        return [(rj["template"]["spec"]["template"]["spec"], rj["replicas"] * rj["template"]["spec"]["parallelism"])
                for rj in obj["spec"]["replicatedJobs"]]
    if obj["kind"] == "Deployment":
        return [(obj["spec"]["template"]["spec"], obj["spec"]["replicas"])]
    assert obj["kind"] == "LeaderWorkerSet", obj["kind"]
    lwt = obj["spec"]["leaderWorkerTemplate"]
    return [(lwt["workerTemplate"]["spec"], obj["spec"]["replicas"] * lwt["size"])]


def cohort_shortfalls(view: ClusterView) -> list[str]:
    """Per cohort tree and flavor/resource of one cluster: what its members borrow beyond what the others
    lend (Kueue lends min(lendingLimit, unused nominal) of each queue). Empty when Kueue can admit it all."""
    borrowed: dict[tuple[str | None, str, str], int] = defaultdict(int)
    lendable: dict[tuple[str | None, str, str], int] = defaultdict(int)
    for (team, flavor, res), c in view.cells.items():
        key = (view.root(team), flavor, res)
        borrowed[key] += max(0, c.used - c.nominal)
        unused = max(0, c.nominal - c.used)
        lendable[key] += unused if c.lending_limit is None else min(c.lending_limit, unused)
    return sorted(f"{k[1]}/{k[2]} in cohort {k[0]}: {b} borrowed, {lendable[k]} lendable"
                  for k, b in borrowed.items() if b > lendable[k])


def whole_split_exists(total: int, flavors: list[tuple[int, int, int | None]]) -> bool:
    """Whether `total` can be split as n_f, each a multiple of unit_f with lo_f <= n_f <= hi_f (hi None: no
    bound), for `flavors` = [(unit, lo, hi)]. Reachable sums as the bits of an int: plain and slow on
    purpose (one shift per count), so it does not share quota.py's knapsack."""
    lows = [-(-lo // u) * u for u, lo, _ in flavors]
    target = total - sum(lows)
    if target < 0:
        return False
    full = (1 << (target + 1)) - 1
    reach = 1
    for (u, _, hi), lo in zip(flavors, lows, strict=True):
        most = target // u if hi is None else max(0, (hi - lo) // u)
        step = reach
        for _ in range(min(most, target // u)):
            step = (step << u) & full
            reach |= step
    return bool(reach >> target & 1)
