"""The reconciler as a Kubernetes Deployment: the manifests `fleet reconcile-manifests` writes for a repository. Pure.

Two files, because the reconciler runs in one cluster and acts on many:
- `management.yaml`, for the cluster that runs it (the repository's `reconcile.lease_cluster`): the namespace
  `fleet-system`, a ServiceAccount, the Lease's Role (get/update of `fleet-reconciler` only, create, which
  RBAC cannot narrow by name) and its RoleBinding, the Secret that holds the kubeconfig of the managed
  clusters (empty here: fill it with `kubectl create secret`, never commit it), and the Deployment: one
  replica (`Recreate`, so an update never runs two; the Lease fences any other writer anyway), a git-sync
  sidecar keeping the repository at the branch head in a shared emptyDir, and the reconciler
  (`fleet reconcile --repo /repo/fleet --format json --metrics-port 9090 --metrics-address 0.0.0.0`: one JSON
  line per action in the pod's log, Prometheus metrics on port `metrics` of the pod's address; the reconciler
  serves them on loopback only unless told). The image, the git URL and the branch are checked first
  (`image_problem`, `git_url_problem`, `branch_problem`). Both
  containers run as non-root with a read-only root filesystem, no privilege escalation, no capabilities and the
  runtime's default seccomp profile; the pod mounts no service-account token it does not need for the Lease.
- `managed-cluster.yaml`, for every cluster of `fleet/clusters/` (applied with that cluster's admin
  credentials): the identity the kubeconfig Secret uses there (a ServiceAccount `fleet-reconciler` in
  `fleet-system`; bind a cloud identity instead where the kubeconfig uses one) and exactly what Fleet reads
  and writes there:
  cluster-wide: list Nodes, Workloads and JobSets (observe reads them cluster-wide); the Kueue objects the
  `<cluster>-kueue` Pulumi stack owns (ResourceFlavors, ClusterQueues, Cohorts, WorkloadPriorityClasses,
  Topologies); the team Namespaces (get/patch/update only by name; create cannot be narrowed);
  per team namespace (a Role each): JobSets (get, create, patch, delete: server-side apply and stop),
  Deployments, LeaderWorkerSets and Services of inference jobs, LocalQueues, and Events (create);
  in `fleet-system`: the `fleet-completions` ConfigMap (observe/completions.py), and in the lease cluster
  the Slurm clusters' `fleet-completions-slurm` (slurm/records.py; the Role is the same in every cluster).
Nothing else: no Secrets, no Pods, no escalate/bind/impersonate.
"""

from __future__ import annotations

import re
from typing import Any

from ..kube_rules import IMAGE_REFERENCE
from ..kube_rules import image_problem as kube_image_problem
from ..observe.completions import CONFIGMAP, SLURM_CONFIGMAP
from ..render.yamlout import dump_all
from ..validate import Validated

NAMESPACE = "fleet-system"
NAME = "fleet-reconciler"
GIT_SYNC = "registry.k8s.io/git-sync/git-sync:v4.4.0"
Obj = dict[str, Any]
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "fleet"}


def _meta(name: str, namespace: str | None = NAMESPACE) -> Obj:
    meta: Obj = {"name": name, "labels": dict(LABELS)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _rule(groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None = None) -> Obj:
    rule: Obj = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


def _binding(kind: str, name: str, namespace: str | None) -> Obj:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": _meta(name, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]}


def _namespace() -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(NAMESPACE, None)}


def _service_account() -> Obj:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME)}


