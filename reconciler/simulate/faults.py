"""The fault model of `fleet simulate`, on by default, and where each number comes from. Pure.

- Node failures. Meta reported 419 unexpected interruptions in 54 days of Llama 3 405B pre-training on
  16,384 H100 GPUs (Dubey et al., "The Llama 3 Herd of Models", 2024, section 3.3.4): 419 / (54 x 16,384 / 8)
  = 3.79 failures per 1,000 eight-GPU node-days, i.e. 1.97e-5 per GPU-hour (`NODE_FAILURES_PER_ACC_HOUR`).
  Every accelerator of a ready unit fails at that rate, whichever its kind: a GPU node takes its own jobs
  down; a TPU slice goes down whole when any of its hosts fails ("slice" faults; the TPU rate per chip is
  assumed equal to the GPU one, as no comparable public figure exists).
- Repair. A GPU node is replaced (re-created) in about an hour (`GPU_REPAIR_MINUTES`); a faulty TPU host
  takes days (`TPU_REPAIR_HOURS` = 48), during which its slice cannot be used. A job that lost its gang
  restarts from its last checkpoint once it is placed again and its gang is ready.
- Spot reclaims: every ready spot unit is reclaimed at `spot_reclaims_per_hour` (default 0.0005 per unit-hour,
  about 36% per unit per month; configurable with `--spot-reclaims-per-hour`). AWS's Spot Instance Advisor
  buckets instance types by monthly interruption frequency, the highest bucket being ">20%"; GCP documents
  no rate. GPU and TPU spot capacity is scarce, so the default sits above that highest bucket. A reclaimed
  unit is gone (no longer paid) and may be provisioned again.
- Scheduled outages: `--outage CLUSTER@HOUR+HOURS` takes a whole cluster down at simulated hour HOUR for
  HOURS hours: its jobs are interrupted, nothing can start there, and its cloud units are not paid.
- Repair or re-creation. Owned and reserved units are repaired in place (the repair times above, paid all
  along); an on-demand or spot GPU node or TPU slice is re-created by the cloud (GKE node auto-repair, EKS
  node replacement): a new unit, provisioned again (cluster.py's provisioning delays), not down for a repair.
- Restart cost: every interruption of a running job costs a restore from its checkpoint and a warm-up
  (image pull, process-group init, compilation, data pipeline) before its work progresses again:
  `restart_minutes` per job in the trace, else `RESTART_MINUTES` (10, an assumption, not a measurement:
  restores of tens of GB from object storage plus XLA/NCCL warm-up take minutes; change it with
  `--restart-minutes`). It is counted in `lost_accelerator_hours` ("lost to restart").
Work since a job's last checkpoint is lost on every interruption (faults, reclaims, outages, preemptions
and moves alike).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..problems import UsageError
from ..suggest import did_you_mean

LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16_384
NODE_FAILURES_PER_ACC_HOUR = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * 24 * LLAMA3_GPUS)
GPU_REPAIR_MINUTES = 60.0
TPU_REPAIR_HOURS = 48.0
SPOT_RECLAIMS_PER_HOUR = 0.0005
RESTART_MINUTES = 10.0


@dataclass(frozen=True, slots=True)
class Outage:
    cluster: str
    start_hours: float
    hours: float


@dataclass(frozen=True, slots=True)
class FaultModel:
    node_failures_per_acc_hour: float = NODE_FAILURES_PER_ACC_HOUR
    gpu_repair_minutes: float = GPU_REPAIR_MINUTES
    tpu_repair_hours: float = TPU_REPAIR_HOURS
    spot_reclaims_per_hour: float = SPOT_RECLAIMS_PER_HOUR
    outages: tuple[Outage, ...] = ()
    restart_minutes: float = RESTART_MINUTES

    @staticmethod
    def off(outages: tuple[Outage, ...] = (), restart_minutes: float = RESTART_MINUTES) -> FaultModel:
        """No random faults (outages still happen); an interruption still costs its restart."""
        return FaultModel(0.0, GPU_REPAIR_MINUTES, TPU_REPAIR_HOURS, 0.0, outages, restart_minutes)


_OUTAGE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)@([0-9]+(\.[0-9]+)?)\+([0-9]+(\.[0-9]+)?)$")


def parse_outage(text: str, clusters: tuple[str, ...]) -> Outage:
    """`CLUSTER@HOUR+HOURS`, e.g. `gke-use5@48+6`; a usage error naming what is wrong otherwise."""
    m = _OUTAGE.match(text.strip())
    if m is None:
        raise UsageError(f"--outage {text!r} is not CLUSTER@HOUR+HOURS",
                         "e.g. --outage gke-use5@48+6: cluster gke-use5 is down from hour 48 for 6 hours")
    name, start, hours = m.group(1), float(m.group(3)), float(m.group(5))
    if name not in clusters:
        raise UsageError(f"--outage {text!r}: no cluster `{name}` in fleet/clusters",
                         did_you_mean(name, clusters, choose="clusters of the fleet", limit=99))
    if hours <= 0 or not math.isfinite(start + hours):
        raise UsageError(f"--outage {text!r}: the outage lasts no time", "give HOURS > 0, e.g. +6")
    return Outage(name, start, hours)


def poisson(rng_random: float, mean: float) -> int:
    """A Poisson(mean) draw by inversion from one uniform number (means here are far below 30)."""
    k, p = 0, math.exp(-mean)
    total = p
    while rng_random > total and k < 1000:
        k += 1
        p *= mean / k
        total += p
    return k
