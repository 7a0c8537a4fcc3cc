"""The snapshot `fleet observe` writes: what runs on every cluster, frozen and deterministic. Pure.

Contract for the stages that read it (`fleet status`, and `--observed` planning):
- One `Snapshot` holds every cluster of `fleet/clusters/`, sorted by name; each cluster's Workloads, JobSets,
  inference Deployments and LeaderWorkerSets (`services`, Fleet-labelled only) and Nodes are sorted by
  (namespace, name) / name, conditions by type. Equal cluster states and an equal `observed_at` give
  byte-identical JSON (`Snapshot.to_json`).
- A cluster that could not be read (or read only in part) is data, not an exception: `ClusterObservation.status`
  is `ok`, `degraded` (some lists failed or some objects were malformed and skipped: what was read is kept)
  or `unreachable` (nothing could be read), and `problems` says what failed and how to fix it.
- Only the fields Fleet decides with are kept (a few hundred bytes per object, not the whole manifest), with
  the Kubernetes names translated to snake_case; `phase()` on a Workload is Kueue's state machine in one word.
Times are timezone-aware UTC `datetime`s (RFC 3339 in the API and in the JSON).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ..robots.observed import RobotsObservation

Phase = Literal["queued", "admitted", "running", "succeeded", "failed", "evicted", "unknown"]
ProblemKind = Literal["no-context", "kubeconfig", "refused", "timeout", "unauthorized", "forbidden",
                      "not-found", "server-error", "http-error", "malformed", "invalid-object", "slow"]
Resource = Literal["kubeconfig", "workloads", "jobsets", "nodes", "completions", "deployments", "leaderworkersets",
                   "pods", "rayjobs", "rayservices", "rayclusters"]


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*")
    @classmethod
    def _a_time_of_this_world(cls, value: object, info: ValidationInfo) -> object:
        """Read from a file (`FROM_FILE` in the context: files.read_snapshot), a time carries its zone and lies
        between 1970 and 2999: a naive one cannot be compared with the clock, and year 9999 plus an expected
        start overflows (`fleet status` stopped with an internal error on both)."""
        if isinstance(value, datetime) and info.context and info.context.get(FROM_FILE):
            if value.tzinfo is None:
                raise ValueError("a time without a zone: write it as UTC, e.g. 2026-12-05T12:00:00Z")
            if not 1970 <= value.year <= 2999:
                raise ValueError(f"the year {value.year} is outside 1970-2999")
        return value


FROM_FILE = "from_file"
"""Validation context key: the model is read from a file someone gave (times are checked, `Frozen`)."""


class Condition(Frozen):
    """A Kubernetes status condition (metav1.Condition, or a Node condition)."""

    type: str = Field(description="condition type, e.g. Admitted, Finished, Ready, AcceleratedHardwareReady")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown")
    reason: str = Field("", description="machine-readable reason, e.g. Preempted, Succeeded")
    message: str = Field("", description="human-readable detail from the controller")
    since: datetime | None = Field(None, description="lastTransitionTime")


class Eviction(Frozen):
    reason: str = Field(description="Kueue eviction reason, e.g. Preempted, PodsReadyTimeout, NodeFailures")
    underlying_cause: str = Field("", description="finer-grained cause (schedulingStats.evictions[].underlyingCause)")
    count: int = Field(ge=0, description="how many times the Workload was evicted for this reason")


class AdmissionCheckState(Frozen):
    """One of a Workload's admission checks (status.admissionChecks[]): e.g. the ProvisioningRequest check of a
    `provisioning: queued` pool, Pending while the cloud has not granted the capacity."""

    name: str = Field(description="the AdmissionCheck's name")
    state: Literal["Pending", "Ready", "Retry", "Rejected"] = Field(description="Pending, Ready, Retry or Rejected")
    message: str = Field("", description="the check controller's message (e.g. the ProvisioningRequest's state)")
    since: datetime | None = Field(None, description="lastTransitionTime")


class Workload(Frozen):
    """A Kueue Workload (kueue.x-k8s.io/v1beta2)."""

    namespace: str = Field(description="namespace (the team's)")
    name: str = Field(description="Workload name (Kueue generates it from the owner)")
    created_at: datetime | None = Field(None, description="metadata.creationTimestamp: when it was queued")
    queue_name: str = Field("", description="spec.queueName: the LocalQueue")
    priority: int | None = Field(None, description="spec.priority")
    jobset: str | None = Field(None, description="name of the JobSet (or RayJob, or the RayService of its RayCluster: "
                               "observe/ray.py) that owns it (ownerReferences), if any")
    jobset_uid: str | None = Field(None, description="uid of that JobSet, as the owner reference names it (a Workload "
                                   "counts for a JobSet only with its uid: observe/owners.py)")
    cluster_queue: str | None = Field(None, description="status.admission.clusterQueue once quota is reserved")
    flavors: dict[str, str] = Field(default_factory=dict,
                                    description="resource -> ResourceFlavor over all podSetAssignments")
    admitted_pods: int = Field(0, ge=0, description="sum of podSetAssignments[].count")
    requeue_count: int = Field(0, ge=0, description="status.requeueState.count")
    requeue_at: datetime | None = Field(None, description="status.requeueState.requeueAt")
    past_execution_seconds: int = Field(0, ge=0, description="status.accumulatedPastExecutionTimeSeconds")
    evictions: tuple[Eviction, ...] = Field((), description="status.schedulingStats.evictions")
    conditions: tuple[Condition, ...] = Field((), description="status.conditions, sorted by type")
    admission_checks: tuple[AdmissionCheckState, ...] = Field(
        (), description="status.admissionChecks, sorted by name (queued provisioning: the capacity requested)")

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def is_true(self, kind: str) -> bool:
        c = self.condition(kind)
        return c is not None and c.status == "True"

    def phase(self) -> Phase:
        """Kueue's lifecycle in one word: Finished (Succeeded/Failed) beats everything; an Evicted Workload
        without reserved quota waits to be placed again; Admitted with PodsReady runs; quota reserved but
        admission checks pending still queues."""
        if self.is_true("Finished"):
            finished = self.condition("Finished")
            return "failed" if finished is not None and finished.reason == "Failed" else "succeeded"
        if self.is_true("Evicted") and not self.is_true("QuotaReserved"):
            return "evicted"
        if self.is_true("Admitted"):
            return "running" if self.is_true("PodsReady") else "admitted"
        return "queued"


class ReplicatedJobStatus(Frozen):
    name: str = Field(description="replicated job name")
    ready: int = Field(0, ge=0, description="child Jobs ready")
    succeeded: int = Field(0, ge=0, description="child Jobs succeeded")
    failed: int = Field(0, ge=0, description="child Jobs failed")
    active: int = Field(0, ge=0, description="child Jobs active")
    suspended: int = Field(0, ge=0, description="child Jobs suspended")


class JobSet(Frozen):
    """A JobSet (jobset.x-k8s.io/v1alpha2) with Fleet's labels (DESIGN 4b)."""

    namespace: str = Field(description="namespace (the team's)")
    name: str = Field(description="JobSet name (the job's)")
    uid: str | None = Field(None, description="metadata.uid: deletes name it as a precondition, and a Workload "
                            "counts for it only when its owner reference has this uid")
    created_at: datetime | None = Field(None, description="metadata.creationTimestamp")
    team: str | None = Field(None, description="label fleet.dev/team")
    job: str | None = Field(None, description="label fleet.dev/job")
    pool: str | None = Field(None, description="label fleet.dev/pool")
    spec_digest: str | None = Field(None, description="annotation fleet.dev/spec-digest: the job spec it runs")
    pod_digest: str | None = Field(None, description="annotation fleet.dev/pod-digest: what its pods run "
                                   "beside their shape (models.POD_FIELDS); on a JobSet with a spec digest and no "
                                   "pod digest (made before Fleet stamped it), the same digest read from its pod "
                                   "template (observe/podfields.py); None: not known")
    units: tuple[int, ...] | None = Field(None, description="annotation fleet.dev/units: the units the plan gave it")
    pod_cpus: int | None = Field(None, ge=0, description="the most cpus one of its pods requests (a RayJob's or a "
                                 "RayService's: of its Ray cluster's head and running worker groups), as the scheduler "
                                 "reckons it (containers and sidecars summed, at least its largest init container, "
                                 "a limit where no request is stated, plus the pod overhead), rounded up to whole "
                                 "cpus: what it runs with on a node; None: not stated")
    pod_memory_gib: int | None = Field(None, ge=0, description="the most memory one of its pods requests, in GiB "
                                       "rounded up: what it runs with on a node; None: not stated")
    pod_accelerators: int | None = Field(None, ge=0, description="the most accelerators one of its pods requests "
                                         "(nvidia.com/gpu, google.com/tpu, aws.amazon.com/neuron): the gang it runs, "
                                         "checked against its file's when there is no base plan (plan/live.py); "
                                         "None: no pod states one, or not readable")
    suspended: bool = Field(False, description="spec.suspend")
    deleting: bool = Field(False, description="metadata.deletionTimestamp is set: being deleted (the old copy of "
                           "a move waits, in the foreground, for its pods to go)")
    terminal_state: str | None = Field(None, description="status.terminalState: Completed or Failed")
    restarts: int = Field(0, ge=0, description="status.restarts")
    replicated_jobs: tuple[ReplicatedJobStatus, ...] = Field((), description="status.replicatedJobsStatus")
    conditions: tuple[Condition, ...] = Field((), description="status.conditions, sorted by type")
    kind: Literal["JobSet", "RayJob", "RayService"] = Field(
        "JobSet", description="the gang's object: a JobSet, or a KubeRay RayJob / RayService (observe/ray.py)")
    ray_state: str | None = Field(None, description="Ray only: the state of the RayCluster it created (ready, "
                                  "suspended, failed...), and for a RayJob its jobDeploymentStatus")

    @property
    def job_id(self) -> str | None:
        """`team/job` when Fleet's labels are on it."""
        return f"{self.team}/{self.job}" if self.team and self.job else None