SECURE = {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
          "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def management(image: str, git_repo: str, branch: str) -> list[Obj]:
    lease = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(f"{NAME}-lease"),
             "rules": [_rule(["coordination.k8s.io"], ["leases"], ["get", "update"], [NAME]),
                       _rule(["coordination.k8s.io"], ["leases"], ["create"])]}
    binding = _binding("Role", f"{NAME}-lease", NAMESPACE)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": _meta("fleet-kubeconfig"), "type": "Opaque",
              "stringData": {"config": "# replace with the kubeconfig of the managed clusters, e.g.\n"
                                       "# kubectl -n fleet-system create secret generic fleet-kubeconfig "
                                       "--from-file=config=KUBECONFIG --dry-run=client -o yaml | kubectl apply -f -\n"}}
    sync = {"name": "git-sync", "image": GIT_SYNC,
            "args": [f"--repo={git_repo}", f"--ref={branch}", "--root=/repo", "--link=fleet", "--period=30s"],
            "securityContext": {**SECURE, "runAsUser": 65533},
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
            "volumeMounts": [{"name": "repo", "mountPath": "/repo"}, {"name": "tmp", "mountPath": "/tmp"}]}
    optional = {"optional": True}
    main = {"name": "reconciler", "image": image,
            "args": ["reconcile", "--repo", "/repo/fleet", "--format", "json", "--metrics-port", "9090",
                     "--metrics-address", "0.0.0.0"],   # Prometheus scrapes the pod's address
            "ports": [{"name": "metrics", "containerPort": 9090}],
            "env": [{"name": "KUBECONFIG", "value": "/etc/fleet/kubeconfig/config"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "HOME", "value": "/tmp"},
                    {"name": "PULUMI_BACKEND_URL", "valueFrom": {"secretKeyRef": {
                        "name": "fleet-pulumi", "key": "backend-url", **optional}}},
                    {"name": "PULUMI_CONFIG_PASSPHRASE", "valueFrom": {"secretKeyRef": {
                        "name": "fleet-pulumi", "key": "passphrase", **optional}}}],
            # the webhook URLs that policies/notifications.yaml's `webhook_env` names (notify/send.py)
            "envFrom": [{"secretRef": {"name": "fleet-notifications", **optional}}],
            "securityContext": {**SECURE, "runAsUser": 10001},
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
            "volumeMounts": [{"name": "repo", "mountPath": "/repo", "readOnly": True},
                             {"name": "kubeconfig", "mountPath": "/etc/fleet/kubeconfig", "readOnly": True},
                             {"name": "tmp", "mountPath": "/tmp"}]}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(NAME),
        "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                 "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
                 "template": {"metadata": {"labels": dict(LABELS)}, "spec": {
                     "serviceAccountName": NAME,
                     "securityContext": {"runAsNonRoot": True, "fsGroup": 10001,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [main, sync],
                     "volumes": [{"name": "repo", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}},
                                 {"name": "kubeconfig", "secret": {"secretName": "fleet-kubeconfig"}}]}}}}
    return [_namespace(), _service_account(), lease, binding, secret, deployment]


def managed(team_namespaces: list[str]) -> list[Obj]:
    kueue = "kueue.x-k8s.io"
    write = ["get", "list", "create", "update", "patch", "delete"]
    cluster_role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta(NAME, None),
                    "rules": [_rule([""], ["nodes"], ["list"]),
                              _rule([kueue], ["workloads"], ["list"]),
                              _rule(["jobset.x-k8s.io"], ["jobsets"], ["list"]),
                              _rule(["apps"], ["deployments"], ["list"]),                   # observe: services
                              _rule(["leaderworkerset.x-k8s.io"], ["leaderworkersets"], ["list"]),
                              _rule([""], ["pods"], ["list"]),                 # observe: where each workload runs
                              _rule(["ray.io"], ["rayjobs", "rayservices", "rayclusters"], ["list"]),   # issue 26
                              _rule([kueue], ["resourceflavors", "clusterqueues", "cohorts", "workloadpriorityclasses",
                                              "topologies", "admissionchecks", "provisioningrequestconfigs"], write),
                              _rule([""], ["namespaces"], ["get", "patch", "update"], sorted(team_namespaces)),
                              _rule([""], ["namespaces"], ["create"])]}
    out = [_namespace(), _service_account(), cluster_role, _binding("ClusterRole", NAME, None)]
    for ns in sorted(set(team_namespaces)):
        out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(NAME, ns),
                    "rules": [_rule(["jobset.x-k8s.io"], ["jobsets"], ["get", "create", "patch", "delete"]),
                              _rule(["apps"], ["deployments"], ["get", "create", "patch", "delete"]),
                              _rule(["leaderworkerset.x-k8s.io"], ["leaderworkersets"],
                                    ["get", "create", "patch", "delete"]),
                              _rule([""], ["services"], ["get", "list", "create", "patch", "delete"]),
                              _rule(["ray.io"], ["rayjobs", "rayservices"], ["get", "create", "patch", "delete"]),
                              _rule([kueue], ["localqueues"], write),
                              _rule(["events.k8s.io"], ["events"], ["create"])]})
        out.append(_binding("Role", NAME, ns))
    out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(f"{NAME}-completions"),
                "rules": [_rule([""], ["configmaps"], ["get", "patch"], [CONFIGMAP, SLURM_CONFIGMAP]),
                          _rule([""], ["configmaps"], ["create"])]})
    out.append(_binding("Role", f"{NAME}-completions", NAMESPACE))
    return out


