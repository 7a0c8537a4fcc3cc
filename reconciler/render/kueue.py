"""Kueue `kueue.x-k8s.io/v1beta2` objects of one cluster, in apply order. Pure.

Order (what must exist before what refers to it): Namespaces of the teams' LocalQueues, ResourceFlavors,
Topologies, Cohorts, WorkloadPriorityClasses, ClusterQueues, LocalQueues. Within a kind, by name.

- ResourceFlavor per pool (see facts.py for the node labels), with `tolerations` for the device taint (Kueue
  adds them to admitted pods) and `topologyName` where a Topology applies;
- Cohort per cohort of policies/teams.yaml with `parentName`: the same tree in every cluster, since Kueue
  borrows only inside one cluster;
- ClusterQueue per team, named after the team: one resource group covering cpu, memory and the device
  resources of its flavors. Device quotas come from quota.py. `cohortName`, `fairSharing.weight` (the
  team's weight) and `preemption` from policies/priorities.yaml;
- WorkloadPriorityClass per class, LocalQueue per team (named after the team) in the team's namespace.

cpu and memory are not Fleet quotas, but Kueue admits no workload that requests a resource its
ClusterQueue does not cover ("resource cpu unavailable in ClusterQueue", Kueue's flavorassigner), and
every pod requests cpu and memory once a namespace LimitRange or a webhook fills in defaults. So each
flavor covers them: what the pool's nodes hold at `max` where the catalog knows the node (Kueue never
admits more than fits), and where it does not (TPU v6e and TPU7x hosts: `vcpus: null` in the catalog,
no source found) a ceiling of UNKNOWN_NODE_CPUS / UNKNOWN_NODE_MEMORY_GIB per node, at least what placed
jobs request. The ceiling is several times the largest machine the catalog lists, so it never binds: the
device quota (every Fleet pod requests its host's chips, a host at a time) and the kube-scheduler bound
what runs there. A ceiling of 0 plus the plan's requests, as before, kept any pod with defaulted requests
out forever.

Layouts considered and rejected: cpu/memory in a second resource group with the same pool flavors
(`<pool>-host`) is unsound, since Kueue picks a group's flavor by the node labels the pod constrains and a
TPU pod that does not mention `cloud.google.com/gke-nodepool` also matches a GPU pool's host flavor,
whose labels Kueue would then add to the pod; a second group with one label-less flavor is sound but
needs the same unknown number; Kueue's `resources.excludeResourcePrefixes: [cpu, memory]` (its
Configuration, not an object Fleet renders) is cluster-wide, drops the known-node bound too, and would
have to be kept in step with every cluster's Kueue install by hand.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ..models import Cohort, PrioritiesDoc, Team
from ..problems import RejectedError
from .facts import HOSTNAME_LABEL, NODE_POOL_LABEL, TEAM_LABEL, TPU_SLICE_TOPOLOGY, PoolFacts
from .flavor_quota import FlavorQuota
from .network import EFA_RESOURCE, efa_interfaces
from .provisioning import provisioning_objects, with_checks

KUEUE = "kueue.x-k8s.io/v1beta2"
WITHIN = {"never": "Never", "lower_priority": "LowerPriority",
          "lower_or_newer_equal_priority": "LowerOrNewerEqualPriority"}
RECLAIM = {"never": "Never", "lower_priority": "LowerPriority", "any": "Any"}
BORROW = {"never": "Never", "lower_priority": "LowerPriority"}
TOPOLOGY_LEVELS = {TPU_SLICE_TOPOLOGY: (NODE_POOL_LABEL, HOSTNAME_LABEL)}
UNKNOWN_NODE_CPUS = 1024
UNKNOWN_NODE_MEMORY_GIB = 16384
"""Per node, where the catalog does not know the machine: at least 4x the largest machine it lists (now
224 vCPUs, 3,968 GiB: a4-highgpu-8g; a test keeps it so), so that Kueue's cpu/memory quota never binds
there (module docstring)."""

Obj = dict[str, Any]


def quantity(x: float) -> str:
    """A Kubernetes quantity string for a non-negative number, without float noise ("1.5", "3")."""
    d = Decimal(repr(float(x))).normalize()
    return format(d, "f")


def resource_flavor(f: PoolFacts) -> Obj:
    spec: Obj = {"nodeLabels": dict(f.node_labels),
                 "tolerations": [{"key": f.resource, "operator": "Exists", "effect": "NoSchedule"}]}
    if f.topology:
        spec["topologyName"] = f.topology
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f.name}, "spec": spec}


def topology(name: str) -> Obj:
    return {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS[name]]}}


def cohort(c: Cohort) -> Obj:
    spec: Obj = {"parentName": c.parent} if c.parent else {}
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": c.name}, "spec": spec}


def priority_class(name: str, value: int, preemptible: bool) -> Obj:
    why = "Fleet never plans preemption of this class" if not preemptible else "Fleet priority class"
    return {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value, "description": f"{why} `{name}` (policies/priorities.yaml)"}


def preemption(prio: PrioritiesDoc) -> Obj:
    """The ClusterQueue's preemption rules. Kueue rejects borrowWithinCohort preemption without
    reclaimWithinCohort preemption (a CEL rule of the CRD), so that combination stops the render."""
    p = prio.preemption
    if p.reclaim_within_cohort == "never" and p.borrow_within_cohort.policy != "never":
        raise RejectedError("policies/priorities.yaml: preemption.borrow_within_cohort.policy is "
                            f"{p.borrow_within_cohort.policy} while reclaim_within_cohort is never; Kueue rejects "
                            "a ClusterQueue that preempts to borrow but not to reclaim",
                            "set reclaim_within_cohort to lower_priority or any, or borrow_within_cohort.policy "
                            "to never")
    borrow: Obj = {"policy": BORROW[p.borrow_within_cohort.policy]}
    if p.borrow_within_cohort.policy != "never" and p.borrow_within_cohort.max_priority_threshold is not None:
        borrow["maxPriorityThreshold"] = p.borrow_within_cohort.max_priority_threshold
    return {"withinClusterQueue": WITHIN[p.within_team], "reclaimWithinCohort": RECLAIM[p.reclaim_within_cohort],
            "borrowWithinCohort": borrow}


def cluster_queue(team: Team, quotas: list[FlavorQuota], facts: Mapping[str, PoolFacts],
                  requests: Mapping[tuple[str, str], int], prio: PrioritiesDoc,
                  cpu_memory: Mapping[str, tuple[str, str]]) -> Obj:
    """`requests[(pool, resource)]`: what placed jobs request there in total; `cpu_memory`: each flavor's cpu
    and memory quota (`_cpu_memory`), the same in every team's queue."""
    flavors = sorted({q.flavor for q in quotas})
    devices = sorted({facts[f].resource for f in flavors})
    efa = any(_efa_per_node(facts[f]) for f in flavors)
    covered = ["cpu", "memory", *devices, *([EFA_RESOURCE] if efa else [])]
    by_flavor = {q.flavor: q for q in quotas}
    groups: list[Obj] = []
    if flavors:
        entries = []
        for f in flavors:
            q, pf = by_flavor[f], facts[f]
            cpu, memory = cpu_memory[f]
            res = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]
            for dev in devices:
                r: Obj = {"name": dev, "nominalQuota": q.nominal + q.spot if dev == pf.resource else 0}
                if team.cohort is not None and dev == pf.resource:
                    if q.borrowing_limit is not None:
                        r["borrowingLimit"] = q.borrowing_limit
                    lend = q.lending_limit if q.lending_limit is not None or not q.spot else q.nominal
                    if lend is not None:   # a `spot:` quota is never lent: at most the nominal part is
                        r["lendingLimit"] = lend
                res.append(r)
            if efa:
                res.append(_efa(pf, requests))
            entries.append({"name": f, "resources": res})
        groups.append({"coveredResources": covered, "flavors": entries})
    spec: Obj = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.queue_namespace}}}
    if team.cohort is not None:
        spec["cohortName"] = team.cohort
    spec["queueingStrategy"] = "BestEffortFIFO"
    spec["resourceGroups"] = groups
    spec["preemption"] = preemption(prio)
    spec["fairSharing"] = {"weight": quantity(team.weight)}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": team.name, "labels": {
        TEAM_LABEL: team.name}}, "spec": spec}