class ServiceWorkload(Frozen):
    """A Deployment or LeaderWorkerSet of an inference job, with Fleet's labels (DESIGN 4b; render/service.py:
    one per pool its replicas run on, named `<job>` or `<job>-<pool>`). Only Fleet-labelled ones are read."""

    kind: Literal["Deployment", "LeaderWorkerSet"] = Field(description="Deployment (apps/v1) or LeaderWorkerSet "
                                                           "(leaderworkerset.x-k8s.io/v1)")
    namespace: str = Field(description="namespace (the team's)")
    name: str = Field(description="object name")
    created_at: datetime | None = Field(None, description="metadata.creationTimestamp")
    team: str | None = Field(None, description="label fleet.dev/team")
    job: str | None = Field(None, description="label fleet.dev/job")
    pool: str | None = Field(None, description="label fleet.dev/pool: the pool its replicas run on")
    uid: str | None = Field(None, description="metadata.uid: a deletion's precondition (the object observed)")
    replicas: int = Field(1, ge=0, description="spec.replicas: the replicas wanted (a LeaderWorkerSet: groups)")
    ready_replicas: int = Field(0, ge=0, description="status.readyReplicas: the replicas ready to serve")
    pod_cpus: int | None = Field(None, ge=0, description="the most cpus one of its pods requests (a Deployment's "
                                 "template; a LeaderWorkerSet's leader and worker templates), reckoned as a JobSet's "
                                 "`pod_cpus` (observe/asks.py): what a replica's pod runs with on a node; None: not "
                                 "stated, or not readable")
    pod_memory_gib: int | None = Field(None, ge=0, description="the most memory one of its pods requests, in GiB "
                                       "rounded up; None: not stated, or not readable")
    pod_accelerators: int | None = Field(None, ge=0, description="the most accelerators one of its pods requests; "
                                         "None: no pod states one, or not readable")

    @property
    def job_id(self) -> str | None:
        """`team/job` when Fleet's labels are on it."""
        return f"{self.team}/{self.job}" if self.team and self.job else None


