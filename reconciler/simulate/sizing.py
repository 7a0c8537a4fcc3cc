"""A fleet sized to a trace, for replaying a trace that brings no fleet of its own (the Alibaba pod lists).
Pure: the repository's files in, the sized repository's files out; nothing is written.

`bench/bench_simulate.py --alibaba CSV --size-to-trace` replays the pod list on this fleet instead of the
example fleet (where it fills 8% of what is paid, which says nothing). The fleet is H100 only (the pods are
mapped onto the fleet's GPU accelerator, alibaba.py), in two clusters, with prices from the packaged catalog
(shared/catalog/FACTS.md: p5.48xlarge on-demand 55.04 and spot 16.95 in us-east-1; a3-highgpu-8g reserved_1y
61.384 and spot 35.396 in us-central1): nothing here is a price.

- **Capacity**: the trace's demand is its accelerator-hours inside the replayed window over the window's hours
  (a job running past the end counts up to the end), once for work that must run on spot (`spot: required`,
  the best-effort pods) and once for the rest. Each is divided by `load` (0.9: the demand is ~90% of the
  capacity) and rounded up to whole 8-GPU nodes. The non-spot nodes are split half reserved (gke-usc1,
  a3-highgpu-8g, always paid, min = max) and the rest on-demand (eks-use1, p5.48xlarge, scaled from 0); the
  spot nodes half in each cluster. The half-reserved split is this module's choice (a fleet committing to
  its base load), not a figure from anywhere.
- **Teams**: the trace has no users or tenants, so a fixed split: `alpha` 50%, `beta` 30%, `gamma` 20% of the
  H100 capacity as nominal quota, in one cohort, each lending all of it and borrowing the rest; the importer
  assigns each pod to a team by a stable hash weighted by these shares. Budgets: each team may pay for the
  whole fleet (the trace has no budgets; they must not bind where the trace does not).
- **Priorities**: the repository's own classes (policies/priorities.yaml); the importer maps the trace's QoS
  onto them (LS to the second-highest class, Burstable to the default, BE to the spot-only class).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..catalog import Catalog
from ..load import load
from ..validate import validate

ACCELERATOR = "nvidia-h100-80gb"
NODE_GPUS = 8
SHARES = (("alpha", 50), ("beta", 30), ("gamma", 20))
KEEP = ("fleet/prices.yaml", "policies/priorities.yaml", "policies/placement.yaml")
"""The repository's files the sized fleet keeps: its price fill-ins and its policies of priority and placement.
Everything else (clusters, teams, SLOs and notifications that name the example's teams, jobs, robots) is
replaced or left out."""


@dataclass(frozen=True)
class Demand:
    """Average accelerators the trace keeps busy over the window: work that must run on spot, and the rest."""

    on_demand: float
    spot: float
    hours: float


@dataclass(frozen=True)
class Size:
    reserved: int           # gke-usc1 a3-highgpu-8g, reserved (min = max)
    on_demand: int          # eks-use1 p5.48xlarge, on-demand
    spot_aws: int           # eks-use1 p5.48xlarge, spot
    spot_gcp: int           # gke-usc1 a3-highgpu-8g, spot

    @property
    def gpus(self) -> int:
        return (self.reserved + self.on_demand + self.spot_aws + self.spot_gcp) * NODE_GPUS


def window(lines: Iterable[str], from_minutes: float) -> list[str]:
    """The trace lines submitted at or after `from_minutes`, shifted so the first of them is at 0."""
    docs = [json.loads(line) for line in lines if line.strip() and not line.lstrip().startswith("#")]
    kept = [d for d in docs if float(d["submit_at_minutes"]) >= from_minutes]
    if not kept:
        return []
    first = min(float(d["submit_at_minutes"]) for d in kept)
    for d in kept:
        d["submit_at_minutes"] = round(float(d["submit_at_minutes"]) - first, 3)
    return [json.dumps(d, separators=(",", ":")) for d in kept]


def jittered(lines: Iterable[str], seed: int, minutes: float) -> list[str]:
    """The trace lines, each submitted up to `minutes` earlier or later (uniform, seeded by `seed`, drawn line by
    line in order; never before 0). A trace replayed as given is one run per policy whatever the seed: the seed
    drew only the faults, which on the Alibaba replay's small fleet seldom struck, so `fleet`'s seeds 1 and 3 gave
    the same figures, and so did `kueue`'s and `kueue-multikueue`'s seeds 2 and 3 (docs/benchmarks.md,
    thirty-third session). Moving
    arrivals by less than a loop interval or two keeps the trace's load and its hours, and shows how much a
    figure owes to the order in which jobs alike arrive."""
    rng = random.Random(seed)
    out = []
    for line in lines:
        d = json.loads(line)
        d["submit_at_minutes"] = round(max(0.0, float(d["submit_at_minutes"]) + rng.uniform(-minutes, minutes)), 3)
        out.append(json.dumps(d, separators=(",", ":")))
    return out


def demand(lines: Iterable[str], days: float) -> Demand:
    """Accelerator-hours of the trace lines' work inside [0, days], over the window's hours, split by whether
    the job must run on spot. A job's accelerators: its first option's count times its replicas."""
    hours = days * 24
    busy = {False: 0.0, True: 0.0}
    for line in lines:
        d = json.loads(line)
        start_h = float(d["submit_at_minutes"]) / 60
        if start_h >= hours:
            continue
        run_h = float(d.get("actual_hours", d.get("duration_hours", 0.0)))
        gpus = int(d["options"][0].get("count", 1)) * int(d.get("replicas", 1))
        busy[d.get("spot") == "required"] += gpus * min(run_h, hours - start_h)
    return Demand(busy[False] / hours, busy[True] / hours, hours)


def size_for(d: Demand, load: float) -> Size:
    """Whole nodes so the demand is about `load` of the capacity (at least one node of each kind asked)."""
    od = max(1, math.ceil(d.on_demand / load / NODE_GPUS))
    spot = max(1, math.ceil(d.spot / load / NODE_GPUS)) if d.spot > 0 else 0
    return Size(reserved=od // 2, on_demand=od - od // 2, spot_aws=spot - spot // 2, spot_gcp=spot // 2)


def _pool(name: str, machine: str, capacity: str, low: int, high: int) -> str:
    return (f"  - name: {name}\n    accelerator: {ACCELERATOR}\n    machine_type: {machine}\n"
            f"    capacity: {capacity}\n    min: {low}\n    max: {high}\n")


def _cluster(name: str, provider: str, region: str, pools: list[str]) -> bytes:
    head = (f"# A fleet sized to a trace (reconciler/simulate/sizing.py).\nname: {name}\nprovider: {provider}\n"
            f"region: {region}\nkubernetes:\n  cluster: {name}\nstatus: active\npools:\n")
    return (head + "".join(pools)).encode()


def sized_files(files: Mapping[str, bytes], size: Size, monthly_usd: float) -> dict[str, bytes]:
    """The repository's priorities, placement and price fill-ins, with the sized clusters and teams.
    `monthly_usd`: what the whole fleet costs a month at its largest (every team's budget)."""
    out = {p: b for p, b in files.items() if p in KEEP}
    aws = [_pool("p5", "p5.48xlarge", "on-demand", 0, size.on_demand)]
    gcp = [_pool("a3-reserved", "a3-highgpu-8g", "reserved", size.reserved, size.reserved)] if size.reserved else []
    if size.spot_aws:
        aws.append(_pool("p5-spot", "p5.48xlarge", "spot", 0, size.spot_aws))
    if size.spot_gcp:
        gcp.append(_pool("a3-spot", "a3-highgpu-8g", "spot", 0, size.spot_gcp))
    out["fleet/clusters/eks-use1.yaml"] = _cluster("eks-use1", "aws", "us-east-1", aws)
    if gcp:
        out["fleet/clusters/gke-usc1.yaml"] = _cluster("gke-usc1", "gcp", "us-central1", gcp)
    total = size.gpus
    nominal = _split(total)
    teams = ["admins: [\"@fleet-admins\"]\ncohorts:\n  - {name: org}\nteams:\n"]
    for (name, _), n in zip(SHARES, nominal, strict=True):
        teams.append(f"  - name: {name}\n    namespace: {name}\n    owners: [\"@{name}\"]\n    cohort: org\n"
                     + (f"    budget_monthly_usd: {math.ceil(monthly_usd)}\n" if monthly_usd > 0 else "")
                     + f"    quota:\n      {ACCELERATOR}: {{nominal: {n}, borrowing_limit: {total - n}, "
                     f"lending_limit: {n}}}\n")
    out["policies/teams.yaml"] = "".join(teams).encode()
    placement = out.get("policies/placement.yaml", b"").decode()
    if "lease_cluster:" in placement and not gcp:          # the lease's cluster must exist
        out["policies/placement.yaml"] = placement.replace("lease_cluster: gke-usc1",
                                                           "lease_cluster: eks-use1").encode()
    return out


def sized_repo(files: Mapping[str, bytes], catalog: Catalog, d: Demand, target: float) -> tuple[dict[str, bytes], Size]:
    """The sized repository for the demand at `target` load, each team's budget the whole fleet's monthly cost
    at its largest (every pool at max, the catalog's unit prices, 730 hours)."""
    size = size_for(d, target)
    v = validate(load(sized_files(files, size, 0.0)), catalog)
    monthly = 730 * sum(rp.max * v.unit_prices[rp.key].hourly_usd for rp in v.pools if rp.key in v.unit_prices)
    return sized_files(files, size, monthly), size


def _split(total: int) -> list[int]:
    """The GPUs split by SHARES, whole numbers summing to `total` (the remainder to the largest share)."""
    weight = sum(w for _, w in SHARES)
    parts = [total * w // weight for _, w in SHARES]
    parts[0] += total - sum(parts)
    return parts
