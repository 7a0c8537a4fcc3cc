"""Frozen pydantic models of every YAML document in the repository (DESIGN.md section 2, the contract).

Strict at the edge: unknown fields are errors (`extra="forbid"`), every field has a description (the JSON
Schema for editors comes from these models, see `schema.py`), names are RFC 1123 labels, whole numbers
refuse booleans and floats, and real numbers refuse booleans, strings, infinity and NaN (YAML reads `.inf`,
`.nan` and `true` as numbers a lax model would take; an infinite price would print `Infinity`, which is not
JSON, and crash the cost report). Money and durations also have generous upper bounds so that a plan's
totals (price x units x 730 hours, price x duration) stay finite. Rules that span fields or documents
(min <= max, a team exists, a topology is valid for its generation) live in `validate.py`, where each failure
can point at the exact line.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
Name = Annotated[
    str,
    Field(pattern=NAME_PATTERN, max_length=63,
          description="an RFC 1123 label: lowercase letters, digits and '-', alphanumeric at both ends, <= 63 chars"),
]
GITHUB_HANDLE = re.compile(r"^@?[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}(?:/[A-Za-z0-9][A-Za-z0-9_.-]{0,99})?$")
"""`alice`, `@alice` (a user: 1-39 letters, digits and single hyphens) or `@org/team` (a team slug): the only
owner strings Fleet accepts. Anything else (a space, a newline, a `#`) would change the meaning of the
CODEOWNERS line it is written on, or add lines to it."""
HANDLE_HINT = "write a GitHub user as `@alice` (or `alice`) and a team as `@org/team`, one handle per list item"

Count = Annotated[int, Field(strict=True, ge=0)]
Int32 = Annotated[int, Field(strict=True, ge=-(2**31), le=2**31 - 1)]
"""A whole number Kueue keeps in an int32 (WorkloadPriorityClass `value`, `maxPriorityThreshold`): the API server
rejects a larger one, and with it the whole Kueue stack."""
PositiveCount = Annotated[int, Field(strict=True, ge=1)]
MAX_UNITS = 10_000
"""Most units (slices or nodes) of one pool, and most slices or replicas of one job: far above any real pool
(GKE allows 15,000 nodes in a whole cluster), low enough that a typo cannot make planning loop for hours."""
Units = Annotated[int, Field(strict=True, ge=0, le=MAX_UNITS)]
PositiveUnits = Annotated[int, Field(strict=True, ge=1, le=MAX_UNITS)]
MAX_HOURLY_USD = 1_000_000.0
"""Far above any real price of one chip, node or slice per hour (the largest TPU slice lists near $20,000)."""
MAX_MONTHLY_USD = 1e12
MAX_DURATION_HOURS = 87_600.0
"""Ten years: a longer `duration_hours` is a typo, and run cost = hourly x duration must stay finite."""
MAX_FACTOR = 1_000.0
"""Bound of ratios (fair-share weight, relative speed) both ways: a thousandfold is already far-fetched."""


# Real numbers: int or float, never bool or str (strict), finite (no .inf/.nan), within generous bounds.
Real = Annotated[float, Field(strict=True, allow_inf_nan=False)]
HourlyUsd = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=MAX_HOURLY_USD)]
MonthlyUsd = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=MAX_MONTHLY_USD)]
Factor = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=1 / MAX_FACTOR, le=MAX_FACTOR)]

Provider = Literal["gcp", "aws", "onprem", "slurm"]
ClusterStatus = Literal["active", "cordoned", "draining", "down"]
Capacity = Literal["on-demand", "spot", "reserved", "owned"]
SpotPolicy = Literal["never", "allowed", "required"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- fleet/clusters/<cluster>.yaml --------------------------------------------------------------------------


class KubernetesRef(Model):
    cluster: str = Field(min_length=1, description="the existing GKE/EKS/on-prem Kubernetes cluster Fleet manages")
    context: str | None = Field(None, description="kubeconfig context `fleet apply` uses for this cluster; if "
                                "unset, the stack config `fleet:kubeContext`; never the kubeconfig's current context")


class NodeShape(Model):
    accelerators: PositiveCount = Field(description="accelerators (chips or GPUs) per node")
    cpus: PositiveCount = Field(description="allocatable vCPUs per node")
    memory_gib: PositiveCount = Field(description="allocatable memory per node, GiB")


# --- Slurm (DESIGN 4e): a cluster reached through slurmrestd, a pool's partition, a job's submission options --

SlurmName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64,
                                 description="a Slurm name: letters, digits, '_', '.', '-'")]
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class SlurmRef(Model):
    rest_url: str = Field(pattern=r"^https?://[^\s/]+(/[^\s]*)?$", max_length=512,
                          description="slurmrestd's base URL, e.g. http://slurm-sjc:6820")
    api_version: Literal["v0.0.38"] = Field(
        "v0.0.38", description="the slurmrestd OpenAPI version Fleet speaks (v0.0.38: Slurm 22.05)")
    token_env: str = Field("SLURM_JWT", pattern=ENV_NAME, max_length=128, description="the environment variable "
                           "holding the JWT (X-SLURM-USER-TOKEN); the token itself is never in the repository")
    account_prefix: str = Field("", pattern=r"^[A-Za-z0-9_.-]*$", max_length=32,
                                description="a team's Slurm account is this prefix + the team's name")
    user: SlurmName | None = Field(None, description="X-SLURM-USER-NAME; default: the token's `sun` claim")


class SlurmJob(Model):
    script: str | None = Field(None, min_length=1, max_length=65536, description="the batch script's body "
                               "(after Fleet's `#!/bin/bash` line); default: runs the job's image command")
    constraint: str | None = Field(None, min_length=1, max_length=256,
                                   description="Slurm node features required (--constraint)")
    time_limit_minutes: Annotated[int, Field(strict=True, ge=1, le=int(MAX_DURATION_HOURS * 60))] | None = Field(
        None, description="--time in minutes; default: duration_hours (rounded up), else the partition's")


class Pool(Model):
    name: Name = Field(description="pool name, unique in its cluster; the GKE node pool / EKS node group name")
    accelerator: str = Field(description="a key of the accelerator catalog, e.g. tpu-v5p or nvidia-h100-80gb")
    topology: str | None = Field(
        None, description="TPU pools only: the slice shape (e.g. 4x4x4); one unit of the pool is one slice")
    capacity: Capacity = Field("on-demand", description="on-demand | spot | reserved | owned")
    min: Units = Field(0, description="fewest units (slices for TPU pools, nodes otherwise)")
    max: Units = Field(description="most units (slices for TPU pools, nodes otherwise)")
    machine_type: str | None = Field(
        None, description="cloud machine type; default: the catalog's for the accelerator and topology")
    scaling: Literal["plan", "autoscaler"] = Field(
        "plan", description="plan: apply sets the unit count the plan chose; autoscaler: apply sets min/max")
    placement: Literal["compact"] | None = Field(
        None, description="compact: the nodes of one multi-node job share a compact placement group")
    node: NodeShape | None = Field(
        None, description="node shape; required on-prem, overrides the catalog's machine type otherwise")
    hourly_usd: HourlyUsd | None = Field(
        None, description="price of one unit per hour; overrides the catalog")
    partition: SlurmName | None = Field(
        None, description="Slurm clusters only: the partition whose nodes are the pool's units (DESIGN 4e)")
    # --- workloads (issue 26): capacity a cloud grants through a queue --------------------------------------
    provisioning: Literal["fixed", "queued"] = Field(
        "fixed", description="fixed: apply sets the unit count; queued: the units are requested through Kueue's "
        "ProvisioningRequest admission check (GKE flex-start / DWS) when a job is admitted, and granted after a "
        "delay (docs/workloads.md)")


class Cluster(Model):
    name: Name = Field(description="cluster name; the file is fleet/clusters/<name>.yaml")
    provider: Provider = Field(description="gcp | aws | onprem | slurm")
    region: str = Field(min_length=1, description="cloud region (or site name on-prem), e.g. us-east5")
    zone: str | None = Field(None, description="zone for zonal resources, e.g. us-east5-a")
    kubernetes: KubernetesRef | None = Field(
        None, description="the Kubernetes cluster that runs the pools and Kueue (every provider but slurm)")
    slurm: SlurmRef | None = Field(None, description="provider slurm only: how slurmrestd is reached (DESIGN 4e)")
    status: ClusterStatus = Field(
        "active", description="active | cordoned (no new placements) | draining (move jobs out) | down (fail over)")
    labels: dict[str, str] = Field(default_factory=dict, description="free-form labels")
    pools: tuple[Pool, ...] = Field((), description="node pools / node groups of the cluster")
    health_check: bool | None = Field(
        None, description="run `fleet health-check` on the cluster's NVIDIA GPU nodes through node-problem-detector "
        "(fleet render writes its DaemonSet); default: on for on-prem clusters, off on GKE and EKS, which have "
        "their own GPU health monitoring")


# --- policies/teams.yaml ------------------------------------------------------------------------------------


class Cohort(Model):
    name: Name = Field(description="cohort name")
    parent: Name | None = Field(None, description="parent cohort; cohorts form a tree")


class Quota(Model):
    nominal: Count = Field(description="guaranteed chips/GPUs of this accelerator")
    borrowing_limit: Count | None = Field(
        None, description="most chips/GPUs the team may borrow from its cohort; default: unlimited")
    lending_limit: Count | None = Field(
        None, description="most of its nominal quota the team lends to its cohort; default: all of it")
    # -- issue 22: spot-only work's own quota (plan/quota.py `charged`) --
    spot: Count | None = Field(
        None, description="chips/GPUs the team's spot-only work (`spot: required`) may hold, charged apart from "
                          "nominal (Kueue: a separate spot flavor); default: spot-only work counts against nominal")


class Team(Model):
    name: Name = Field(description="team name; its jobs live in jobs/<name>/")
    namespace: Name | None = Field(None, description="Kubernetes namespace of the team's LocalQueue; default: name")
    owners: tuple[str, ...] = Field((), description="GitHub users or @org/team handles that may change jobs/<team>/")
    cohort: Name | None = Field(None, description="cohort the team borrows and lends in")
    weight: Factor = Field(1.0, description="fair-share weight, 0.001 to 1000")
    budget_monthly_usd: MonthlyUsd | None = Field(None, description="monthly budget in USD (730 h months)")
    max_priority: Name | None = Field(None, description="highest priority class the team's jobs may use")
    quota: dict[str, Quota] = Field(default_factory=dict, description="per accelerator catalog key")

    @property
    def queue_namespace(self) -> str:
        return self.namespace or self.name


class TeamsDoc(Model):
    admins: tuple[str, ...] = Field((), description="who may change fleet/ and policies/ and approve quota raises")
    cohorts: tuple[Cohort, ...] = Field((), description="cohort tree (via parent)")
    teams: tuple[Team, ...] = Field(description="the teams")

    def domains(self) -> dict[str, str | None]:
        """team -> the root of its cohort tree, its lending domain (None: in no cohort). A cycle (which
        validate rejects) ends at the first cohort seen twice."""
        parent = {c.name: c.parent for c in self.cohorts}

        def root(cohort: str) -> str:
            seen = {cohort}
            while (up := parent.get(cohort)) and up not in seen:
                cohort = up
                seen.add(cohort)
            return cohort

        return {t.name: (root(t.cohort) if t.cohort else None) for t in self.teams}


# --- policies/priorities.yaml -------------------------------------------------------------------------------


class PriorityClass(Model):
    name: Name = Field(description="class name")
    value: Int32 = Field(description="higher runs first; becomes the WorkloadPriorityClass value (an int32)")
    preemptible: bool = Field(True, description="false: jobs of this class are never preempted")
    spot: SpotPolicy | None = Field(None, description="required: the class forces spot capacity")
    # -- issue 22: preemption that costs little (plan/victims.py) --
    min_runtime_minutes: float | None = Field(
        None, ge=0, description="a running job of this class is not preempted before it ran this many minutes "
                                "(KAI's guarantee); default: no minimum")


class BorrowWithinCohort(Model):
    policy: Literal["never", "lower_priority"] = Field("never", description="never | lower_priority")
    max_priority_threshold: Int32 | None = Field(
        None, description="only workloads at or below this priority may be preempted to borrow (an int32)")


class Preemption(Model):
    within_team: Literal["never", "lower_priority", "lower_or_newer_equal_priority"] = Field(
        "lower_priority", description="preemption among a team's own jobs")
    reclaim_within_cohort: Literal["never", "lower_priority", "any"] = Field(
        "any", description="preempting borrowers in the cohort to reclaim nominal quota")
    borrow_within_cohort: BorrowWithinCohort = Field(
        default_factory=BorrowWithinCohort, description="preempting others in the cohort in order to borrow")
    # -- issue 22: checkpoint-aware eviction (plan/victims.py, reconcile/ckptwait.py) --
    checkpoint_window_minutes: float = Field(
        30, ge=0, description="a victim whose next checkpoint falls within this many minutes keeps running until "
                              "it, holding its quota and units (the preemptor's once it stops); 0: victims stop at "
                              "once")


class PrioritiesDoc(Model):
    default: Name = Field(description="class of jobs that name none")
    classes: tuple[PriorityClass, ...] = Field(min_length=1, description="the priority classes")
    preemption: Preemption = Field(default_factory=Preemption, description="preemption rules (Kueue's)")


# --- policies/placement.yaml --------------------------------------------------------------------------------


class Reconcile(Model):
    """policies/placement.yaml `reconcile:` (DESIGN 2): the live loop's knobs; also read by `--observed`
    planning (the two thresholds decide when an unreachable cluster or a failing unit stops counting)."""

    interval_seconds: Annotated[int, Field(strict=True, ge=1)] = Field(
        60, description="seconds between two rounds of the loop")
    cluster_lost_after_minutes: float = Field(
        15, ge=0, description="unreachable this long: the cluster counts as down and its jobs are placed again")
    node_failed_after_minutes: float = Field(
        10, ge=0, description="a node NotReady, cordoned or accelerator-unhealthy this long: its unit "
                              "(a whole TPU slice) is failed and its jobs move")
    scale_down_after_minutes: float = Field(30, ge=0, description="a unit idle this long is released")
    paused: bool = Field(False, description="true: observe and report, change nothing")
    lease_cluster: Name | None = Field(
        None, description="the cluster whose Lease elects the one reconciler that writes; without it only "
                          "`fleet reconcile --once` runs")
    group_whole_minutes: float = Field(
        10, ge=0, description="a job group that Kueue admits only in part this long: its admitted members stop, "
                              "and start again with the group (docs/workloads.md)")
    group_retry_limit: Count | None = Field(
        5, description="how many times the stopped members of a group that ran in part start again after a backoff "
                       "(as Kueue's requeuingStrategy.backoffLimitCount); after that they start only with their "
                       "group, once every other member is admitted; null: no limit (docs/workloads.md)")


# --- re-pack onto prepaid capacity (issue 22 item 4; plan/repack.py, docs/concepts.md) -----------------------


class Repack(Model):
    """policies/placement.yaml `repack:`: when planning from what runs, a running job on on-demand or spot
    capacity moves onto idle reserved or owned units at its checkpoint when the saving beats the restart."""

    enabled: bool = Field(True, description="false: running jobs never move to prepaid capacity for money")
    restart_minutes: float = Field(
        10, ge=0, le=24 * 60, allow_inf_nan=False,
        description="restore and warm-up a moved or preempted job spends before it progresses again (its restart cost)")
    window_minutes: float = Field(
        5, ge=0, le=24 * 60, allow_inf_nan=False,
        description="a job checkpointing every N minutes moves only this many minutes after a checkpoint")


class PlacementDoc(Model):
    objective: Literal["cost", "balanced"] = Field(
        "cost", description="cost: dollars per unit of useful work; balanced: also spread load")
    max_migrations_per_plan: Count = Field(5, description="most placed jobs one plan may move")
    capacity_preference: tuple[Capacity, ...] = Field(
        ("owned", "reserved", "on-demand", "spot"), description="which capacity to fill first")
    reconcile: Reconcile = Field(default_factory=Reconcile,
                                 description="the live loop (`fleet reconcile`) and planning from what runs")
    repack: Repack = Field(default_factory=Repack, description="re-pack running work onto idle prepaid capacity")


# --- fleet/prices.yaml --------------------------------------------------------------------------------------


class PriceOverride(Model):
    accelerator: str | None = Field(None, description="price per chip/GPU-hour of this accelerator")
    machine_type: str | None = Field(None, description="price per node-hour of this machine type")
    region: str | None = Field(None, description="region it applies in; default: every region")
    on_demand_hourly_usd: HourlyUsd | None = Field(None, description="on-demand price")
    spot_hourly_usd: HourlyUsd | None = Field(None, description="spot price")
    reserved_hourly_usd: HourlyUsd | None = Field(None, description="committed-use / reserved price")
    source: str | None = Field(None, description="where the number comes from (contract, quote, date)")
    uncertain: bool = Field(False, description="true if the number is an estimate; reports flag it")


class Discount(Model):
    accelerator: str | None = Field(None, description="accelerator the discount applies to")
    machine_type: str | None = Field(None, description="machine type the discount applies to")
    percent_off: Real = Field(gt=0, lt=100, description="negotiated discount off list price, percent")
    capacity: tuple[Capacity, ...] = Field(("on-demand",), description="capacity types it applies to")


class PricesDoc(Model):
    prices: tuple[PriceOverride, ...] = Field((), description="prices that override or fill in the catalog")
    discounts: tuple[Discount, ...] = Field((), description="negotiated discounts off list price")


# --- jobs/<team>/<job>.yaml ---------------------------------------------------------------------------------


class JobOption(Model):
    accelerator: str = Field(description="a key of the accelerator catalog")
    topology: str | None = Field(None, description="TPU: exact slice shape, e.g. 8x8x8")
    count: PositiveCount | None = Field(
        None, description="GPUs in total, or TPU chips (the planner picks the smallest valid slice shape)")
    slices: PositiveUnits = Field(1, description="TPU multislice: slices, all in one cluster")
    relative_speed: Factor = Field(
        1.0, description="throughput relative to the first option, 0.001 to 1000: the job runs duration_hours / it")
    cpus: PositiveCount | None = Field(None, description="vCPUs per node used")
    memory_gib: PositiveCount | None = Field(None, description="memory per node used, GiB")


MAX_RESTARTS = 1_000
"""Most JobSet restarts a job may ask for: far above any useful number (disruptions do not count, see
render/jobset.py), low enough that a typo cannot make a crash-looping job hold its nodes for ever."""
DEFAULT_MAX_RESTARTS = 3
"""JobSet restarts for job failures when the job names none; disruptions never count (render/jobset.py)."""
Port = Annotated[int, Field(strict=True, ge=1, le=65535)]


class Volume(Model):
    name: Name = Field(description="volume name, unique in the job")
    claim: Name | None = Field(
        None, description="a PersistentVolumeClaim in the team's namespace (exactly one of claim, config_map)")
    config_map: Name | None = Field(
        None, description="a ConfigMap in the team's namespace (exactly one of claim, config_map)")
    mount_path: str = Field(min_length=1, max_length=1024,
                            description="absolute path in the container, e.g. /data; not under /dev, /proc, /sys")
    read_only: bool = Field(True, description="mount read-only (default); false only for a claim")


class Workers(Model):
    """An elastic gang (issue 26): between `min` and `max` units (nodes or slices); option counts are per unit."""

    min: PositiveUnits = Field(description="fewest units the job runs on; never shrunk below")
    max: PositiveUnits = Field(description="most units the job grows to on idle capacity")


class Job(Model):
    name: Name = Field(description="job name; the file is jobs/<team>/<name>.yaml")
    team: Name = Field(description="owning team; must equal the folder name")
    priority: Name | None = Field(None, description="priority class; default: priorities.yaml `default`")
    kind: Literal["training", "inference", "batch"] = Field("training", description="training | inference | batch")
    options: tuple[JobOption, ...] = Field(min_length=1, description="acceptable shapes, most preferred first")
    replicas: PositiveUnits = Field(1, description="inference: identical replicas, each a gang of the option")
    spot: SpotPolicy = Field("never", description="never | allowed | required")
    duration_hours: Real | None = Field(
        None, gt=0, le=MAX_DURATION_HOURS,
        description="expected runtime in hours on the first option (at most ten years); an option at relative_speed "
                    "s runs it in duration / s: its cost, its end for backfill and others' expected starts")
    checkpoint_minutes: Real | None = Field(
        None, ge=0, le=MAX_DURATION_HOURS * 60, description="most work a disruption loses, minutes")
    data_region: str | None = Field(None, description="region of the data; placement near it is preferred")
    data_residency: Literal["preferred", "required"] = Field(
        "preferred", description="preferred: run near data_region when there is room; required: never outside it")
    spread: Literal["none", "zone", "cluster"] | None = Field(
        None, description="inference replicas: spread over zones or clusters; default zone for 2 or more replicas")
    image: str = Field(min_length=1, description="container image")
    command: tuple[str, ...] = Field((), description="container command; default: the image's entrypoint")
    env: dict[str, str] = Field(default_factory=dict, description="plain settings; secret-looking values are rejected")
    env_from_secrets: tuple[Name, ...] = Field(
        (), description="Kubernetes Secrets in the team's namespace whose keys become environment variables")
    service_account: Name | None = Field(
        None, description="Kubernetes ServiceAccount in the team's namespace the pods run as; default: `default`")
    image_pull_secrets: tuple[Name, ...] = Field(
        (), description="Secrets in the team's namespace holding registry credentials for the image")
    volumes: tuple[Volume, ...] = Field(
        (), description="PersistentVolumeClaims and ConfigMaps of the team's namespace mounted in every container")
    max_restarts: Annotated[int, Field(strict=True, ge=0, le=MAX_RESTARTS)] | None = Field(
        None, description=f"training/batch: restarts of the whole gang after a failure of the job itself "
        f"(default {DEFAULT_MAX_RESTARTS}); spot reclaims, node losses and preemptions never count")
    port: Port | None = Field(None, description="inference: the container port the Service exposes")
    readiness_path: str | None = Field(
        None, min_length=1, max_length=1024,
        description="inference: HTTP path answered with 2xx once the server is ready, e.g. /health; needs port")
    slurm: SlurmJob | None = Field(None, description="how the job is submitted when placed on a Slurm pool (4e)")
    # --- workloads (issue 26): Ray, job groups, elastic gangs (docs/workloads.md) ----------------------------
    framework: Literal["jobset", "ray"] | None = Field(
        None, description="ray: head and workers as a KubeRay RayJob (training/batch) or RayService (inference); "
        "default jobset (training/batch) or Deployment/LeaderWorkerSet (inference)")
    group: Name | None = Field(
        None, description="jobs of one team naming the same group are placed together and started all-or-nothing")
    group_scope: Literal["cluster", "region"] = Field(
        "cluster", description="where a group's members must run together: one cluster (default) or one region")
    workers: Workers | None = Field(
        None, description="training: an elastic gang of min to max units (nodes or slices); option counts are "
        "per unit")

    @property
    def id(self) -> str:
        return f"{self.team}/{self.name}"


DIGEST_ANNOTATION = "fleet.dev/spec-digest"   # render/jobset.py stamps both on every JobSet; plan/live.py reads them
UNITS_ANNOTATION = "fleet.dev/units"


def spec_digest(job: Job) -> str:
    """A digest of the job's spec (its whole document as built): render stamps it on the JobSet as
    `fleet.dev/spec-digest` and completion records keep it, so a finished job runs again only once its file
    changes (plan/live.py)."""
    unset = {f for f in LATER_FIELDS if getattr(job, f) is None} | (WORKLOAD_FIELDS - job.model_fields_set)
    return hashlib.sha256(job.model_dump_json(exclude=unset or None).encode()).hexdigest()[:16]


POD_DIGEST_ANNOTATION = "fleet.dev/pod-digest"
POD_FIELDS = frozenset({"kind", "image", "command", "env", "env_from_secrets", "service_account", "image_pull_secrets",
                        "volumes", "max_restarts", "framework"})
"""The job fields that render into a JobSet's `spec.replicatedJobs` beside its shape (options and replicas, which
the planner compares as a gang: "the job's shape changed"). JobSet's webhook refuses any change of replicatedJobs
of a JobSet that exists, so a running job whose file changed one of these runs on as it started unless re-created."""


def pod_fields(job: Job) -> dict[str, object]:
    """`POD_FIELDS` as render writes them: `env` in name order, an unset `max_restarts` or `framework` as its
    default, volumes as plain data. Two files that render the same pods give the same values (before 2026-12-07
    the fields as written: reordered env names, or a default written out, read as a change, and a restart)."""
    return {"kind": job.kind, "image": job.image, "command": list(job.command), "env": sorted(job.env.items()),
            "env_from_secrets": list(job.env_from_secrets), "service_account": job.service_account,
            "image_pull_secrets": list(job.image_pull_secrets),
            "volumes": [v.model_dump(mode="json") for v in job.volumes],
            "max_restarts": DEFAULT_MAX_RESTARTS if job.max_restarts is None else job.max_restarts,
            "framework": job.framework or "jobset"}


def pod_digest(job: Job) -> str:
    """A digest of what the job's pods run beside their shape (`pod_fields`): render stamps it on the JobSet as
    `fleet.dev/pod-digest`, and the planner re-creates a running job whose file changed it (plan/sticky.py)."""
    return pod_fields_digest(pod_fields(job))


def pod_fields_digest(fields: Mapping[str, object]) -> str:
    """The digest of `pod_fields`, or of the same fields read back from a JobSet that has no
    `fleet.dev/pod-digest` (observe/podfields.py)."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def runs_earlier_spec(ran: str | None, now: str | None) -> bool:
    """Whether a copy that runs the spec digest `ran` (its `fleet.dev/spec-digest`) runs an earlier spec of its
    file than the file's digest `now`. Unknown on either side (no annotation, no file): not judged, False. Where
    the plan moves a job onto the units its copy runs on ("the job's shape changed": a gang that shrank or grew on
    its node), such a copy is restarted there by the loop (reconcile/decide.py) and re-created by `fleet apply`
    (apply/safety.py `moves_within`)."""
    return ran is not None and now is not None and ran != now


LATER_FIELDS: tuple[str, ...] = ("slurm",)
"""Job fields added after spec digests were first stamped on running and finished jobs: left out of the digest
while unset, so a job whose file did not change keeps its digest (and a finished one is not run again)."""
WORKLOAD_FIELDS = frozenset({"framework", "group", "group_scope", "workers"})
"""Issue 26's job fields, likewise: left out while the file does not name them."""