class Pod(Frozen):
    """A pod of a Fleet workload (label `fleet.dev/job`, which render puts on every pod template): the node it
    runs on, so what each JobSet, Deployment and LeaderWorkerSet occupies is read, not guessed."""

    namespace: str = Field(description="namespace (the team's)")
    name: str = Field(description="pod name")
    team: str | None = Field(None, description="label fleet.dev/team")
    job: str | None = Field(None, description="label fleet.dev/job")
    pool: str | None = Field(None, description="label fleet.dev/pool")
    node: str | None = Field(None, description="spec.nodeName: the node it is bound to; None while unscheduled")
    phase: str = Field("", description="status.phase: Pending, Running, Succeeded, Failed or Unknown")
    ready: bool = Field(False, description="condition Ready is True")

    @property
    def job_id(self) -> str | None:
        """`team/job` when Fleet's labels are on it."""
        return f"{self.team}/{self.job}" if self.team and self.job else None


class Node(Frozen):
    """A Node, with the Fleet pool and unit its labels give (DESIGN 4b) and its health."""

    name: str = Field(description="node name")
    pool: str | None = Field(None, description="Fleet pool: label fleet.dev/pool, else the node pool / node group")
    unit: int | None = Field(None, description="unit index: slice i of a TPU pool (GKE node pool `<pool>-s<i>`)")
    node_pool: str | None = Field(None, description="GKE node pool or EKS node group label")
    ready: bool = Field(description="condition Ready is True")
    unschedulable: bool = Field(False, description="spec.unschedulable (cordoned)")
    cordoned_since: datetime | None = Field(None, description="when Fleet first saw it cordoned (a cordon carries no "
                                            "time: carried over from the previous snapshot, or the reconcile loop's "
                                            "memory; this observation when none); None when not cordoned")
    accelerator_healthy: bool = Field(True, description="no accelerator health condition reports a problem")
    problems: tuple[Condition, ...] = Field((), description="the conditions that make it unready or unhealthy")

    @property
    def usable(self) -> bool:
        return self.ready and not self.unschedulable and self.accelerator_healthy

    def cordoned_at(self, since: datetime | None) -> Node:
        """This node with `cordoned_since` set (a new instance: `model_copy` cannot update the nodes `parse`
        builds, whose field set is shared and frozen)."""
        return Node.model_construct(**{**self.__dict__, "cordoned_since": since})


