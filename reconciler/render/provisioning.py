"""Queued provisioning (issue 26): a pool with `provisioning: queued` gets its units through Kueue's
ProvisioningRequest admission check, not through a node count Fleet sets. Pure.

Per cluster with such pools: one `ProvisioningRequestConfig` (`provisioningClassName:
queued-provisioning.gke.io`, GKE's flex-start / Dynamic Workload Scheduler class, managing the device
resources of the queued pools) and one `AdmissionCheck` (`controllerName: kueue.x-k8s.io/provisioning-request`,
its parameters that config); every ClusterQueue that has a queued pool's flavor lists the check
`onFlavors` those flavors only, so work on fixed pools is admitted as before. Kueue then creates a
ProvisioningRequest (autoscaling.x-k8s.io/v1) for each admitted workload, the cluster autoscaler asks GKE for
the nodes, and the workload starts when they are granted (the delay `fleet simulate` models).
"""

from __future__ import annotations

from typing import Any

from .facts import PoolFacts

KUEUE = "kueue.x-k8s.io/v1beta2"
CHECK = "fleet-queued-provisioning"
CONTROLLER = "kueue.x-k8s.io/provisioning-request"
GKE_QUEUED_CLASS = "queued-provisioning.gke.io"

Obj = dict[str, Any]


def queued(facts: list[PoolFacts]) -> list[PoolFacts]:
    return sorted((f for f in facts if f.pool.queued), key=lambda f: f.name)


def provisioning_objects(facts: list[PoolFacts]) -> list[Obj]:
    """The ProvisioningRequestConfig and AdmissionCheck of a cluster with queued pools (none without)."""
    mine = queued(facts)
    if not mine:
        return []
    resources = sorted({f.resource for f in mine})
    config = {"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": CHECK},
              "spec": {"provisioningClassName": GKE_QUEUED_CLASS, "managedResources": resources}}
    check = {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": CHECK},
             "spec": {"controllerName": CONTROLLER,
                      "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                     "name": CHECK}}}
    return [check, config]


def with_checks(queue: Obj, facts: list[PoolFacts]) -> Obj:
    """The ClusterQueue with the admission check on its queued flavors (unchanged if it has none)."""
    names = {f.name for f in queued(facts)}
    groups = queue["spec"].get("resourceGroups", [])
    mine = sorted({e["name"] for g in groups for e in g["flavors"] if e["name"] in names})
    if mine:
        queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK, "onFlavors": mine}]}
    return queue