def _cpu_memory(pf: PoolFacts, requests: Mapping[tuple[str, str], int]) -> tuple[str, str]:
    """The flavor's cpu and memory quota: what its nodes hold at max, or what placed jobs request if more.
    `requests[(pool, "cpu"|"memory")]`: what placed jobs request there in total (cores, GiB)."""
    p = pf.pool
    nodes = p.nodes_per_unit * p.max
    cpus = p.node_cpus if p.node_cpus is not None else UNKNOWN_NODE_CPUS
    memory = p.node_memory_gib if p.node_memory_gib is not None else UNKNOWN_NODE_MEMORY_GIB
    return (str(max(cpus * nodes, requests.get((p.name, "cpu"), 0))),
            f"{max(memory * nodes, requests.get((p.name, 'memory'), 0))}Gi")


def _efa_per_node(pf: PoolFacts) -> int:
    return efa_interfaces(pf.pool.provider, pf.pool.machine_type)


def _efa(pf: PoolFacts, requests: Mapping[tuple[str, str], int]) -> Obj:
    """EFA devices (network.py) are an extended resource the pods request, so the ClusterQueue covers
    them too: what the pool's nodes hold at max, which never binds before the GPUs do."""
    p = pf.pool
    total = max(_efa_per_node(pf) * p.nodes_per_unit * p.max, requests.get((p.name, EFA_RESOURCE), 0))
    return {"name": EFA_RESOURCE, "nominalQuota": total}


