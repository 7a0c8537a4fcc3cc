"""deploy/: the reconciler's manifests validate against the Kubernetes schemas (kubernetes-validate, offline), are
up to date for the example, run as non-root with one replica, and grant exactly what the reconciler does: every
request a real cycle sends to the local API servers is allowed by the generated RBAC, and nothing broader."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kube_api import clusters

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.reconcile.deploy import manifests
from reconciler.sources import read_worktree

ROOT = Path(__file__).resolve().parents[1]
IMAGE, GIT = "ghcr.io/ml-org/fleet:0.1.0", "https://github.com/ml-org/fleet.git"
K8S_VERSION = "1.33.0"


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return manifests(check(read_worktree(ROOT), load_catalog()), IMAGE, GIT, "main")


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_manifests_validate_strictly_against_the_kubernetes_schemas(generated: dict[str, str]) -> None:
    for text in generated.values():
        for doc in docs(text):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)   # raises on any schema error


def test_the_validator_rejects_a_broken_manifest(generated: dict[str, str]) -> None:
    deployment = next(d for d in docs(generated["management.yaml"]) if d["kind"] == "Deployment")
    deployment["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


def test_the_committed_manifests_are_the_generated_ones(generated: dict[str, str]) -> None:
    for name, text in generated.items():
        assert (ROOT / "deploy" / "manifests" / name).read_text() == text, \
            f"regenerate: fleet reconcile-manifests --image {IMAGE} --git-repo {GIT}"


def test_one_replica_non_root_read_only(generated: dict[str, str]) -> None:
    deployment = next(d for d in docs(generated["management.yaml"]) if d["kind"] == "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert sc["runAsNonRoot"] and sc["runAsUser"] > 0 and sc["readOnlyRootFilesystem"]
        assert not sc["allowPrivilegeEscalation"] and sc["capabilities"] == {"drop": ["ALL"]}
        assert re.search(r":v?\d+\.\d+\.\d+$", c["image"]), c["image"]      # pinned to an exact version


def test_the_dockerfile_is_pinned_and_non_root() -> None:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", text, re.M)
    assert bases and all(re.search(r":\d+\.\d+\.\d+[-\w]*$|@sha256:[0-9a-f]{64}$", b) for b in bases)
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert "--require-hashes" in text


def rules_of(text: str) -> list[tuple[str | None, dict[str, Any]]]:
    """(namespace or None for cluster-wide, rule) of every Role and ClusterRole that a binding grants."""
    ds = docs(text)
    roles = {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")): d for d in ds
             if d["kind"] in ("Role", "ClusterRole")}
    out = []
    for b in ds:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ns = b["metadata"].get("namespace")
        role = roles[(b["roleRef"]["kind"], b["roleRef"]["name"], ns if b["roleRef"]["kind"] == "Role" else None)]
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "fleet-reconciler", "namespace": "fleet-system"}]
        out += [(ns, r) for r in role["rules"]]
    return out


def allowed(rules: list[tuple[str | None, dict[str, Any]]], group: str, resource: str, verb: str,
            namespace: str | None, name: str | None) -> bool:
    return any((ns is None or ns == namespace) and group in r["apiGroups"] and resource in r["resources"]
               and verb in r["verbs"] and (not r.get("resourceNames") or name in r["resourceNames"])
               for ns, r in rules)


def test_no_rule_is_broader_than_named_resources(generated: dict[str, str]) -> None:
    for text in generated.values():
        for _, r in rules_of(text):
            assert "*" not in r["verbs"] + r["resources"] + r["apiGroups"]
            assert not {"secrets", "roles", "rolebindings", "clusterroles"} & set(r["resources"])
            # pods: listed by observe, for the node each of Fleet's workloads runs on; never written
            assert "pods" not in r["resources"] or r["verbs"] == ["list"]
            assert not {"escalate", "bind", "impersonate"} & set(r["verbs"])


def test_every_request_of_a_real_cycle_is_allowed_by_the_rbac(tmp_path: Path, generated: dict[str, str]) -> None:
    """The reconciler runs the example in a test cluster set up to exercise every kind of request (observe,
    completion records, the Lease, server-side apply of new JobSets, stop, Events); each request's verb must be
    granted by the manifests (the Lease by management.yaml, the rest by managed-cluster.yaml)."""
    from test_reconcile import Rig, fleet_files, running, slice_nodes

    from reconciler.reconcile.deploy import managed
    from reconciler.render.yamlout import dump_all

    with clusters("a", "b", "mgmt") as servers:
        slice_nodes(servers["a"], 0)
        servers["b"].add(*running("vision", "gone"))                    # stopped: its file is gone
        rig = Rig(tmp_path, servers, fleet_files())
        report = rig.reconciler().cycle()
        assert report.writes and {r.action.kind for r in report.results} >= {"start", "stop"}
        requests = [(name, r) for name, c in servers.items() for r in c.requests]
    lease_rules = rules_of(generated["management.yaml"])
    cluster_rules = rules_of(dump_all(managed(["vision", "lang"])))
    seen = set()
    for cluster, r in requests:
        group, resource, namespace, name = route(r.path)
        verbs = {"GET": ["get" if name else "list"], "DELETE": ["delete"], "POST": ["create"], "PUT": ["update"],
                 "PATCH": ["patch", "create"] if resource == "jobsets" else ["patch"]}[r.method]
        rules = lease_rules if resource == "leases" else cluster_rules
        for verb in verbs:
            assert allowed(rules, group, resource, verb, namespace, name), (cluster, r.method, r.path, verb)
            seen.add((resource, verb))
    assert {("leases", "get"), ("leases", "create"), ("jobsets", "patch"), ("jobsets", "delete"),
            ("events", "create"), ("nodes", "list"), ("workloads", "list"), ("deployments", "list"),
            ("leaderworkersets", "list"), ("pods", "list")} <= seen


def route(path: str) -> tuple[str, str, str | None, str | None]:
    """(API group, resource, namespace, name) of a request path."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = None
    if rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    return group, rest[0], namespace, rest[1] if len(rest) > 1 else None


def test_the_scheduled_workflow_runs_one_cycle_every_ten_minutes_behind_apply_s_approvals() -> None:
    workflows = ROOT / ".github" / "workflows"
    wf = yaml.safe_load((workflows / "reconcile.yml").read_text())
    apply = yaml.safe_load((workflows / "apply.yml").read_text())
    assert wf[True]["schedule"] == [{"cron": "*/10 * * * *"}]          # YAML 1.1 reads `on` as true
    assert wf["concurrency"] == {"group": "fleet-reconcile", "cancel-in-progress": False}
    assert wf["concurrency"]["group"] != apply["concurrency"]["group"]
    job = wf["jobs"]["reconcile"]
    assert job["environment"] == apply["jobs"]["apply"]["environment"]
    steps = job["steps"]
    order = [("install" if "pip install" in s.get("run", "") else
              "login" if s.get("uses", "").startswith(("google-github-actions/auth@", "aws-actions/")) else
              "fleet" if "fleet reconcile --once" in s.get("run", "") else "") for s in steps]
    assert [o for o in order if o] == ["install", "login", "login", "fleet"]
    restore = next(s for s in steps if s.get("uses", "").startswith("actions/cache/restore@"))
    save = next(s for s in steps if s.get("uses", "").startswith("actions/cache/save@"))
    run = next(s["run"] for s in steps if "fleet reconcile --once" in s.get("run", ""))
    assert restore["with"]["path"] == save["with"]["path"] == ".fleet/reconcile"
    assert "--memory .fleet/reconcile/memory.json" in run and save["if"] == "always()"
