"""Resolved views of pools and job options: what one unit of a pool is, and what one gang of a job needs.

The YAML leaves things to defaults (a pool's machine type, a TPU option's shape from `count:`); the validator
and the planner both need the concrete answer, so it is computed once here, from the models and the
catalog. Pure. `gang_fit` is the single definition of "this option could run on this pool if it were empty",
used by the validator's "fits no pool" check and by the planner.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import overload

from .catalog import Catalog, shape_chips
from .models import Cluster, Job, JobOption, Pool
from .suggest import did_you_mean

Issue = tuple[tuple[str | int, ...], str, str]
"""(field path, message, hint): a problem before it is located in a file."""


@dataclass(frozen=True, slots=True)
class ResolvedPool:
    cluster: str
    name: str
    provider: str
    region: str
    status: str
    accelerator: str
    kind: str                     # tpu | gpu | trainium
    shape: str | None             # TPU slice shape
    machine_type: str | None      # None on-prem
    unit_accelerators: int        # chips per slice (TPU) or accelerators per node
    nodes_per_unit: int           # TPU hosts per slice; 1 otherwise
    node_cpus: int | None         # per node; None when the catalog does not know
    node_memory_gib: int | None
    capacity: str
    min: int
    max: int
    scaling: str
    compact: bool
    zone: str | None = None       # the cluster's zone, if it has one (a replica spread domain: plan/spread.py)
    queued: bool = False          # `provisioning: queued`: units granted through a ProvisioningRequest (issue 26)

    @property
    def key(self) -> str:
        return f"{self.cluster}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResolvedOption:
    index: int
    accelerator: str
    kind: str
    shape: str | None             # TPU: the exact slice shape (from topology or count)
    slices: int                   # TPU slices per gang
    count: int                    # accelerators per gang: chips over all slices, or GPUs
    relative_speed: float
    cpus: int | None
    memory_gib: int | None


@overload
def run_hours(duration: float, relative_speed: float) -> float: ...
@overload
def run_hours(duration: None, relative_speed: float) -> None: ...
@overload
def run_hours(duration: float | None, relative_speed: float) -> float | None: ...
def run_hours(duration: float | None, relative_speed: float) -> float | None:
    """How long a job runs on an option: `duration_hours` is its runtime on its first option (the reference of
    `relative_speed`), so an option of relative_speed s runs it in duration / s, as the simulator runs it and as
    placement and re-pack already rank cost per hour of work. None: the job has no duration_hours. Before
    2026-12-07 (thirty-ninth session) every end, backfill, hold, run cost and Slurm time limit used the duration
    whatever the option: a job backfilled on an option at 0.5 ran into the reservation it was to end before."""
    if duration is None or relative_speed == 1.0:
        return duration
    return duration / relative_speed


def resolve_pool(cluster: Cluster, pool: Pool, catalog: Catalog) -> tuple[ResolvedPool | None, list[Issue]]:
    """The concrete unit of `pool`, or the issues that prevent knowing it."""
    issues: list[Issue] = []
    acc = catalog.accelerators.get(pool.accelerator)
    if acc is None:
        return None, [(("accelerator",), f"unknown accelerator `{pool.accelerator}`",
                       did_you_mean(pool.accelerator, catalog.accelerators, limit=99))]
    if acc.is_tpu and cluster.provider != "gcp":
        return None, [(("accelerator",), f"TPUs run on GCP only, but cluster `{cluster.name}` is {cluster.provider}",
                       "move the pool to a gcp cluster")]
    shape = pool.topology
    if acc.is_tpu:
        if shape is None:
            return None, [(("topology",), f"TPU pool needs a `topology` (slice shape) for {pool.accelerator}",
                           "add e.g. `topology: " + (acc.shapes[3] if len(acc.shapes) > 3 else acc.shapes[0]) + "`")]
        why = catalog.shape_problem(pool.accelerator, shape)
        if why:
            return None, [(("topology",), why, "valid shapes include: " + ", ".join(acc.shapes))]
    elif shape is not None:
        return None, [(("topology",), f"`topology` applies to TPU pools only, and {pool.accelerator} is a {acc.kind}",
                       "remove it")]

    machine_type = pool.machine_type
    node = pool.node
    if cluster.provider == "onprem" or cluster.provider == "slurm":     # owned hardware: its shape is stated
        if node is None:
            issues.append((("node",), f"an {'on-prem' if cluster.provider == 'onprem' else 'Slurm'} pool needs "
                           "its node shape",
                           "add `node: {accelerators: 8, cpus: 192, memory_gib: 2048}`"))
        if machine_type is not None and machine_type not in catalog.machine_types:
            machine_type = None  # a free-form label on-prem
    else:
        if machine_type is None:
            machine_type = catalog.default_machine_type(pool.accelerator, shape, cluster.provider)
            if machine_type is None:
                return None, [(("machine_type",), f"the catalog has no {cluster.provider} machine type for "
                               f"{pool.accelerator}", "set `machine_type:` to the instance type of the pool")]
        mt = catalog.machine_types.get(machine_type)
        if mt is None:
            known = [k for k, m in catalog.machine_types.items() if m.accelerator == pool.accelerator]
            return None, [(("machine_type",), f"unknown machine type `{machine_type}`",
                           "machine types with " + pool.accelerator + ": " + (", ".join(known) or "none"))]
        if mt.accelerator != pool.accelerator:
            return None, [(("machine_type",), f"`{machine_type}` carries {mt.accelerator}, not {pool.accelerator}",
                           "fix the accelerator or the machine type")]
        if mt.provider != cluster.provider:
            return None, [(("machine_type",), f"`{machine_type}` is a {mt.provider} machine type, but cluster "
                           f"`{cluster.name}` is {cluster.provider}", "use a machine type of the cluster's cloud")]
        if acc.is_tpu and shape is not None:
            expected = catalog.default_machine_type(pool.accelerator, shape, "gcp")
            chips = shape_chips(shape)
            single_host_ok = chips <= mt.accelerators and chips == mt.accelerators
            if machine_type != expected and not single_host_ok:
                return None, [(("machine_type",), f"a {shape} slice of {pool.accelerator} ({chips} chips) does not run "
                               f"on `{machine_type}` ({mt.accelerators} chips per VM)",
                               f"use `{expected}`, or remove machine_type to get it")]

    if issues:
        return None, issues
    if acc.is_tpu and shape is not None:
        assert machine_type is not None
        mt = catalog.machine_types[machine_type]
        unit = shape_chips(shape)
        nodes = max(1, unit // mt.accelerators)
        cpus, mem = mt.vcpus, mt.memory_gib
    elif node is not None:
        unit, nodes, cpus, mem = node.accelerators, 1, node.cpus, node.memory_gib
    else:
        assert machine_type is not None
        mt = catalog.machine_types[machine_type]
        unit, nodes, cpus, mem = mt.accelerators, 1, mt.vcpus, mt.memory_gib
    if node is not None and acc.is_tpu:
        cpus, mem = node.cpus, node.memory_gib
    return ResolvedPool(
        cluster=cluster.name, name=pool.name, provider=cluster.provider, region=cluster.region,
        status=cluster.status, accelerator=pool.accelerator, kind=acc.kind, shape=shape,
        machine_type=machine_type, unit_accelerators=unit, nodes_per_unit=nodes, node_cpus=cpus,
        node_memory_gib=mem, capacity=pool.capacity, min=pool.min, max=pool.max, scaling=pool.scaling,
        compact=pool.placement == "compact" or acc.is_tpu, zone=cluster.zone,
        queued=pool.provisioning == "queued",
    ), []


def resolve_option(index: int, option: JobOption, catalog: Catalog) -> tuple[ResolvedOption | None, list[Issue]]:
    """The concrete gang of one job option, or the issues with it. Field paths are relative to the option."""
    acc = catalog.accelerators.get(option.accelerator)
    if acc is None:
        return None, [(("accelerator",), f"unknown accelerator `{option.accelerator}`",
                       did_you_mean(option.accelerator, catalog.accelerators, limit=99))]
    shape = option.topology
    if acc.is_tpu:
        if (shape is None) == (option.count is None):
            return None, [(("topology",), "a TPU option needs exactly one of `topology` and `count`",
                           "give the slice shape (`topology: 4x4x4`) or the chips (`count: 64`), not both")]
        if shape is not None:
            why = catalog.shape_problem(option.accelerator, shape)
            if why:
                return None, [(("topology",), why, "valid shapes include: " + ", ".join(acc.shapes))]
        else:
            assert option.count is not None
            shape = catalog.shape_for_count(option.accelerator, option.count)
            if shape is None:
                biggest = max(acc.shapes, key=shape_chips)
                return None, [(("count",), f"{option.count} chips is more than the largest {option.accelerator} "
                               f"slice ({biggest}, {shape_chips(biggest)} chips)",
                               f"use `slices:` to spread the job over several {biggest} slices")]
        chips = shape_chips(shape)
        return ResolvedOption(index, option.accelerator, acc.kind, shape, option.slices, chips * option.slices,
                              option.relative_speed, option.cpus, option.memory_gib), []
    if shape is not None:
        return None, [(("topology",), f"`topology` applies to TPUs only, and {option.accelerator} is a {acc.kind}",
                       "give the number of GPUs with `count:`")]
    if option.count is None:
        return None, [(("count",), f"a {acc.kind} option needs `count:` (accelerators in total)",
                       "add e.g. `count: 8`")]
    if option.slices != 1:
        return None, [(("slices",), "`slices` applies to TPU options only", "remove it; use `count:` for GPUs")]
    return ResolvedOption(index, option.accelerator, acc.kind, None, 1, option.count, option.relative_speed,
                          option.cpus, option.memory_gib), []


def repeated(resolved: list[ResolvedOption]) -> list[tuple[int, str, str]]:
    """(index, message, hint) for each option that asks for the shape of an earlier one: accelerator, slice shape
    or count, slices, cpus and memory as resolved, so tpu-v5e `count: 8` and `topology: 2x4` are one shape. It
    runs on the same pools at the same prices, so the planner never picks it over the earlier one, or, where their
    speeds differ (the file then states two speeds for one shape), never the slower (it ranks options by cost
    per unit of work). Found by the forty-first session's review: such a job was accepted without a word, and
    `fleet explain` listed each of its pools twice."""
    seen: dict[tuple[object, ...], ResolvedOption] = {}
    out: list[tuple[int, str, str]] = []
    for ro in resolved:
        first = seen.setdefault((ro.accelerator, ro.shape, ro.slices, ro.count, ro.cpus, ro.memory_gib), ro)
        if first is ro:
            continue
        what = f"{ro.accelerator} {ro.shape}" if ro.shape else f"{ro.count}x {ro.accelerator}"
        what += f", {ro.slices} slices" if ro.slices > 1 else ""
        differ = ro.relative_speed != first.relative_speed
        speeds = (f" at relative_speed {ro.relative_speed:g} against its {first.relative_speed:g}: one shape runs "
                  "the job at one speed") if differ else ""
        never = first if ro.relative_speed > first.relative_speed else ro    # cost per unit of work ranks them
        out.append((ro.index, f"option {ro.index} asks for the shape of option {first.index} ({what}){speeds}; the "
                    f"planner never picks option {never.index}",
                    f"remove option {never.index}" + (", or correct the relative_speed that is wrong" if differ
                                                       else "")))
    return out


def spot_policy(job: Job, class_spot: str | None) -> str:
    """never | allowed | required: the job's, unless its priority class requires spot."""
    return "required" if class_spot == "required" else job.spot


