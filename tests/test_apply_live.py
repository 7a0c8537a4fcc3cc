"""`fleet apply` end to end against two local Kubernetes API servers (kube_api): jobs by server-side apply after
the stacks (a stand-in Pulumi engine: the stacks are tested in test_apply.py), what runs is kept, the reviewed
plan bounds what stops or moves, and a rerun converges."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kube_api import KubeCluster, clusters, write_kubeconfig
from kube_objects import job_objects, serving, ts, workload

from reconciler.apply.engine import PulumiEngine
from reconciler.apply.pool_guard import Preview
from reconciler.apply.record import LAST_APPLIED
from reconciler.cli import main

from builders import GKE, ONPREM, base_files


class Stacks:
    """Pulumi's stand-in: every stack applies and is the same (what is tested here is what comes after)."""

    calls: ClassVar[list[str]] = []

    def preview(self, spec: Mapping[str, Any]) -> dict[str, int]:
        self.calls.append(f"preview {spec['stack']}")
        return {"same": 1}

    def up(self, spec: Mapping[str, Any]) -> dict[str, int]:
        self.calls.append(f"up {spec['stack']}")
        return {"same": 1}

    def preview_steps(self, spec: Mapping[str, Any]) -> Preview:
        return Preview(self.preview(spec))


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, dict[str, KubeCluster]]]:
    """A Fleet repository whose two clusters name kubeconfig contexts of two local API servers."""
    repo = tmp_path / "repo"
    files = base_files()
    files["fleet/clusters/gke-usc1.yaml"] = GKE.replace("kubernetes: {cluster: ml-usc1}",
                                                        "kubernetes: {cluster: ml-usc1, context: ctx-gke}").encode()
    files["fleet/clusters/onprem-sjc.yaml"] = ONPREM.replace(
        "kubernetes: {cluster: sjc-1}", "kubernetes: {cluster: sjc-1, context: ctx-sjc}").encode()
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "pulumi").write_text("#!/bin/sh\nexit 1\n")
    (bindir / "pulumi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")
    for name in ("CI", "GITHUB_ACTIONS", "PULUMI_BACKEND_URL"):
        monkeypatch.delenv(name, raising=False)
    Stacks.calls = []
    monkeypatch.setattr(PulumiEngine, "for_repo", classmethod(lambda cls, repo, on_output: Stacks()))
    with clusters("gke", "sjc") as cs:
        kc = write_kubeconfig(tmp_path / "kc", {"ctx-gke": cs["gke"].url, "ctx-sjc": cs["sjc"].url})
        monkeypatch.setenv("KUBECONFIG", str(kc))
        yield repo, cs


def fleet_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main([*args])
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out, out.err


def sent(cluster: KubeCluster, method: str) -> list[Any]:
    return [r for r in cluster.requests if r.method == method]


def admit(cluster: KubeCluster, name: str = "train", namespace: str = "vision", *, per_pod: int = 8,
          replicas: int = 2) -> None:
    """Kueue admits the JobSet: unsuspends it (taking spec.suspend over, as its Update does)."""
    key = ("jobsets", (namespace, name))
    live = cluster.objects[key[0]][key[1]]
    live["spec"]["suspend"] = False
    owners = cluster.owners["jobsets"][key[1]]
    owners[("f:spec", "f:suspend")] = ["kueue"]
    live["metadata"]["managedFields"].append({"manager": "kueue", "operation": "Update", "fieldsType": "FieldsV1",
                                              "fieldsV1": {"f:spec": {"f:suspend": {}}}})
    for mf in live["metadata"]["managedFields"]:
        if mf["manager"] == "fleet":
            mf["fieldsV1"]["f:spec"].pop("f:suspend", None)
    wl = workload("vision", name, "h100-owned", phase="running", accel="gpu", per_pod=per_pod, replicas=replicas)
    wl["metadata"]["ownerReferences"][0]["uid"] = live["metadata"]["uid"]       # Kueue names the JobSet's uid
    cluster.add(live, wl)