def local_queue(team: Team) -> Obj:
    return {"apiVersion": KUEUE, "kind": "LocalQueue",
            "metadata": {"name": team.name, "namespace": team.queue_namespace, "labels": {TEAM_LABEL: team.name}},
            "spec": {"clusterQueue": team.name}}


def namespace(name: str, teams: list[str]) -> Obj:
    """The namespace of one or more teams' LocalQueues (labelled with the team when it has one)."""
    meta: Obj = {"name": name}
    if len(teams) == 1:
        meta["labels"] = {TEAM_LABEL: teams[0]}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def kueue_objects(facts: list[PoolFacts], teams: list[Team], cohorts: list[Cohort], prio: PrioritiesDoc,
                  quotas: list[FlavorQuota], requests: Mapping[tuple[str, str], int]) -> list[Obj]:
    """Every Kueue object of one cluster, in apply order (module docstring)."""
    by_name = {f.name: f for f in facts}
    ns: dict[str, list[str]] = defaultdict(list)
    for t in teams:
        ns[t.queue_namespace].append(t.name)
    per_team: dict[str, list[FlavorQuota]] = defaultdict(list)
    for q in quotas:
        per_team[q.team].append(q)
    objs: list[Obj] = [namespace(n, sorted(ns[n])) for n in sorted(ns)]
    objs += [resource_flavor(f) for f in sorted(facts, key=lambda f: f.name)]
    objs += [topology(t) for t in sorted({f.topology for f in facts if f.topology})]
    objs += [cohort(c) for c in sorted(cohorts, key=lambda c: c.name)]
    objs += [priority_class(c.name, c.value, c.preemptible) for c in sorted(prio.classes, key=lambda c: c.name)]
    objs += provisioning_objects(facts)     # issue 26: queued pools' admission check, before the queues naming it
    cpu_memory = {f.name: _cpu_memory(f, requests) for f in facts}   # the same in every team's queue
    objs += [with_checks(cluster_queue(t, per_team[t.name], by_name, requests, prio, cpu_memory), facts)
             for t in sorted(teams, key=lambda t: t.name)]
    objs += [local_queue(t) for t in sorted(teams, key=lambda t: t.name)]
    return objs


def flavor_terms(facts: list[PoolFacts], team: Team, prio: PrioritiesDoc) -> dict[str, Obj]:
    """flavor -> what a ClusterQueue holding it says of it that git alone decides: its cpu, memory and EFA quotas
    (what the nodes hold at max), the resources it covers, its admission check (a queued pool), as `cluster_queue`
    renders them for `team` at zero quota there. The reconcile loop's digests (`render.kueue_config`): a queue
    rendered without quotas has no flavors, and the quotas themselves follow the plan."""
    by_name = {f.name: f for f in facts}
    cpu_memory = {f.name: _cpu_memory(f, {}) for f in facts}
    out: dict[str, Obj] = {}
    for f in facts:
        zero = FlavorQuota("", team.name, f.pool.accelerator, f.name, 0, None, None, 0)
        spec = with_checks(cluster_queue(team, [zero], by_name, {}, prio, cpu_memory), facts)["spec"]
        out[f.name] = {"resourceGroups": spec["resourceGroups"], "checks": spec.get("admissionChecksStrategy")}
    return out