def away_from_data(job: Job, pool: ResolvedPool) -> bool:
    """The pool is outside the job's `data_region`: the first thing every planner avoids for the job, and the
    criterion between work and cost when plans are compared (improve.plan_key, exact.py)."""
    return job.data_region is not None and pool.region != job.data_region


def spread_of(job: Job) -> str:
    """How the job's replicas spread (plan/spread.py): `zone` (the default for an inference job with 2+
    replicas), `cluster`, or `none` (one replica, not inference, or `spread: none`)."""
    if job.kind != "inference" or job.replicas < 2:
        return "none"
    return job.spread or "zone"


def domain(pool: ResolvedPool, how: str) -> str:
    """The failure domain of `pool` for a job spread `how` (zone or cluster), as words for messages."""
    if how == "zone" and pool.zone is not None:
        return f"zone {pool.zone}"
    return f"cluster {pool.cluster}"


def residency_fit(job: Job, pool: ResolvedPool) -> str | None:
    """Why `data_residency: required` keeps the job off `pool` (outside its `data_region`); None if it may run
    there. A hard rule for every planner (greedy, exact) and for stickiness; `preferred` is only a preference."""
    if job.data_residency == "required" and away_from_data(job, pool):
        return f"it is in {pool.region}, outside the job's data_region {job.data_region} (data_residency: required)"
    return None