def test_apply_creates_every_clusters_jobs_suspended_records_the_plan_and_converges(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str]) -> None:
    repo, cs = fleet
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    assert Stacks.calls == ["preview gke-usc1-infra", "preview onprem-sjc-infra",   # no pool replaced: go on
                            "up gke-usc1-infra", "up onprem-sjc-infra", "up gke-usc1-kueue", "up onprem-sjc-kueue"]
    [create] = sent(cs["sjc"], "PATCH")
    assert create.query == {"fieldManager": "fleet"} and create.body["spec"]["suspend"] is True
    assert "onprem-sjc: JobSet vision/train: created (new: created suspended, Kueue admits it)" in out
    assert json.loads((repo / LAST_APPLIED).read_text())["placements"][0]["job"] == "vision/train"
    admit(cs["sjc"])
    before = len(cs["sjc"].requests)
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    assert "onprem-sjc: JobSet vision/train: unchanged" in out
    assert {r.method for r in cs["sjc"].requests[before:]} == {"GET"}       # converged: nothing sent
    assert cs["sjc"].objects["jobsets"][("vision", "train")]["spec"]["suspend"] is False


def _budget_cut(repo: Path) -> None:
    teams = repo / "policies/teams.yaml"
    teams.write_text(teams.read_text().replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 1"))


def test_a_running_job_is_kept_after_a_budget_cut(fleet: tuple[Path, dict[str, KubeCluster]],
                                                  capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo, cs = fleet
    assert fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")[0] == 0
    admit(cs["sjc"])
    _budget_cut(repo)
    pr = tmp_path / "pr"      # the pull request's plan (from git alone) leaves the job pending
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--format", "json", "--out", str(pr))[0] == 0
    assert json.loads((pr / "plan.json").read_text())["placements"] == []
    for record in (True, False):          # with the last applied plan, and from a fresh checkout without it
        if not record:
            (repo / LAST_APPLIED).unlink()
        code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed", str(pr / "plan.json"))
        assert code == 0, out + err
        assert "onprem-sjc: JobSet vision/train: unchanged" in out
        assert not sent(cs["sjc"], "DELETE") and not sent(cs["gke"], "DELETE")
        assert cs["sjc"].objects["jobsets"][("vision", "train")]["spec"]["suspend"] is False


def test_a_move_deletes_the_old_copy_only_because_the_reviewed_plan_says_so(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo, cs = fleet
    cs["gke"].add(*job_objects("vision", "train", "v5p-4x4x4", phase="running"))   # where an older plan put it
    job = repo / "jobs/vision/train.yaml"          # its file now asks for GPUs only: it cannot stay on the TPUs
    job.write_text(job.read_text().replace("  - accelerator: tpu-v5p\n    topology: 4x4x4\n    slices: 2\n", ""))
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--format", "json", "--out", str(tmp_path / "pr"))[0] == 0
    reviewed = json.loads((tmp_path / "pr/plan.json").read_text())
    # a reviewed plan that kept the job where it runs: this apply's move goes beyond it
    stale = {**reviewed, "placements": [{**p, "cluster": "gke-usc1", "pool": "v5p-4x4x4"}
                                        for p in reviewed["placements"]]}
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    stale_file = str(tmp_path / "stale.json")
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed", stale_file)
    assert code == 1
    assert ("beyond the reviewed plan: vision/train (running on gke-usc1): moved to onprem-sjc/h100-owned by the "
            "plan") in err
    assert not sent(cs["gke"], "DELETE") and not sent(cs["sjc"], "PATCH") and not Stacks.calls
    pr_file = str(tmp_path / "pr/plan.json")
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed", pr_file)
    assert code == 0, out + err
    [delete] = sent(cs["gke"], "DELETE")
    assert delete.path.endswith("/namespaces/vision/jobsets/train")
    assert delete.body == {"propagationPolicy": "Foreground",      # the new copy waits for the old one's pods
                           "preconditions": {"uid": "uid-vision-train"}}    # the JobSet observed, no other
    assert "gke-usc1: JobSet vision/train: deleted (moved to onprem-sjc/h100-owned by the plan)" in out
    assert sent(cs["sjc"], "PATCH")[0].body["spec"]["suspend"] is True


def test_preview_sends_nothing_and_an_unreachable_cluster_is_a_located_failure(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str]) -> None:
    repo, cs = fleet
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--preview")
    assert code == 0, out + err
    assert "onprem-sjc: JobSet vision/train: would create (new: created suspended, Kueue admits it)" in out
    assert {r.method for c in cs.values() for r in c.requests} == {"GET"}
    cs["sjc"].refuse()
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 1
    assert "onprem-sjc: JobSet */*: FAILED: not applied: the cluster is unreachable (cluster `onprem-sjc` " \
           "(context `ctx-sjc`" in out
    assert "hint: check the context's server URL" in out
    assert not (repo / LAST_APPLIED).exists()


def test_a_bad_reviewed_plan_is_a_located_error(fleet: tuple[Path, dict[str, KubeCluster]],
                                                capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo, _ = fleet
    (tmp_path / "bad.json").write_text('{"version": 1,\n "placements": [}')
    code, _, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed", str(tmp_path / "bad.json"))
    assert code == 1 and f"{tmp_path / 'bad.json'}:2:17: the reviewed plan is not JSON" in err
    assert "hint: pass the plan.json" in err


def test_the_drift_check_looks_at_stacks_only(fleet: tuple[Path, dict[str, KubeCluster]],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """drift.yml's `fleet apply --preview --fail-on-changes`: running jobs are in no stack, so it neither
    observes the clusters nor previews jobs, and a running JobSet is no drift."""
    repo, cs = fleet
    cs["sjc"].add(*job_objects("vision", "train", "h100-owned", phase="running"))
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--preview", "--fail-on-changes")
    assert code == 0, out + err
    assert Stacks.calls == ["preview gke-usc1-infra", "preview onprem-sjc-infra", "preview gke-usc1-kueue",
                            "preview onprem-sjc-kueue"]
    assert not cs["sjc"].requests and not cs["gke"].requests and "JobSet" not in out


CHAT = ("name: chat\nteam: vision\npriority: production\nkind: inference\noptions:\n"
        "  - {accelerator: nvidia-h100-80gb, count: 1}\nreplicas: 1\nimage: img:1\nport: 8080\n")


def test_a_services_objects_on_pools_the_plan_left_go_by_their_labels_after_the_new_ones(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An older plan spread `vision/chat` over two pools of a cluster (`chat-<pool>` each); this one keeps it on
    one pool there (render: one Deployment `chat`). Apply finds the old objects by their job and pool labels
    in the snapshot, applies `chat` first, then deletes them; the pool it left is a move a reviewed plan must
    show, the renamed object on the kept pool is not."""
    repo, cs = fleet
    (repo / "jobs/vision/chat.yaml").write_text(CHAT)
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--format", "json", "--out", str(tmp_path / "pr"))[0] == 0
    [p] = [p for p in json.loads((tmp_path / "pr/plan.json").read_text())["placements"] if p["job"] == "vision/chat"]
    where = cs["gke" if p["cluster"] == "gke-usc1" else "sjc"]
    other = serving("vision", "other", "h100-old", name="other")
    del other["metadata"]["labels"]["fleet.dev/job"]                       # not Fleet's: never touched
    where.add(serving("vision", "chat", p["pool"], name=f"chat-{p['pool']}"),
              serving("vision", "chat", "h100-old", name="chat-h100-old"), other)
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 1 and "vision/chat (running on" in err and "moved to" in err and f"chat-{p['pool']}" not in err
    assert not sent(where, "DELETE")
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    assert sorted(n for _, n in where.objects["deployments"]) == ["chat", "other"]
    writes = [(r.method, r.path.rsplit("/", 1)[-1]) for r in where.requests if r.method in ("PATCH", "DELETE")
              and "/deployments/" in r.path]
    assert writes[0] == ("PATCH", "chat")                                  # the new copy first
    assert sorted(writes[1:]) == sorted([("DELETE", f"chat-{p['pool']}"), ("DELETE", "chat-h100-old")])
    assert f"Deployment vision/chat-h100-old: deleted (moved to {p['cluster']}/{p['pool']} by the plan)" in out


def _git(repo: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_the_reviewed_plan_must_name_the_commit_and_pull_request_applied(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A plan saved on one commit is refused on the next one (exit 1, both commits named, nothing sent); a plan
    made for pull request #7's head is refused for #8 and for another head, and taken for #7's."""
    repo, cs = fleet
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    first = _git(repo, "rev-parse", "HEAD")
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--base", "HEAD", "--format", "json",
                     "--out", str(tmp_path / "pr"))[0] == 0
    plan_file = str(tmp_path / "pr/plan.json")
    assert json.loads((tmp_path / "pr/plan.json").read_text())["review"] == {"base": first, "head": first, "pr": None}
    _budget_cut(repo)
    _git(repo, "commit", "-q", "-am", "two")
    second = _git(repo, "rev-parse", "HEAD")
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed", plan_file)
    assert code == 1
    assert (f"{plan_file}: field `review.head`: refusing to apply: the reviewed plan was made for commit {first}, "
            f"but this apply applies commit {second} (the repository's HEAD)") in err
    assert "hint: apply the plan the pull request" in err and "Traceback" not in err
    assert not Stacks.calls and not [r for c in cs.values() for r in c.requests]
    # made in CI for pull request #7 at head H (CI checks out a merge commit, so the head is given)
    h = "ab" * 20
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--format", "json", "--head-commit", h, "--pr", "7",
                     "--out", str(tmp_path / "pr7"))[0] == 0
    pr7 = str(tmp_path / "pr7/plan.json")
    code, _, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed", pr7,
                             "--head-commit", h, "--pr", "8")
    assert code == 1 and "field `review.pr`: refusing to apply: the reviewed plan was made for pull request #7" in err
    assert "this apply applies pull request #8" in err
    code, _, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed", pr7,
                             "--head-commit", "cd" * 20, "--pr", "7")
    assert code == 1 and f"made for commit {h}, but this apply applies commit {'cd' * 20} (--head-commit)" in err
    assert not Stacks.calls
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed", pr7,
                               "--head-commit", h.upper(), "--pr", "7")
    assert code == 0, out + err
    # a plan that names no commit (hand-made, or from before plans named one) is refused in a git repository
    doc = json.loads((tmp_path / "pr7/plan.json").read_text())
    del doc["review"]
    (tmp_path / "bare.json").write_text(json.dumps(doc))
    code, _, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed", str(tmp_path / "bare.json"))
    assert code == 1 and "made for no commit (it has no `review.head`)" in err
    code, _, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed", pr7, "--head-commit", "xyz")
    assert code == 2 and "is not a full commit sha" in err