class ObserveProblem(Frozen):
    """Why (part of) a cluster could not be read, and what to do about it."""

    resource: Resource = Field(description="what was being read: kubeconfig, workloads, jobsets or nodes")
    kind: ProblemKind = Field(description="the failure class")
    message: str = Field(description="what failed, naming the cluster, context and API path")
    hint: str = Field("", description="how to fix it")


class Completion(Frozen):
    """A durable record that a job finished (ConfigMap `fleet-completions` in `fleet-system`, one key per job:
    observe/completions.py): it outlives the job's Workload and JobSet."""

    job: str = Field(description="job id team/name")
    digest: str = Field(description="fleet.dev/spec-digest of the spec that finished")
    result: Literal["succeeded", "failed"] = Field(description="how the Workload finished")
    finished_at: datetime | None = Field(None, description="when it finished")


class ClusterObservation(Frozen):
    name: str = Field(description="Fleet cluster name (fleet/clusters/<name>.yaml)")
    context: str | None = Field(None, description="kubeconfig context it was read through")
    server: str | None = Field(None, description="API server URL of that context")
    status: Literal["ok", "degraded", "unreachable"] = Field(
        description="ok; degraded: some lists failed or objects were skipped; unreachable: nothing was read")
    problems: tuple[ObserveProblem, ...] = Field((), description="what failed, each with a hint")
    workloads: tuple[Workload, ...] = Field((), description="Kueue Workloads, by namespace then name")
    jobsets: tuple[JobSet, ...] = Field((), description="JobSets, by namespace then name")
    nodes: tuple[Node, ...] = Field((), description="Nodes, by name")
    services: tuple[ServiceWorkload, ...] = Field((), description="inference Deployments and LeaderWorkerSets with "
                                                  "Fleet's labels, by namespace, name, then kind")
    pods: tuple[Pod, ...] = Field((), description="the pods of Fleet-labelled workloads, by namespace then name "
                                  "(where each runs: `observe.occupancy`)")
    completions: tuple[Completion, ...] = Field((), description="completion records, by job (carried over from "
                                                "the previous snapshot while the cluster is unreachable)")
    completions_unknown: str | None = Field(None, description="why the completion records could not be read (a "
                                            "failed read, a body that is not the ConfigMap): unknown, not absent; "
                                            "the loop then starts no job that might have finished and writes no "
                                            "record here. None: read (or there is none yet)")
    unreadable_records: tuple[str, ...] = Field((), description="jobs whose record key holds no record (reported as "
                                                "a problem): unknown, not started while it is bad")
    services_read: bool = Field(False, description="Fleet's Deployments and LeaderWorkerSets were listed (`fleet "
                                "observe`): the services it shows are all there are; False for a snapshot that does "
                                "not model them (the simulator's), where the loop goes by what it applied")
    partial: bool = Field(False, description="answered, but a list Fleet decides with failed (`unread_lists`): "
                          "what runs there is not known, so the loop treats it as unreachable, never as lost "
                          "(`partial_as_unreachable`)")
    unreachable_since: datetime | None = Field(None, description="unreachable without a break since then (carried "
                                               "over from the previous snapshot); None when reachable")
    last_running: tuple[JobSet, ...] = Field((), description="while unreachable: the JobSets of the jobs admitted "
                                             "or running when it was last read (carried over), by namespace then name")

    def running_jobsets(self) -> tuple[JobSet, ...]:
        """The JobSets whose Workload is admitted or running."""
        live = {(w.namespace, w.jobset) for w in self.workloads if w.jobset and w.phase() in ("admitted", "running")}
        return tuple(js for js in self.jobsets if (js.namespace, js.name) in live)


