"""Issue 21, items 5 and 6: Fleet's namespace and credentials are Fleet's, and the low findings of the live
side's probe (inputs read with the repository's file rules, the metrics server's exposure, the trace
importer's numbers, health-check's input, reconcile-manifests' inputs)."""

from __future__ import annotations

import importlib

from reconciler import kube_rules
from reconciler.reconcile import deploy

node_health = importlib.import_module("reconciler.render.node_health")   # the package exports a function of that name


def test_the_reserved_names_are_those_fleet_deploys() -> None:
    """validate refuses exactly the names Fleet's own manifests use: its namespace, ServiceAccounts and
    credential Secrets (a rename in deploy.py without kube_rules would let a job name the new one)."""
    objs = deploy.management("img:1", "https://example.com/org/fleet.git", "main") + deploy.managed(["vision"])
    assert deploy.NAMESPACE == kube_rules.FLEET_NAMESPACE and kube_rules.reserved_namespace(deploy.NAMESPACE)
    accounts = {o["metadata"]["name"] for o in objs if o["kind"] == "ServiceAccount"} | {node_health.NAME}
    assert accounts == kube_rules.FLEET_SERVICE_ACCOUNTS
    secrets = {o["metadata"]["name"] for o in objs if o["kind"] == "Secret"}
    for o in objs:
        for c in o.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            secrets |= {e["valueFrom"]["secretKeyRef"]["name"] for e in c.get("env", []) if "valueFrom" in e
                        and "secretKeyRef" in e["valueFrom"]}
    assert secrets == kube_rules.FLEET_SECRETS
    assert kube_rules.reserved_namespace(node_health.NAMESPACE)