def gang_fit(opt: ResolvedOption, pool: ResolvedPool, spot: str, kind: str) -> str | None:
    """Why one gang of `opt` (of a job of `kind`) can never run on `pool`, even empty and at `max`; None if it can.

    TPU: `slices` whole slices of exactly the shape. GPU: within one node, or whole nodes of the pool. A Slurm
    pool runs batch jobs only: an inference service (a Deployment behind a Service) has no Slurm form."""
    if pool.provider == "slurm" and kind == "inference":
        return "it is a Slurm partition, which runs batch jobs, not inference services"
    if pool.accelerator != opt.accelerator:
        return f"it has {pool.accelerator}, the option needs {opt.accelerator}"
    if pool.capacity == "spot" and spot == "never":
        return "it is spot capacity and the job does not allow spot"
    if pool.capacity != "spot" and spot == "required":
        return "the job requires spot capacity and the pool is " + pool.capacity
    if opt.shape is not None:
        if pool.shape != opt.shape:
            return f"its slices are {pool.shape}, the option needs {opt.shape}"
        if opt.slices > pool.max:
            return f"it has at most {pool.max} slices, the option needs {opt.slices}"
        return _node_fit(opt, pool)
    per_node = pool.unit_accelerators
    if opt.count > per_node:
        if opt.count % per_node:
            return f"{opt.count} {opt.accelerator} is not a whole number of its {per_node}-accelerator nodes"
        nodes = opt.count // per_node
        if nodes > pool.max:
            return f"it has at most {pool.max} nodes of {per_node}, the option needs {nodes}"
    elif pool.max < 1:
        return "its max is 0"
    return _node_fit(opt, pool)