class Snapshot(Frozen):
    """The live state of every cluster at `observed_at` (`fleet observe --format json`)."""

    version: Literal[1] = Field(1, description="snapshot format version")
    observed_at: datetime = Field(description="when the observation started (UTC)")
    robots: RobotsObservation = Field(default_factory=RobotsObservation,
                                      description="robot rollouts and robots (DESIGN 4d), from the fleets' registries")
    clusters: tuple[ClusterObservation, ...] = Field(description="one per cluster of fleet/clusters, by name")

    def cluster(self, name: str) -> ClusterObservation | None:
        return next((c for c in self.clusters if c.name == name), None)

    def to_json(self) -> str:
        return self.model_dump_json() + "\n"      # compact: 240,000 objects are read by tools, not people

    def json_chunks(self) -> Iterator[str]:
        """`to_json()` in pieces, one per cluster, to write or print without holding the whole text (100 MiB
        for 20 clusters of 12,000 objects) and pydantic's copy of it at once. Same text once joined."""
        head = self.model_dump_json(exclude={"clusters"})     # `clusters` is the last field
        yield head[:-1] + ',"clusters":['
        for i, c in enumerate(self.clusters):
            yield ("," if i else "") + c.model_dump_json()
        yield "]}\n"


def carry_over(prev: Snapshot | None, snap: Snapshot) -> Snapshot:
    """`snap` with what only an earlier snapshot knows: for a cluster unreachable now, since when (the previous
    `unreachable_since` when it was unreachable then too, else this observation), its last known completion
    records (so a lost cluster's finished jobs are not started elsewhere) and the jobs that ran there when it
    was last read (kept there until the cluster counts as lost, then moved with the reason); for a node
    cordoned now, since when Fleet first saw it cordoned (`cordoned_since`: the previous snapshot's when it
    was cordoned then too, else this observation)."""
    clusters = []
    for c in snap.clusters:
        if any(n.unschedulable and n.cordoned_since is None for n in c.nodes):
            old = prev.cluster(c.name) if prev is not None else None
            before = {n.name: n.cordoned_since for n in old.nodes if n.unschedulable} if old is not None else {}
            c = c.model_copy(update={"nodes": tuple(
                n.cordoned_at(before.get(n.name) or snap.observed_at)
                if n.unschedulable and n.cordoned_since is None else n for n in c.nodes)})
        if c.status == "unreachable":
            old = prev.cluster(c.name) if prev is not None else None
            since = old.unreachable_since if old is not None and old.status == "unreachable" \
                and not (c.partial or old.partial) else None       # a cluster that answers is never lost
            records = c.completions or (old.completions if old is not None else ())
            running = () if old is None else old.last_running if old.status == "unreachable" else old.running_jobsets()
            c = c.model_copy(update={"unreachable_since": since or c.unreachable_since or snap.observed_at,
                                     "completions": records, "last_running": c.last_running or running})
        clusters.append(c)
    return snap.model_copy(update={"clusters": tuple(clusters)})