def _gpu_job(name: str) -> str:
    return (f"name: {name}\nteam: vision\noptions:\n  - {{accelerator: nvidia-h100-80gb, count: 8}}\n"
            f"checkpoint_minutes: 30\nimage: img:1\n")


def _running(cluster: KubeCluster, job: str, pool: str, units: str, accel: str) -> None:
    """`vision/<job>` runs on `pool`, its JobSet annotated with the units the plan that rendered it gave it."""
    objs = job_objects("vision", job, pool, phase="running", accel=accel)
    objs[0]["metadata"]["annotations"] = {"fleet.dev/units": units}
    cluster.add(*objs)


def test_renumbered_gpu_nodes_are_no_move_a_reviewed_plan_must_show(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Issue 20 item 5: j1..j3 run on nodes 1..3 of onprem-sjc/h100-owned; j0 (node 0) finished and its file is
    removed. The plan renumbers the GPU nodes 0..2 (interchangeable nodes of one group): no job moves, so the
    pull request's plan is accepted and nothing running is deleted."""
    repo, cs = fleet
    (repo / "jobs/vision/train.yaml").unlink()
    for i in (1, 2, 3):
        (repo / f"jobs/vision/j{i}.yaml").write_text(_gpu_job(f"j{i}"))
        _running(cs["sjc"], f"j{i}", "h100-owned", str(i), "gpu")
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--format", "json", "--out", str(tmp_path / "pr"))[0] == 0
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    assert not sent(cs["sjc"], "DELETE") and "reviewed:" not in out
    applied = json.loads((repo / LAST_APPLIED).read_text())["placements"]
    assert sorted(p["units"][0] for p in applied) == [0, 1, 2]           # renumbered, yet all kept
    assert {p["status"] for p in applied} == {"kept"}


def test_a_tpu_job_given_other_slices_moves_only_as_reviewed(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A TPU slice is physical capacity, not an interchangeable unit: train runs on slices 2 and 3 of
    gke-usc1/v5p-4x4x4, whose max falls to 2, so the plan gives it slices 0 and 1 of the same pool. That is a
    move: refused against a reviewed plan that kept it where it runs, applied (the old copy deleted in the
    foreground) with the pull request's plan."""
    repo, cs = fleet
    job = repo / "jobs/vision/train.yaml"
    gpus = "  - accelerator: nvidia-h100-80gb\n    count: 16\n    relative_speed: 0.5\n"
    job.write_text(job.read_text().replace(gpus, ""))                       # TPU slices only
    gke = repo / "fleet/clusters/gke-usc1.yaml"
    gke.write_text(gke.read_text().replace("topology: 4x4x4\n    max: 4", "topology: 4x4x4\n    max: 2"))
    _running(cs["gke"], "train", "v5p-4x4x4", "2,3", "tpu")
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--format", "json", "--out", str(tmp_path / "pr"))[0] == 0
    reviewed = json.loads((tmp_path / "pr/plan.json").read_text())
    assert [(p["pool"], p["units"]) for p in reviewed["placements"]] == [("v5p-4x4x4", [0, 1])]
    stale = {**reviewed, "placements": [{**p, "units": [2, 3]} for p in reviewed["placements"]]}
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "stale.json"))
    assert code == 1
    assert ("beyond the reviewed plan: vision/train (running on gke-usc1): moved to slice(s) 0, 1 of "
            "gke-usc1/v5p-4x4x4 by the plan (it runs on slice(s) 2, 3)") in err
    assert not sent(cs["gke"], "DELETE") and not sent(cs["gke"], "PATCH")
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    [delete] = sent(cs["gke"], "DELETE")
    assert delete.path.endswith("/namespaces/vision/jobsets/train")
    assert delete.body == {"propagationPolicy": "Foreground", "preconditions": {"uid": "uid-vision-train"}}


