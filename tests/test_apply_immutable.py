"""A JobSet's pods never change in place: the local API server refuses it as a real cluster does (kube_admission.py:
the JobSet webhook and the CRD's transition rules), and `fleet apply` never sends such a change (apply/immutable.py):
a running JobSet whose file changed its pods is kept as it runs, with no write; a queued one is re-created."""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kube_api import TOKEN, KubeCluster
from kube_objects import workload
from test_apply_live import _gpus, _runs_a, admit, fleet_cli, sent
from test_apply_live import fleet as fleet
from test_jobs_apply import JOBSETS, MANIFEST, kueue_admits, patches
from test_jobs_apply import api as api

from reconciler.apply import jobs

from builders import shared_file


def _images(cluster: KubeCluster, name: str) -> list[str]:
    js = cluster.objects["jobsets"][("vision", name)]
    return [c["image"] for rj in js["spec"]["replicatedJobs"]
            for c in rj["template"]["spec"]["template"]["spec"]["containers"]]


def _new_image(repo: Path, job: str = "a") -> None:
    path = repo / f"jobs/vision/{job}.yaml"
    path.write_text(path.read_text().replace("image: img:1", "image: img:2"))


def test_a_running_jobset_whose_file_changed_its_image_is_kept_as_it_runs_with_no_write(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str]) -> None:
    """`vision/a` runs (admitted) on onprem-sjc, its JobSet made before Fleet stamped `fleet.dev/pod-digest`, with
    a setting render does not write (drawn from a pod field), so the plan cannot tell what its pods run and keeps
    it (with the annotation, or a pod template Fleet reads back, the plan re-creates it, as test_apply_live.py and
    test_respec_unstamped.py show); its file now names image img:2. Before, apply sent the new pod template over
    the running JobSet ("updated (admitted: ...)"), which the JobSet webhook refuses on a real cluster (and,
    accepted, would change no running pod). Now it sends nothing to it, and its line says that it was kept as it
    runs and which field its file changed."""
    repo, cs = fleet
    sjc = cs["sjc"]
    _runs_a(repo, cs, capsys, 8)
    made_before = sjc.objects["jobsets"][("vision", "a")]
    del made_before["metadata"]["annotations"]["fleet.dev/pod-digest"]
    [c] = made_before["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    c["env"] = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    sjc.add(made_before)
    digest = sjc.objects["jobsets"][("vision", "a")]["metadata"]["annotations"]["fleet.dev/spec-digest"]
    _new_image(repo)
    before = len(sjc.requests)
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    assert {r.method for r in sjc.requests[before:]} == {"GET"}                  # no PATCH, PUT or DELETE
    assert ("onprem-sjc: JobSet vision/a: kept (it runs, and its job file changes what a JobSet cannot change while "
            "it exists (replicatedJobs[worker].template.spec.template.spec.containers[training].image): nothing sent"
            ) in out, out
    assert "jobs: 0 create, 0 update, 0 delete, 0 unchanged, 1 keep" in out
    live = sjc.objects["jobsets"][("vision", "a")]
    assert _images(sjc, "a") == ["img:1"] and live["spec"]["suspend"] is False
    assert live["metadata"]["annotations"]["fleet.dev/spec-digest"] == digest   # still names the spec it runs


def test_a_queued_jobset_whose_file_changed_its_image_is_deleted_and_created_again(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str]) -> None:
    """`vision/a` was created suspended and Kueue has not admitted it (its Workload is pending); its file now names
    image img:2. The webhook refuses that change even while suspended (only Kueue's pod template fields may
    change then), so before, apply's update failed on a real cluster (exit 1). Now its JobSet is deleted in the
    foreground, on the uid and resourceVersion read, and created again with img:2 once its dependents are gone;
    no pod of it ran, so nothing is lost, and no review is needed."""
    repo, cs = fleet
    sjc = cs["sjc"]
    (repo / "jobs/vision/train.yaml").unlink()
    (repo / "jobs/vision/a.yaml").write_text("name: a\nteam: vision\noptions:\n  - {accelerator: nvidia-h100-80gb, "
                                             "count: 8}\ncheckpoint_minutes: 30\nimage: img:1\n")
    assert fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")[0] == 0
    old = copy.deepcopy(sjc.objects["jobsets"][("vision", "a")])
    assert old["spec"]["suspend"] is True and _images(sjc, "a") == ["img:1"]
    wl = workload("vision", "a", "h100-owned", phase="queued", accel="gpu", per_pod=8)
    wl["metadata"]["ownerReferences"][0]["uid"] = old["metadata"]["uid"]        # Kueue's Workload, not admitted
    sjc.add(wl)
    sjc.graceful = True
    _new_image(repo)
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    [delete] = sent(sjc, "DELETE")
    assert delete.path.endswith("/namespaces/vision/jobsets/a")
    assert delete.body == {"propagationPolicy": "Foreground", "preconditions": {
        "uid": old["metadata"]["uid"], "resourceVersion": old["metadata"]["resourceVersion"]}}
    why = ("suspended (queued, or evicted by Kueue), and its job file changes what a JobSet cannot change while it "
           "exists (replicatedJobs[worker].template.spec.template.spec.containers[training].image): deleted in the "
           "foreground and created again (no pod of it runs)")
    assert f"onprem-sjc: JobSet vision/a: not yet ({why}; it is still being deleted" in out, out
    assert len(sent(sjc, "PATCH")) == 1                                         # only the first create
    sjc.finish_deletions()
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    assert "onprem-sjc: JobSet vision/a: created (new: created suspended, Kueue admits it)" in out
    new = sjc.objects["jobsets"][("vision", "a")]
    assert _images(sjc, "a") == ["img:2"] and new["spec"]["suspend"] is True
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["metadata"]["annotations"]["fleet.dev/spec-digest"] != old["metadata"]["annotations"][
        "fleet.dev/spec-digest"]
    sjc.graceful = False                                      # and at once where nothing keeps the old copy
    path = repo / "jobs/vision/a.yaml"
    path.write_text(path.read_text().replace("image: img:2", "image: img:3"))
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    assert f"onprem-sjc: JobSet vision/a: created ({why}; new: created suspended, Kueue admits it)" in out
    assert _images(sjc, "a") == ["img:3"] and len(sent(sjc, "DELETE")) == 2
    admit(sjc, "a", replicas=1)
    assert _gpus(sjc, "a") == ["8"]