def image_problem(image: str) -> str | None:
    """Why `image` cannot be the reconciler's image, or None: a valid reference (kube_rules), pinned by a tag
    or a digest (without one the runtime pulls whatever `latest` is at each restart)."""
    why = kube_image_problem(image)
    if why is not None:
        return why
    m = IMAGE_REFERENCE.match(image)
    if m is not None and not m.group("tag") and not m.group("digest"):
        return "names no tag or digest: each restart could pull another image"
    return None


_SCP_LIKE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*@[A-Za-z0-9][A-Za-z0-9.-]*:(?!-)[A-Za-z0-9._~/-]+$")
_URL_PATH = re.compile(r"^/[A-Za-z0-9._~/%-]+$")
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$")


def git_url_problem(url: str) -> str | None:
    """Why git-sync cannot (or must not) clone `url`, or None. Only `https://host[:port]/path`,
    `ssh://[user@]host[:port]/path` and `user@host:path`: no other transport (git's `ext::` runs a command,
    `file://` reads the pod's own disk, `http://` is unencrypted), no credentials in the URL (the manifest is
    committed), no whitespace or control characters."""
    if not url or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return "is empty or has whitespace or control characters"
    if _SCP_LIKE.match(url):
        return None
    from urllib.parse import urlsplit

    try:
        u = urlsplit(url)
        port = u.port
    except ValueError as e:
        return f"is not a URL ({e})"
    if u.scheme not in ("https", "ssh"):
        return (f"uses the `{u.scheme}` transport; git-sync clones only https:// or ssh:// URLs (or user@host:path)"
                if u.scheme
                else "is not a URL: give https://HOST/ORG/REPO.git or git@HOST:ORG/REPO.git")
    if u.password is not None or (u.scheme == "https" and u.username is not None):
        return "carries credentials: the manifest is committed; give git-sync its credentials through a Secret"
    if not u.hostname or not _HOST.match(u.hostname) or port == 0:
        return "names no valid host"
    if not _URL_PATH.match(u.path) or ".." in u.path.split("/") or u.query or u.fragment:
        return "has no plain repository path (like /org/fleet.git), or has a query or fragment"
    return None


def branch_problem(branch: str) -> str | None:
    """Why `branch` is no branch name git accepts (`git check-ref-format --branch`), or None."""
    bad = set(" ~^:?*[\\")
    if (not branch or branch.startswith(("-", "/", ".")) or branch.endswith(("/", ".", ".lock"))
            or any(c in bad or ord(c) < 32 or ord(c) == 127 for c in branch)
            or ".." in branch or "//" in branch or "@{" in branch or branch == "@"
            or any(part.startswith(".") or part.endswith(".lock") for part in branch.split("/"))):
        return "is not a valid git branch name (see `git check-ref-format --branch`)"
    return None


def manifests(v: Validated, image: str, git_repo: str, branch: str) -> dict[str, str]:
    """{file name: YAML} of the reconciler's deployment for the validated repository `v`."""
    teams = v.loaded.teams
    namespaces = [t.queue_namespace for t in teams.teams] if teams else []
    placement = v.loaded.placement
    lease = placement.reconcile.lease_cluster if placement is not None else None
    head = "# Written by `fleet reconcile-manifests`; regenerate after changing policies/teams.yaml.\n"
    where = (f"# Apply to the lease cluster `{lease}` (policies/placement.yaml reconcile.lease_cluster).\n" if lease
             else "# Set reconcile.lease_cluster in policies/placement.yaml first: without a Lease only\n"
                  "# `fleet reconcile --once` runs, and this Deployment would stop at its first cycle.\n")
    return {"management.yaml": head + where + dump_all(management(image, git_repo, branch)),
            "managed-cluster.yaml": head + "# Apply to every cluster of fleet/clusters/ (its admin credentials).\n"
                                    + dump_all(managed(namespaces))}