DECIDING_LISTS: tuple[Resource, ...] = ("workloads", "jobsets", "nodes", "deployments", "leaderworkersets", "pods",
                                        "rayjobs", "rayservices")
"""The lists what runs is read from: one that failed leaves what runs in that cluster unknown."""


def unread_lists(c: ClusterObservation) -> list[str]:
    """The lists of `DECIDING_LISTS` that could not be read in a cluster that answered (a skipped malformed
    object is not a failed list; a LeaderWorkerSet CRD that is not installed is no problem at all)."""
    return sorted({p.resource for p in c.problems if p.resource in DECIDING_LISTS and p.kind != "invalid-object"})


def partial_as_unreachable(snap: Snapshot) -> Snapshot:
    """The snapshot the loop decides from: a cluster that answered but whose Workloads, JobSets, Nodes,
    Deployments, LeaderWorkerSets or pods could not be listed is treated as unreachable (nothing is started,
    stopped, moved or resized on the strength of a list that failed: an empty JobSet list read as "nothing
    runs there" would start a second copy elsewhere), but `partial`: it answers, so it never counts as lost
    and its jobs are never failed over for it."""
    if not any(c.status == "degraded" and unread_lists(c) for c in snap.clusters):
        return snap
    return snap.model_copy(update={"clusters": tuple(
        c.model_copy(update={"status": "unreachable", "partial": True})
        if c.status == "degraded" and unread_lists(c) else c for c in snap.clusters)})


def summary(snap: Snapshot) -> str:
    """`fleet observe --format text`: per cluster its status, what it holds, and each problem with its hint."""
    lines = [f"observed at {snap.observed_at.isoformat()}"]
    for c in snap.clusters:
        phases: dict[str, int] = {}
        for w in c.workloads:
            phases[w.phase()] = phases.get(w.phase(), 0) + 1
        tally = ", ".join(f"{n} {p}" for p, n in sorted(phases.items()))
        unusable = sum(not n.usable for n in c.nodes)
        serving = (f", {len(c.services)} service workloads ({sum(s.ready_replicas for s in c.services)}/"
                   f"{sum(s.replicas for s in c.services)} replicas ready)") if c.services else ""
        lines.append(f"{c.name}: {c.status}: {len(c.workloads)} workloads" + (f" ({tally})" if tally else "")
                     + f", {len(c.jobsets)} jobsets{serving}, {len(c.nodes)} nodes ({unusable} not usable)")
        for p in c.problems:
            lines += [f"  error: {p.message}", f"  hint: {p.hint}"]
    return "\n".join(lines) + "\n"