def _gpus(cluster: KubeCluster, name: str) -> list[str]:
    """The GPUs each pod of the JobSet `vision/<name>` asks for, as stored."""
    js = cluster.objects["jobsets"][("vision", name)]
    return [str(c["resources"]["limits"]["nvidia.com/gpu"]) for rj in js["spec"]["replicatedJobs"]
            for c in rj["template"]["spec"]["template"]["spec"]["containers"]]


def _runs_a(repo: Path, cs: dict[str, KubeCluster], capsys: pytest.CaptureFixture[str], count: int) -> None:
    """`vision/a` (train's file removed) applied with `count` GPUs on one node of onprem-sjc/h100-owned, and
    admitted there by Kueue: its JobSet carries the spec digest and units render stamps."""
    (repo / "jobs/vision/train.yaml").unlink()
    (repo / "jobs/vision/a.yaml").write_text(_gpu_job("a").replace("count: 8", f"count: {count}"))
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    admit(cs["sjc"], "a", per_pod=count, replicas=1)
    assert _gpus(cs["sjc"], "a") == [str(count)]


def _plan_what_runs(repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The pull request's plan, from what runs (`fleet observe --out`, then `fleet plan --observed`): tmp/pr."""
    snap = str(tmp_path / "snapshot.json")
    assert fleet_cli(capsys, "observe", "--repo", str(repo), "--format", "json", "--out", snap)[0] == 0
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--observed", snap, "--format", "json", "--out",
                     str(tmp_path / "pr"))[0] == 0


