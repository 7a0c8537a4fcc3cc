"""Kueue objects (`kueue` stacks) for one cluster, through pulumi_kubernetes. JobSets are in no stack: `fleet
apply` sends them by server-side apply after the stacks (reconciler/apply/jobs.py).

- One explicit `pulumi_kubernetes.Provider` per cluster, built from the spec's `kubernetes.context` (else the
  stack config `fleet:kubeContext`). Never the kubeconfig's current context: applying a fleet's queues to
  whichever cluster a laptop last pointed at is the accident this prevents, so a spec with neither fails.
- Every manifest is applied as it was rendered, through `Manifest`, a custom resource whose properties are
  the whole manifest. `pulumi_kubernetes.apiextensions.CustomResource` in Python only carries `spec`, and a
  WorkloadPriorityClass keeps `value` and `description` at the top level, so the typed class would drop them
  (pulumi/pulumi-kubernetes#2363). The type token is the provider's own (`kubernetes:<group/version>:<Kind>`,
  `core/v1` for the core group), so the provider treats them exactly like its typed resources.
- Resource names are stable: `<namespace>/<name>` or `<name>` (the type token already holds the kind), as
  Pulumi's Kubernetes YAML support names them; renaming nothing means Pulumi never replaces an object
  because of how Fleet named it.
- Ordering: objects are grouped in tiers (namespaces; topologies and priority classes; resource flavors and
  cohorts; cluster queues; local queues; everything else, e.g. JobSets) and each object depends on every
  object of the nearest earlier tier that has any, so a ClusterQueue is created after the flavors and cohorts
  it names, and a LocalQueue after its ClusterQueue and namespace (through the chain).
"""

from __future__ import annotations

from typing import Any

from . import Program
from .spec import SpecError

CONTEXT_KEY = "kubeContext"
TIER_BY_KIND = {
    "Namespace": 0,
    "Topology": 1,
    "WorkloadPriorityClass": 1,
    "ProvisioningRequestConfig": 1,     # queued pools (issue 26): the config before its check,
    "ResourceFlavor": 2,
    "Cohort": 2,
    "AdmissionCheck": 2,                # the check before the ClusterQueues that name it
    "ClusterQueue": 3,
    "LocalQueue": 4,
}
LAST_TIER = 5


def resource_name(obj: dict[str, Any]) -> str:
    """The stable Pulumi name of one manifest: `<namespace>/<name>` or `<name>` for cluster-scoped objects."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


def type_token(obj: dict[str, Any]) -> str:
    """`kueue.x-k8s.io/v1beta2` + `ClusterQueue` -> `kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue`."""
    api_version = str(obj["apiVersion"])
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{obj['kind']}"


def tiers(spec: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The spec's objects grouped by tier, in spec order within a tier; empty tiers dropped.

    Raises SpecError when two objects would get the same Pulumi identity (same type and name).
    """
    seen: set[tuple[str, str]] = set()
    grouped: list[list[dict[str, Any]]] = [[] for _ in range(LAST_TIER + 1)]
    for i, obj in enumerate(spec["objects"]):
        key = (type_token(obj), resource_name(obj))
        if key in seen:
            raise SpecError(spec["stack"], f"objects[{i}].metadata.name",
                            f"{obj['kind']} {key[1]} appears twice; each object must appear once")
        seen.add(key)
        grouped[TIER_BY_KIND.get(str(obj["kind"]), LAST_TIER)].append(obj)
    return [tier for tier in grouped if tier]


def program(spec: dict[str, Any]) -> Program:
    grouped = tiers(spec)  # fail on duplicates when the program is built, before Pulumi runs

    def run() -> None:
        import pulumi
        import pulumi_kubernetes as k8s

        class Manifest(pulumi.CustomResource):
            """One Kubernetes object, every top-level field passed through as rendered."""

            def __init__(self, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
                super().__init__(type_token(obj), resource_name(obj), dict(obj), opts)

        context = spec["kubernetes"]["context"] or pulumi.Config("fleet").get(CONTEXT_KEY)
        if not context:
            raise pulumi.RunError(
                f"stack {spec['stack']}: no kubeconfig context for cluster {spec['kubernetes']['cluster']}; set "
                f"`kubernetes.context` in fleet/clusters/{spec['cluster']}.yaml or the stack config "
                f"fleet:{CONTEXT_KEY} (pulumi config set --stack {spec['stack']} fleet:{CONTEXT_KEY} CONTEXT); "
                "Fleet never falls back to the current context")
        provider = k8s.Provider(f"k8s-{spec['cluster']}", context=context)
        previous: list[pulumi.Resource] = []
        for tier in grouped:
            created: list[pulumi.Resource] = [
                Manifest(obj, pulumi.ResourceOptions(provider=provider, depends_on=list(previous)))
                for obj in tier]
            previous = created
        pulumi.export("objects", [f"{o['kind']}/{resource_name(o)}" for tier in grouped for o in tier])

    return run