def _request(cluster: KubeCluster, method: str, path: str, body: dict[str, Any],
             manager: str = "someone") -> tuple[int, dict[str, Any]]:
    """One raw request to the local API server (an apply forced, as `kubectl apply --force-conflicts`):
    (status, decoded body)."""
    query = f"?fieldManager={manager}&force=true" if method == "PATCH" else ""      # past conflicts: to admission
    ctype = "application/apply-patch+yaml" if method == "PATCH" else "application/json"
    req = urllib.request.Request(cluster.url + path + query, data=json.dumps(body).encode(), method=method,
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _pod(js: dict[str, Any]) -> dict[str, Any]:
    return js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def test_the_local_api_server_refuses_what_the_jobset_webhook_and_crd_refuse(
        api: tuple[KubeCluster, jobs.ClusterClient]) -> None:
    """kube_api answered every update with 200, so no test could see a refused one. Now, as a real cluster: a
    running JobSet's pod template (its image, even Kueue's node selector) is 403 from the webhook; a suspended
    one takes Kueue's fields (node selector, tolerations, pod labels and annotations) but not an image; a
    failure policy is 422 from the CRD's rule once set; nothing refused is stored."""
    shared_file("schemas/jobset/jobset.x-k8s.io_jobsets.yaml")
    cluster, client = api
    assert jobs.apply_job(client, MANIFEST).action == "create"
    stored = cluster.objects["jobsets"][("vision", "train")]
    queued = copy.deepcopy(stored)
    pod = _pod(queued)
    pod["spec"]["nodeSelector"]["cloud.google.com/gke-nodepool"] = "h100-s0"
    pod["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    pod["metadata"]["annotations"] = {"kueue.x-k8s.io/podset": "worker"}
    status, _ = _request(cluster, "PUT", JOBSETS, queued)
    assert status == 200                                                         # Kueue's fields, while suspended
    image = copy.deepcopy(cluster.objects["jobsets"][("vision", "train")])
    _pod(image)["spec"]["containers"][0]["image"] = "img:2"
    status, body = _request(cluster, "PUT", JOBSETS, image)
    assert (status, body["reason"], body["code"]) == (403, "Forbidden", 403)
    assert body["message"].startswith('admission webhook "vjobset.kb.io" denied the request: spec.replicatedJobs: '
                                      'Invalid value: []v1alpha2.ReplicatedJob{v1alpha2.ReplicatedJob{Name:"worker"')
    assert body["message"].endswith(": field is immutable")
    kueue_admits(cluster, client)                                                # now it runs
    change = {"apiVersion": MANIFEST["apiVersion"], "kind": "JobSet", "metadata": {"name": "train",
              "namespace": "vision"}, "spec": {"replicatedJobs": [{"name": "worker", "template": {"spec": {
                  "template": {"spec": {"containers": [{"name": MANIFEST["spec"]["replicatedJobs"][0]["template"][
                      "spec"]["template"]["spec"]["containers"][0]["name"], "image": "img:2"}]}}}}}]}}
    status, body = _request(cluster, "PATCH", JOBSETS, change)
    assert status == 403 and "spec.replicatedJobs: Invalid value" in body["message"]
    selector = copy.deepcopy(change)
    selector["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"] = {"nodeSelector": {"x": "y"}}
    status, body = _request(cluster, "PATCH", JOBSETS, selector)
    assert status == 403                                                         # not while it runs
    policy = {**change, "spec": {"failurePolicy": {"maxRestarts": 7}}}
    status, body = _request(cluster, "PATCH", JOBSETS, policy)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == ('JobSet.jobset.x-k8s.io "train" is invalid: spec.failurePolicy: Invalid value: '
                               '"object": Value is immutable')
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec.failurePolicy",
                                          "message": 'Invalid value: "object": Value is immutable'}]
    live = cluster.objects["jobsets"][("vision", "train")]
    assert _pod(live)["spec"]["containers"][0]["image"] != "img:2" and live["spec"]["failurePolicy"]["maxRestarts"] == 3
    assert "x" not in _pod(live)["spec"]["nodeSelector"]
    assert [m["manager"] for m in live["metadata"]["managedFields"]] == ["fleet", "kueue"]   # no "someone"
    relabel = {k: v for k, v in change.items() if k != "spec"}
    status, _ = _request(cluster, "PATCH", JOBSETS, {**relabel, "metadata": {**change["metadata"],
                                                                              "labels": {"team-note": "x"}}})
    assert status == 200                                                         # metadata changes freely