def test_a_gang_whose_file_changed_its_size_on_its_node_is_re_created_there_as_reviewed(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`vision/a` runs 8 H100s on one node of onprem-sjc/h100-owned; its file now asks 4. The plan re-places it
    on the same node (`moved`, "the job's shape changed", units (0,)). Before, apply compared units only, saw no
    move (a review that kept it passed), and sent the new spec over the running JobSet by server-side apply (the
    reconcile loop's case of 2d0b78b). Now a copy that runs an earlier spec of its file (`fleet.dev/spec-digest`)
    where the plan moves it onto its own units is deleted in the foreground and created again at 4, only as
    reviewed; the copy at 4 then gets no write."""
    repo, cs = fleet
    sjc = cs["sjc"]
    _runs_a(repo, cs, capsys, 8)
    job = repo / "jobs/vision/a.yaml"
    job.write_text(job.read_text().replace("count: 8", "count: 4"))
    _plan_what_runs(repo, capsys, tmp_path)
    reviewed = json.loads((tmp_path / "pr/plan.json").read_text())
    [p] = reviewed["placements"]
    assert (p["cluster"], p["pool"], p["units"], p["status"], p["reason"]) == (
        "onprem-sjc", "h100-owned", [0], "moved", "the job's shape changed")
    stale = {**reviewed, "placements": [{**p, "status": "kept", "reason": ""}]}      # a review that kept it
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    before = len(sjc.requests)
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "stale.json"))
    assert code == 1
    why = ("moved by the plan: the job's shape changed (re-created on unit(s) 0 of onprem-sjc/h100-owned, where it "
           "runs an earlier spec of its file)")
    assert f"beyond the reviewed plan: vision/a (running on onprem-sjc): {why}" in err
    assert {r.method for r in sjc.requests[before:]} <= {"GET"}
    uid = sjc.objects["jobsets"][("vision", "a")]["metadata"]["uid"]
    sjc.graceful = True                                 # its pods take their time to go, as in a real cluster
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    [delete] = sent(sjc, "DELETE")
    assert delete.path.endswith("/namespaces/vision/jobsets/a")
    assert delete.body == {"propagationPolicy": "Foreground", "preconditions": {"uid": uid}}   # the one observed
    assert f"reviewed: vision/a (running on onprem-sjc): {why}" in out
    assert f"onprem-sjc: JobSet vision/a: deleted ({why})" in out
    assert "onprem-sjc: JobSet vision/a: not yet" in out and _gpus(sjc, "a") == ["8"]   # its pods still go
    sjc.finish_deletions()
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    assert "onprem-sjc: JobSet vision/a: created" in out and _gpus(sjc, "a") == ["4"]
    assert sjc.objects["jobsets"][("vision", "a")]["metadata"]["annotations"]["fleet.dev/units"] == "0"
    admit(sjc, "a", per_pod=4, replicas=1)
    before = len(sjc.requests)
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    assert "onprem-sjc: JobSet vision/a: unchanged" in out
    assert {r.method for r in sjc.requests[before:]} == {"GET"}                    # it runs the plan: no write


def test_a_gang_that_runs_its_files_spec_on_its_units_gets_no_write(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The other side of the rule above: `vision/a` runs the spec its file has (4 GPUs on node 0 of
    onprem-sjc/h100-owned). The pull request's plan keeps it there, and apply with it neither deletes nor
    writes anything: a copy is re-created only when it runs an earlier spec of its file."""
    repo, cs = fleet
    sjc = cs["sjc"]
    _runs_a(repo, cs, capsys, 4)
    _plan_what_runs(repo, capsys, tmp_path)
    [p] = json.loads((tmp_path / "pr/plan.json").read_text())["placements"]
    assert (p["cluster"], p["pool"], p["units"], p["status"]) == ("onprem-sjc", "h100-owned", [0], "kept")
    before = len(sjc.requests)
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    assert "onprem-sjc: JobSet vision/a: unchanged" in out and "reviewed:" not in out
    assert {r.method for r in sjc.requests[before:]} == {"GET"} and not sent(cs["gke"], "DELETE")
    assert _gpus(sjc, "a") == ["4"]


def test_a_running_gang_whose_changed_file_no_pool_can_hold_is_deleted_as_reviewed(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`vision/a` runs 8 H100s on onprem-sjc (region sjc); its file now requires data region eu-west4, where no
    pool has room. The pull request's plan leaves it pending ("was running, but ... outside the job's
    data_region") and its comment says it stops. Before, apply kept the JobSet running (only a preemption, a move
    or a removed file deleted one), as the loop did. Now the copy of the earlier spec is deleted, saying why, as
    the loop stops it (plan.types.changed_away); the job waits as its file is now."""
    repo, cs = fleet
    sjc = cs["sjc"]
    _runs_a(repo, cs, capsys, 8)
    job = repo / "jobs/vision/a.yaml"
    job.write_text(job.read_text() + "data_region: eu-west4\ndata_residency: required\n")
    _plan_what_runs(repo, capsys, tmp_path)
    reviewed = json.loads((tmp_path / "pr/plan.json").read_text())
    assert reviewed["placements"] == [] and [q["job"] for q in reviewed["pending"]] == ["vision/a"]
    uid = sjc.objects["jobsets"][("vision", "a")]["metadata"]["uid"]
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    [delete] = sent(sjc, "DELETE")
    assert delete.path.endswith("/namespaces/vision/jobsets/a") and delete.body["preconditions"] == {"uid": uid}
    assert "onprem-sjc: JobSet vision/a: deleted (jobs/vision/a.yaml changed (spec digest " in out
    assert "outside the job's data_region eu-west4 (data_residency: required); it waits as its file is now" in out
    assert ("vision", "a") not in sjc.objects["jobsets"]


def test_a_running_gang_whose_file_changed_its_image_is_re_created_with_it_as_reviewed(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`vision/a` runs img:1 on onprem-sjc; its file now says img:2. JobSet's webhook refuses a change of a
    JobSet's `spec.replicatedJobs`, so the running copy cannot take it. Before, the plan kept the job and apply
    sent the new spec over the running JobSet ("updated": refused by a real API server, and its pods would not
    change anyway). Now the pull request's plan re-creates it where it runs (`moved`, "its file changed what its
    pods run"), and apply with that review deletes the JobSet and creates it again with img:2."""
    repo, cs = fleet
    sjc = cs["sjc"]
    _runs_a(repo, cs, capsys, 8)
    job = repo / "jobs/vision/a.yaml"
    job.write_text(job.read_text().replace("image: img:1", "image: img:2"))
    _plan_what_runs(repo, capsys, tmp_path)
    [p] = json.loads((tmp_path / "pr/plan.json").read_text())["placements"]
    assert (p["cluster"], p["pool"], p["units"], p["status"]) == ("onprem-sjc", "h100-owned", [0], "moved")
    assert p["reason"].startswith("its file changed what its pods run, which a running JobSet cannot take")
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--preview", "--stack", "onprem-sjc-jobs",
                               "--reviewed", str(tmp_path / "pr/plan.json"))
    assert code == 0 and "JobSet vision/a: kept" not in out, out + err    # the preview says what apply does
    assert "jobs: 1 would create, 0 would update, 1 would delete" in out
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    [delete] = sent(sjc, "DELETE")
    assert delete.path.endswith("/namespaces/vision/jobsets/a")
    assert "onprem-sjc: JobSet vision/a: deleted (moved by the plan: its file changed what its pods run" in out
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    images = [c["image"] for rj in sjc.objects["jobsets"][("vision", "a")]["spec"]["replicatedJobs"]
              for c in rj["template"]["spec"]["template"]["spec"]["containers"]]
    assert images == ["img:2"]


def test_a_victim_held_to_its_checkpoint_is_left_running_and_its_preemptor_uncreated_by_apply(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`vision/a` (research, 30-minute checkpoints) runs on node 0 of onprem-sjc/h100-owned since minute 12;
    `vision/p` (production, 32 GPUs) needs the whole pool. Observed at minute 52, a's next checkpoint is in 20
    minutes: the reviewed plan preempts it then ("it keeps running until its next checkpoint in 20 min, its units
    reserved for vision/p"), as the reconcile loop does. Before, apply deleted a's JobSet at once (losing the 10
    minutes since its checkpoint that the plan said it kept) and created p's; now it leaves both to the loop and
    says so."""
    repo, cs = fleet
    sjc = cs["sjc"]
    _runs_a(repo, cs, capsys, 8)
    gke = repo / "fleet/clusters/gke-usc1.yaml"           # no other H100s: p needs a's node
    gke.write_text(gke.read_text().split("  - name: h100\n")[0])
    (repo / "jobs/vision/p.yaml").write_text(_gpu_job("p").replace("count: 8", "count: 32")
                                            + "priority: production\nduration_hours: 2\n")
    snap = tmp_path / "snapshot.json"
    assert fleet_cli(capsys, "observe", "--repo", str(repo), "--format", "json", "--out", str(snap))[0] == 0
    doc = json.loads(snap.read_text())
    doc["observed_at"] = ts(52).replace("Z", "+00:00")
    snap.write_text(json.dumps(doc))
    code, out, err = fleet_cli(capsys, "plan", "--repo", str(repo), "--observed", str(snap), "--format", "json",
                               "--out", str(tmp_path / "pr"))
    assert code == 0, out + err
    [pre] = json.loads((tmp_path / "pr/plan.json").read_text())["preemptions"]
    assert (pre["job"], pre["by"], pre["after_minutes"]) == ("vision/a", "vision/p", 20.0)
    before = len(sjc.requests)
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--observed", str(snap), "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    assert not sent(sjc, "DELETE") and ("vision", "p") not in sjc.objects["jobsets"]
    assert [r.method for r in sjc.requests[before:] if r.method not in ("GET",)] == []
    assert ("onprem-sjc: JobSet vision/a: not yet (vision/a keeps running until its next checkpoint in 20 min, then "
            "it is stopped for vision/p (checkpoint-aware preemption); the reconcile loop stops it then)") in out
    assert ("onprem-sjc: JobSet vision/p: not yet (vision/p starts once vision/a reached its checkpoint, in 20 min "
            "(its units are reserved for it); the reconcile loop creates it then)") in out