DEFAULT_UNKNOWN_CPUS = 1
DEFAULT_UNKNOWN_MEMORY_GIB = 1
"""Requests of a pod on a machine the catalog does not know (render/pods.py: a floor, not a fact)."""


def pod_asks(opt: ResolvedOption, pool: ResolvedPool, share: float) -> tuple[int, int]:
    """(vCPUs, GiB) one pod of `opt` requests on a node of `pool` when it takes `share` of the node's
    accelerators: the option's `cpus` / `memory_gib` where given, else half of the node's in proportion to
    `share`, rounded down, at least 1 (render/pods.py says why). The one rule of what a pod asks: render writes
    it, the planner fits it (plan/capacity.py `gang_for`; before 2026-12-07 the planner counted 0 where the file
    states none, and placed a job stating cpus beside one that does not on a node their pods do not fit)."""
    cpus = opt.cpus or (max(1, int(pool.node_cpus * share) // 2) if pool.node_cpus else DEFAULT_UNKNOWN_CPUS)
    memory = opt.memory_gib or (max(1, int(pool.node_memory_gib * share) // 2) if pool.node_memory_gib
                                else DEFAULT_UNKNOWN_MEMORY_GIB)
    return cpus, memory


def _node_fit(opt: ResolvedOption, pool: ResolvedPool) -> str | None:
    """Per-node vCPU and memory requests against the pool's node (a TPU host, or a GPU node)."""
    if opt.cpus and pool.node_cpus is not None and opt.cpus > pool.node_cpus:
        return f"its nodes have {pool.node_cpus} vCPUs, the option needs {opt.cpus}"
    if opt.memory_gib and pool.node_memory_gib is not None and opt.memory_gib > pool.node_memory_gib:
        return f"its nodes have {pool.node_memory_gib} GiB, the option needs {opt.memory_gib}"
    return None


class FitIndex:
    """Pools grouped by what decides whether a gang fits; each group keeps its largest `max`."""

    def __init__(self, pools: tuple[ResolvedPool, ...]) -> None:
        groups: dict[tuple[object, ...], ResolvedPool] = {}
        for p in pools:
            sig: tuple[object, ...] = (p.accelerator, p.shape, p.unit_accelerators, p.node_cpus,
                                       p.node_memory_gib, p.capacity == "spot", p.provider == "slurm")
            best = groups.get(sig)
            if best is None or p.max > best.max:
                groups[sig] = p
        self.by_accelerator: dict[str, list[ResolvedPool]] = defaultdict(list)
        for _, p in sorted(groups.items(), key=lambda kv: repr(kv[0])):
            self.by_accelerator[p.accelerator].append(p)
        self.pools = pools
        self._fits: dict[tuple[object, ...], bool] = {}

    def fits(self, opt: ResolvedOption, spot: str, kind: str) -> bool:
        """Some pool can hold one gang of `opt` (`gang_fit`). Jobs share few distinct options, so each answer is
        kept under every field of the option `gang_fit` reads (all but its index and relative speed)."""
        key = (opt.accelerator, opt.kind, opt.shape, opt.slices, opt.count, opt.cpus, opt.memory_gib, spot, kind)
        found = self._fits.get(key)
        if found is None:
            found = self._fits[key] = any(gang_fit(opt, p, spot, kind) is None
                                          for p in self.by_accelerator.get(opt.accelerator, ()))
        return found

    def closest(self, opt: ResolvedOption, spot: str, kind: str) -> tuple[ResolvedPool, str] | None:
        """The pool that comes nearest to fitting: same accelerator, same shape, then the largest max."""
        if not self.pools:
            return None

        def rank(p: ResolvedPool) -> tuple[int, int, int, str]:
            return (p.accelerator != opt.accelerator, p.shape != opt.shape,
                    -p.max * p.unit_accelerators, p.key)

        best = min(self.pools, key=rank)
        return best, gang_fit(opt, best, spot, kind) or ""