def test_apply_keeps_a_running_jobset_and_updates_a_queued_one_in_kueues_fields(
        api: tuple[KubeCluster, jobs.ClusterClient]) -> None:
    """At the level of `jobs.apply_job`: a queued JobSet whose rendered pod template changed only in a field Kueue
    may change while it is suspended (its pod labels) is updated in place, as the webhook allows; once it runs,
    a changed image is `keep` with no request but the read."""
    shared_file("schemas/jobset/jobset.x-k8s.io_jobsets.yaml")
    cluster, client = api
    assert jobs.apply_job(client, MANIFEST).action == "create"
    relabelled = copy.deepcopy(MANIFEST)
    _pod(relabelled)["metadata"]["labels"]["fleet.dev/note"] = "x"
    result = jobs.apply_job(client, relabelled)
    assert (result.action, result.ok) == ("update", True), result.line()
    assert _pod(cluster.objects["jobsets"][("vision", "train")])["metadata"]["labels"]["fleet.dev/note"] == "x"
    kueue_admits(cluster, client)
    changed = copy.deepcopy(relabelled)
    _pod(changed)["spec"]["containers"][0]["image"] = "img:2"
    before = len(cluster.requests)
    result = jobs.apply_job(client, changed)
    assert result.action == "keep" and "containers[" in result.reason and ".image)" in result.reason
    assert [r.method for r in cluster.requests[before:]] == ["GET"] and len(patches(cluster)) == 3
