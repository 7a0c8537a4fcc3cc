"""fleet render: golden files, Kueue's quota rules against the plan, determinism, the validator, the CLI."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import sources
from reconciler.catalog import load_catalog
from reconciler.cli import main
from reconciler.pipeline import check
from reconciler.plan import plan
from reconciler.plan.types import plan_from_dict
from reconciler.render import render, render_quotas
from reconciler.render.stackspec import node_pool_name
from reconciler.safeio import RENDER_MANIFEST
from reconciler.validate import Validated

from builders import TEAMS, base_files, job, shared_file, with_files
from render_check import admission, cohort_shortfalls, docs, workload_pods

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "render"
VALIDATOR = "tools/validate_kueue.py"
UPDATE = os.environ.get("FLEET_UPDATE_GOLDEN") == "1"


def example() -> dict[str, bytes]:
    return sources.read_worktree(ROOT)


def small() -> dict[str, bytes]:
    """The builders' fleet plus a GPU inference job with replicas that share nodes and a CPU-heavy job."""
    return with_files({
        "jobs/lang/serve.yaml": job("serve", "lang", "kind: inference\nreplicas: 3\n"),
        "jobs/vision/prep.yaml": "name: prep\nteam: vision\noptions:\n"
                                 "  - {accelerator: nvidia-h100-80gb, count: 8, cpus: 64, memory_gib: 512}\n"
                                 "image: img:2\nenv: {RETRIES: '3', FLAG: 'true'}\n",
    })


def workloads() -> dict[str, bytes]:
    """Issue 13's golden cases: a multi-host TPU multislice job (`multislice`), a 16-node H100 job on GKE A3
    Mega and one on EKS p5 (spot: the only pool a `spot: required` job may use), a single-host and a
    multi-host inference service."""
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 512}")
    mega = ("name: gke-use4\nprovider: gcp\nregion: us-east4\nzone: us-east4-a\nkubernetes: {cluster: ml-use4}\n"
            "pools:\n  - {name: h100-mega, accelerator: nvidia-h100-80gb, machine_type: a3-megagpu-8g, max: 16, "
            "placement: compact}\n")
    eks = ("name: eks-use1\nprovider: aws\nregion: us-east-1\nkubernetes: {cluster: ml-use1}\n"
           "pools:\n  - {name: p5-spot, accelerator: nvidia-h100-80gb, machine_type: p5.48xlarge, max: 16, "
           "capacity: spot, placement: compact}\n")
    big = "options:\n  - {accelerator: nvidia-h100-80gb, count: 128}\nimage: img:1\n"
    return with_files({
        "policies/teams.yaml": teams,
        "fleet/clusters/gke-use4.yaml": mega,
        "fleet/clusters/eks-use1.yaml": eks,
        "jobs/vision/pretrain-gke.yaml": f"name: pretrain-gke\nteam: vision\n{big}"
                                         "max_restarts: 10\nservice_account: trainer\n"
                                         "env_from_secrets: [wandb]\nimage_pull_secrets: [regcred]\n"
                                         "volumes:\n  - {name: data, claim: vision-data, mount_path: /data}\n"
                                         "  - {name: out, claim: vision-ckpt, mount_path: /ckpt, read_only: false}\n",
        "jobs/vision/multislice.yaml": "name: multislice\nteam: vision\noptions:\n"
                                       "  - {accelerator: tpu-v5p, topology: 4x4x4, slices: 2}\nimage: img:1\n",
        "jobs/vision/pretrain-eks.yaml": f"name: pretrain-eks\nteam: vision\n{big}spot: required\n",
        "jobs/lang/serve-small.yaml": job("serve-small", "lang", "kind: inference\nreplicas: 2\nport: 8000\n"
                                                               "readiness_path: /healthz\n"),
        "jobs/lang/serve-big.yaml": "name: serve-big\nteam: lang\nkind: inference\noptions:\n"
                                    "  - {accelerator: nvidia-h100-80gb, count: 16}\nimage: img:1\nport: 8000\n",
    })


def validated(files: dict[str, bytes]) -> Validated:
    v = check(files, load_catalog())
    assert v.ok, v.errors
    return v


def spotted() -> dict[str, bytes]:
    """`small()` with a `spot:` quota (issue 22: spot-only work charged apart from nominal) for vision's H100s and
    two of its opportunistic (spot-only) jobs using it, so vision's nominal H100 quota holds on-demand work
    only, and lang borrows vision's unused nominal."""
    files = small()
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 24, spot: 16}")
    return {**files, "policies/teams.yaml": teams.encode(),
            "jobs/vision/s1.yaml": job("s1", "vision", "priority: opportunistic\n", count=8).encode(),
            "jobs/vision/s2.yaml": job("s2", "vision", "priority: opportunistic\n", count=8).encode(),
            "jobs/lang/wide.yaml": job("wide", "lang", "spot: never\n", count=40).encode()}


FLEETS = {"small": small, "example": example, "spot": spotted}


def rendered(files: dict[str, bytes]) -> dict[str, str]:
    v = validated(files)
    return render(v, plan(v), load_catalog())


def compare_golden(name: str, files: dict[str, str]) -> None:
    root = GOLDEN / name
    if UPDATE:
        shutil.rmtree(root, ignore_errors=True)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(text.encode())
    have = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    assert sorted(have) == sorted(files), "rendered files differ from the golden set; FLEET_UPDATE_GOLDEN=1 updates"
    for rel, text in files.items():
        assert have[rel] == text.encode(), f"{rel} differs from its golden file; FLEET_UPDATE_GOLDEN=1 updates"


# --- golden files ----------------------------------------------------------------------------------------


def test_golden_small_fleet() -> None:
    compare_golden("small", rendered(small()))


def test_golden_workloads() -> None:
    compare_golden("workloads", rendered(workloads()))


def test_golden_example() -> None:
    """The example, except the kueue/jobs stack specs, which carry the same objects as the YAML (see below)."""
    files = rendered(example())
    compare_golden("example", {k: v for k, v in files.items()
                               if not k.endswith(("-kueue.json", "-jobs.json"))})


def test_stack_objects_are_the_yaml_documents() -> None:
    files = rendered(example())
    for c in sorted({k.split("/")[0] for k in files if k.endswith("/kueue.yaml")}):
        kueue = json.loads(files[f"stacks/{c}-kueue.json"])
        assert kueue["objects"] == docs(files[f"{c}/kueue.yaml"])
        jobs = json.loads(files[f"stacks/{c}-jobs.json"])
        yaml_jobs = [d for k in sorted(files) if k.startswith((f"{c}/jobsets/", f"{c}/services/", f"{c}/ray/"))
                     for d in docs(files[k])]
        key = lambda o: (o["metadata"]["namespace"], o["metadata"]["name"], o["kind"])  # noqa: E731
        assert jobs["objects"] == sorted(yaml_jobs, key=key)
        assert [key(o) for o in jobs["objects"]] == sorted(key(o) for o in jobs["objects"])


# --- quotas and admission --------------------------------------------------------------------------------


@pytest.mark.parametrize("fleet", ["small", "example", "spot"])
def test_nominal_quotas_sum_to_the_team_quota(fleet: str) -> None:
    """The ClusterQueues' nominalQuota of a team's accelerator adds up to its nominal quota plus its `spot:`
    quota (the spot flavors hold that for its spot-only work)."""
    files = FLEETS[fleet]()
    v = validated(files)
    planned = plan(v)
    out = render(v, planned, load_catalog())
    total: dict[tuple[str, str], int] = defaultdict(int)
    for view in admission(out).values():
        for (team, _flavor, res), cell in view.cells.items():
            if cell.declared:
                total[(team, res)] += cell.nominal
    acc_resource = {"tpu": "google.com/tpu", "gpu": "nvidia.com/gpu", "trainium": "aws.amazon.com/neuron"}
    slurm = {c.name for c in v.loaded.clusters if c.provider == "slurm"}     # no Kueue there: the plan holds its share
    for q in planned.quotas:
        if q.cluster in slurm:
            total[(q.team, acc_resource[load_catalog().accelerators[q.accelerator].kind])] += q.nominal
    present = {p.accelerator for p in v.pools if p.status != "down"}
    expected: dict[tuple[str, str], int] = defaultdict(int)
    assert v.loaded.teams is not None
    for t in v.loaded.teams.teams:
        for acc, q in t.quota.items():
            if acc in present:
                expected[(t.name, acc_resource[load_catalog().accelerators[acc].kind])] += q.nominal + (q.spot or 0)
    assert {k: n for k, n in total.items() if n or k in expected} == dict(expected)


@pytest.mark.parametrize("fleet", ["small", "example", "spot"])
def test_flavor_split_keeps_the_plans_cluster_quotas(fleet: str) -> None:
    v = validated(FLEETS[fleet]())
    p = plan(v)
    sums: dict[tuple[str, str, str], list[int | None]] = {}
    for f in render_quotas(v, p):
        s = sums.setdefault((f.cluster, f.team, f.accelerator), [0, 0, 0])
        s[0] = (s[0] or 0) + f.nominal
        s[1] = None if f.borrowing_limit is None else (s[1] or 0) + f.borrowing_limit
        s[2] = None if f.lending_limit is None else (s[2] or 0) + f.lending_limit
        assert f.lending_limit is None or f.lending_limit <= f.nominal
    for q in p.quotas:
        assert sums[(q.cluster, q.team, q.accelerator)] == [q.nominal, q.borrowing_limit, q.lending_limit], q


@pytest.mark.parametrize("fleet", ["small", "example", "spot"])
def test_every_placed_job_fits_its_flavor_quota(fleet: str) -> None:
    """Per team and flavor: what the JobSets request fits nominal + borrowingLimit, only where the plan
    borrowed, and only in a cohort; every JobSet's pods select exactly one flavor that its queue lists."""
    files = rendered(FLEETS[fleet]())
    checked = 0
    for cluster, view in admission(files).items():
        for (team, flavor, res), cell in view.cells.items():
            if not cell.used:
                continue
            checked += 1
            where = f"{cluster}/{team}/{flavor}/{res}"
            assert cell.declared, f"{where}: used but not in the ClusterQueue"
            if cell.used > cell.nominal:
                assert view.cohort_of[team] is not None, f"{where}: borrows without a cohort"
                assert cell.borrowing_limit is None or cell.used <= cell.nominal + cell.borrowing_limit, where
    assert checked >= {"example": 30, "small": 2, "spot": 4}[fleet]


@pytest.mark.parametrize("fleet", ["small", "example", "spot"])
def test_cohort_mates_lend_what_borrowers_take_in_each_cluster(fleet: str) -> None:
    """Kueue borrows only inside one cluster: per cohort tree and flavor, what members borrow must be lent
    by the others there (min(lendingLimit, unused nominal))."""
    files = rendered(FLEETS[fleet]())
    short = [f"{c}: {s}" for c, view in admission(files).items() for s in cohort_shortfalls(view)]
    assert short == []


def test_spot_only_work_has_its_spot_quota_in_the_spot_flavor_and_none_of_it_is_lent() -> None:
    """Issue 22: a team's `spot:` quota holds its spot-only work apart from nominal. The plan charged it so, but
    the ClusterQueues counted that work against nominal: vision (no cohort, 16 H100s, `spot: 8`) runs 16 GPUs
    on-demand and an 8-GPU opportunistic job on gke-usc1's spot pool, and its queue there had no quota for the
    spot job, which Kueue would never admit (it cannot borrow without a cohort). Now the spot flavors of its
    queues hold the 8, the plan's per-cluster nominal quotas count on-demand work only, and in a cohort the
    spot part is never lent (lendingLimit at most the nominal part)."""
    solo = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 16, spot: 8}").replace(
        "    cohort: research\n    weight: 2\n", "    weight: 2\n")
    files = with_files({"policies/teams.yaml": solo, "jobs/vision/train.yaml": None,
                        "jobs/vision/od.yaml": job("od", "vision", "spot: never\n", count=16),
                        "jobs/vision/s1.yaml": job("s1", "vision", "priority: opportunistic\n", count=8)})
    v = validated(files)
    p = plan(v)
    assert {x.job: (x.cluster, x.pool) for x in p.placements}["vision/s1"] == ("gke-usc1", "h100-spot")
    assert sum(q.nominal for q in p.quotas if q.team == "vision" and q.accelerator == "nvidia-h100-80gb") == 16
    assert {q.cluster: q.spot for q in p.quotas if q.team == "vision" and q.spot} == {"gke-usc1": 8}
    assert plan_from_dict(json.loads(p.to_json())) == p                   # `spot` read back, where it is stated
    assert sum("spot" in q for q in json.loads(p.to_json())["quotas"]) == 1
    out = render(v, p, load_catalog())
    cell = admission(out)["gke-usc1"].cells[("vision", "h100-spot", "nvidia.com/gpu")]
    assert cell.declared and cell.used == 8 <= cell.nominal, cell
    in_cohort = with_files({**{k: v.decode() for k, v in files.items() if k.startswith("jobs/")},
                            "policies/teams.yaml": TEAMS.replace("nvidia-h100-80gb: {nominal: 64}",
                                                                 "nvidia-h100-80gb: {nominal: 16, spot: 8}"),
                            "jobs/vision/train.yaml": None})
    v = validated(in_cohort)
    spot = [f for f in render_quotas(v, plan(v)) if f.team == "vision" and f.spot]
    assert sum(f.spot for f in spot) == 8
    checked = 0
    for d in docs(render(v, plan(v), load_catalog())["gke-usc1/kueue.yaml"]):
        if d["kind"] == "ClusterQueue" and d["metadata"]["name"] == "vision":
            (gpu,) = [r for fl in d["spec"]["resourceGroups"][0]["flavors"] if fl["name"] == "h100-spot"
                      for r in fl["resources"] if r["name"] == "nvidia.com/gpu"]
            f = next(f for f in spot if f.cluster == "gke-usc1" and f.flavor == "h100-spot")
            assert gpu["nominalQuota"] == f.nominal + f.spot and gpu["lendingLimit"] <= f.nominal
            checked += 1
    assert checked == 1


def test_a_quota_short_of_the_plan_is_caught() -> None:
    """The admission check itself can fail: cut one used nominal quota below its usage."""
    files = rendered(example())
    path = "gke-use5/kueue.yaml"
    view = admission(files)["gke-use5"]
    team, flavor, res = next(k for k, c in sorted(view.cells.items()) if c.used > 0)
    objs = docs(files[path])
    for d in objs:
        if d["kind"] == "ClusterQueue" and d["metadata"]["name"] == team:
            for rg in d["spec"]["resourceGroups"]:
                for fl in rg["flavors"]:
                    for r in fl["resources"]:
                        if (fl["name"], r["name"]) == (flavor, res):
                            r["nominalQuota"], r["borrowingLimit"] = 0, 0
    cut = admission({**files, path: yaml.safe_dump_all(objs)})["gke-use5"]
    assert cut.cells[(team, flavor, res)].used > 0 == cut.cells[(team, flavor, res)].nominal
    assert any(c.used > c.nominal + (c.borrowing_limit or 0) for c in cut.cells.values() if c.used)


# --- shapes ----------------------------------------------------------------------------------------------


def jobset_of(files: dict[str, str], cluster_job: str) -> dict[str, object]:
    (d,) = docs(files[cluster_job])
    return d


def test_tpu_multislice_and_gpu_gangs() -> None:
    ex = rendered(example())
    js = jobset_of(ex, "gke-use5/jobsets/foundation.atlas-400b-pretrain.yaml")   # 2 slices of 8x8x16
    (rj,) = js["spec"]["replicatedJobs"]  # type: ignore[index]
    assert (rj["name"], rj["replicas"], rj["template"]["spec"]["parallelism"]) == ("slice", 2, 256)
    pod = rj["template"]["spec"]["template"]["spec"]
    # ct5p-hightpu-4t: 208 vCPUs, 448 GiB (catalog); the pod takes the whole host and requests half
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "104", "memory": "224Gi", "google.com/tpu": 4},
                                                 "limits": {"google.com/tpu": 4}}
    assert pod["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
                                   "cloud.google.com/gke-tpu-topology": "8x8x16", "fleet.dev/pool": "v5p-8x8x16"}
    assert rj["template"]["spec"]["template"]["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-slice-required-topology": "cloud.google.com/gke-nodepool",
        "kueue.x-k8s.io/podset-slice-size": "256"}
    assert js["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "foundation",  # type: ignore[index]
                                        "kueue.x-k8s.io/priority-class": "critical", "fleet.dev/team": "foundation",
                                        "fleet.dev/job": "atlas-400b-pretrain", "fleet.dev/pool": "v5p-8x8x16"}
    annotations = js["metadata"]["annotations"]  # type: ignore[index]
    assert annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"] == "cloud.google.com/gke-nodepool"
    # what `--observed` planning reads back (plan/live.py): the spec's digest and the plan's units
    assert annotations["fleet.dev/units"] == "0,1" and len(annotations["fleet.dev/spec-digest"]) == 16
    assert js["spec"]["suspend"] is True  # type: ignore[index]
    # inference: 8 replicas of a 4x4 v6e slice, in the job's data_region us-east5 (its one cluster: the default
    # spread yields to the data region); with `spread: cluster` in the file, over clusters (one
    # LeaderWorkerSet per cluster's pool)
    def sets_of(out: dict[str, str]) -> list[Any]:
        return [docs(text)[0] for path, text in out.items() if path.endswith("/services/serving.atlas-chat.yaml")]

    (lws,) = sets_of(ex)
    assert (lws["kind"], lws["spec"]["replicas"]) == ("LeaderWorkerSet", 8)
    assert [k for k in ex if k.endswith("/services/serving.atlas-chat.yaml")] == [
        "gke-use5/services/serving.atlas-chat.yaml"]
    tree = example()
    tree["jobs/serving/atlas-chat.yaml"] += b"spread: cluster\n"
    sets = sets_of(rendered(tree))
    assert len(sets) >= 2 and {lws["kind"] for lws in sets} == {"LeaderWorkerSet"}
    assert sum(lws["spec"]["replicas"] for lws in sets) == 8
    assert {lws["spec"]["leaderWorkerTemplate"]["size"] for lws in sets} == {4}
    files = rendered(small())
    (rj,) = jobset_of(files, "onprem-sjc/jobsets/vision.train.yaml")["spec"]["replicatedJobs"]  # type: ignore[index]
    assert (rj["name"], rj["replicas"], rj["template"]["spec"]["parallelism"]) == ("worker", 1, 2)
    assert rj["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"fleet.dev/pool": "h100-owned"}
    serve = [docs(files[k])[0] for k in files if k.endswith("/lang.serve.yaml")]   # spread over clusters
    assert {d["kind"] for d in serve} == {"Deployment"} and sum(d["spec"]["replicas"] for d in serve) == 3
    prep = [k for k in files if k.endswith("/vision.prep.yaml")]
    (rj,) = jobset_of(files, prep[0])["spec"]["replicatedJobs"]  # type: ignore[index]
    c = rj["template"]["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["requests"] == {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": 8}
    assert c["env"] == [{"name": "FLAG", "value": "true"}, {"name": "RETRIES", "value": "3"}]
    assert "value: 'true'" in files[prep[0]] and "value: '3'" in files[prep[0]]   # YAML 1.1 would misread them


def test_stack_specs_follow_the_contract() -> None:
    v = validated(example())
    p = plan(v)
    files = render(v, p, load_catalog())
    infra = json.loads(files["stacks/gke-use5-infra.json"])
    assert infra["stack"] == "gke-use5-infra" and infra["layer"] == "infra" and infra["version"] == 1
    assert set(infra) == {"version", "stack", "layer", "cluster", "provider", "region", "zone", "kubernetes",
                          "node_pools"}
    names = [n["name"] for n in infra["node_pools"]]
    assert names == sorted(names) and len(set(names)) == len(names)
    v5p = [n for n in infra["node_pools"] if n["pool"] == "v5p-8x8x8"]
    target = next(pp.target for pp in p.pools if pp.cluster == "gke-use5" and pp.pool == "v5p-8x8x8")
    assert [n["slice"] for n in v5p] == list(range(target))
    assert v5p[0] == {"name": "v5p-8x8x8-s0", "pool": "v5p-8x8x8", "slice": 0, "accelerator": "tpu-v5p",
                      "kind": "tpu", "machine_type": "ct5p-hightpu-4t", "capacity": "on-demand", "scaling": "plan",
                      "node_count": 128, "autoscaling": None, "tpu_topology": "8x8x8", "placement_policy": "COMPACT",
                      "guest_accelerator": None, "labels": {"fleet.dev/pool": "v5p-8x8x8"},
                      "efa_interfaces": 0, "gpu_direct": None,
                      "taints": [{"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}]}
    h100 = next(n for n in infra["node_pools"] if n["name"] == "h100-mega-spot")
    assert (h100["node_count"], h100["guest_accelerator"], h100["placement_policy"]) == (
        0, {"type": "nvidia-h100-mega-80gb", "count": 8}, None)
    usc1 = json.loads(files["stacks/gke-usc1-infra.json"])
    auto = [n for n in usc1["node_pools"] if n["pool"] == "v6e-8x8"]          # TPU, scaling: autoscaler
    assert len(auto) == 8 and all(n["autoscaling"] == {"min_nodes": 0, "max_nodes": 16} for n in auto)
    use4 = json.loads(files["stacks/gke-use4-infra.json"])
    mega = next(n for n in use4["node_pools"] if n["name"] == "h100-mega")     # GPU, scaling: autoscaler
    assert (mega["node_count"], mega["autoscaling"]) == (None, {"min_nodes": 0, "max_nodes": 32})
    for f in files:
        if f.startswith("stacks/"):
            assert files[f] == json.dumps(json.loads(files[f]), indent=2, sort_keys=True) + "\n"


def test_node_pool_names_stay_short_stable_and_distinct() -> None:
    long = "a" * 45
    n0, n1 = node_pool_name(long, "-s0"), node_pool_name(long, "-s1")
    assert len(n0) <= 40 and n0.endswith("-s0") and n1.endswith("-s1") and n0[:-3] != n1[:-3]
    assert node_pool_name(long, "-s0") == n0 and node_pool_name("v5p", "-s3") == "v5p-s3"
    assert node_pool_name("b" * 41) != node_pool_name("b" * 42) and len(node_pool_name("b" * 63)) <= 40


# --- determinism -----------------------------------------------------------------------------------------


def test_render_is_deterministic_whatever_the_file_order() -> None:
    files = example()
    first = rendered(files)
    keys = list(files)
    random.Random(7).shuffle(keys)
    assert rendered({k: files[k] for k in keys}) == first
    assert rendered(files) == first


def test_yaml_reads_back_to_the_rendered_objects() -> None:
    files = rendered(example())
    for c in sorted({k.split("/")[0] for k in files if k.endswith("/kueue.yaml")}):
        assert docs(files[f"{c}/kueue.yaml"]) == json.loads(files[f"stacks/{c}-kueue.json"])["objects"]
        # YAML 1.2 readers agree too: no bare yes/no/on/off or numbers-as-strings are left unquoted
        for line in files[f"{c}/kueue.yaml"].splitlines():
            assert not line.rstrip().endswith((": yes", ": no", ": on", ": off", ": y", ": n"))


# --- the validator ---------------------------------------------------------------------------------------


def test_validator_accepts_the_rendered_example(tmp_path: Path) -> None:
    validator = shared_file(VALIDATOR)
    main_render(tmp_path / "out")
    for cluster in sorted(p for p in (tmp_path / "out").iterdir()
                          if p.is_dir() and p.name not in ("stacks", "monitoring")):
        r = subprocess.run([sys.executable, str(validator), "--strict-refs", str(cluster)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert " 0 error(s)" in r.stdout


def test_a_missing_shared_file_fails_in_ci_and_skips_only_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    """The validator test once skipped silently wherever ../shared was missing, CI included."""
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI always has it"):
        shared_file("tools/no-such-validator.py")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="is not beside the checkout"):
        shared_file("tools/no-such-validator.py")


def main_render(out: Path, repo: Path = ROOT) -> None:
    try:
        main(["render", "--repo", str(repo), "--out", str(out)])
    except SystemExit as e:
        assert e.code == 0


# --- the CLI ---------------------------------------------------------------------------------------------


def test_cli_writes_the_tree_and_removes_only_its_own_stale_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    main_render(out)
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    monitoring = ["monitoring/grafana-dashboard.json", "monitoring/prometheus-rules.yaml"]   # the CLI adds them
    assert written == sorted([*rendered(example()), *monitoring, RENDER_MANIFEST])
    (out / "gke-use5" / "notes.txt").write_text("mine")
    (out / "stacks" / "gone-infra.json").write_text("{}")           # not in the manifest: never removed
    manifest = out / RENDER_MANIFEST
    manifest.write_text(manifest.read_text() + "old-cluster/jobsets/t.j.yaml\n")
    (out / "old-cluster" / "jobsets").mkdir(parents=True)
    (out / "old-cluster" / "jobsets" / "t.j.yaml").write_text("stale")
    main_render(out)
    assert not (out / "old-cluster").exists()
    assert (out / "gke-use5" / "notes.txt").read_text() == "mine"
    assert (out / "stacks" / "gone-infra.json").exists()


def test_cli_rejects_a_file_as_out_and_an_invalid_repo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(SystemExit) as e:
        main(["render", "--out", str(f)])
    assert e.value.code == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    repo = tmp_path / "repo"
    for rel, data in with_files({"jobs/vision/train.yaml": "name: train\n"}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    with pytest.raises(SystemExit) as e:
        main(["render", "--repo", str(repo), "--out", str(tmp_path / "o")])
    assert e.value.code == 1
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit) as e:
        main(["render"])
    assert e.value.code == 2


def test_base_fleet_renders_every_cluster() -> None:
    files = rendered(base_files())
    assert {k.split("/")[0] for k in files} == {"gke-usc1", "onprem-sjc", "stacks"}
    assert yaml.safe_load(files["stacks/onprem-sjc-infra.json"])["node_pools"][0]["node_count"] == 4


def test_preemption_kueue_would_reject_is_a_validation_error(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Found by `fleet validate` (file, line, field), so no command that needs a valid repository (render, apply,
    the reconcile loop) meets it later as a ClusterQueue Kueue rejects."""
    prio = ("default: research\nclasses:\n  - {name: research, value: 1}\n  - {name: production, value: 2}\n"
            "preemption:\n  reclaim_within_cohort: never\n  borrow_within_cohort: {policy: lower_priority}\n")
    repo = tmp_path / "repo"
    for rel, data in with_files({"policies/priorities.yaml": prio}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    with pytest.raises(SystemExit) as e:
        main(["render", "--repo", str(repo), "--out", str(tmp_path / "o")])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "policies/priorities.yaml:7:34: error: borrow_within_cohort.policy is lower_priority" in err
    assert "[preemption.borrow_within_cohort.policy]" in err and "hint: set reclaim_within_cohort" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


# --- workloads that survive production (issue 13) --------------------------------------------------------


def workload_objects(files: dict[str, str]) -> list[tuple[str, dict[str, object]]]:
    return [(path, d) for path, text in sorted(files.items()) if "/jobsets/" in path or "/services/" in path
            for d in docs(text)]


@pytest.mark.parametrize("fleet", ["example", "workloads"])
def test_every_jobset_survives_a_host_loss_and_every_container_requests_cpu_and_memory(fleet: str) -> None:
    files = rendered(example() if fleet == "example" else workloads())
    jobsets = 0
    for path, obj in workload_objects(files):
        if obj["kind"] == "Service":
            continue
        for pod, _n in workload_pods(obj):
            for c in pod["containers"]:
                assert {"cpu", "memory"} <= set(c["resources"]["requests"]), path
        if obj["kind"] != "JobSet":
            continue
        jobsets += 1
        spec: dict[str, Any] = obj["spec"]  # type: ignore[assignment]
        assert spec["failurePolicy"]["maxRestarts"] >= 0, path
        assert spec["failurePolicy"]["rules"] == [
            {"name": "DisruptionsDoNotCount", "action": "RestartJobSetAndIgnoreMaxRestarts",
             "onJobFailureReasons": ["PodFailurePolicy"]}], path
        for rj in spec["replicatedJobs"]:
            child = rj["template"]["spec"]
            assert child["backoffLimit"] == 0, path
            assert child["podFailurePolicy"]["rules"] == [
                {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}], path
    assert jobsets >= (30 if fleet == "example" else 4)


@pytest.mark.parametrize("fleet", ["example", "workloads"])
def test_every_multi_node_gpu_job_gets_shm_coordinator_and_rank(fleet: str) -> None:
    files = rendered(example() if fleet == "example" else workloads())
    checked = 0
    for path, obj in workload_objects(files):
        if obj["kind"] != "JobSet":
            continue
        spec: dict[str, Any] = obj["spec"]  # type: ignore[assignment]
        (rj,) = spec["replicatedJobs"]
        pod = rj["template"]["spec"]["template"]["spec"]
        c = pod["containers"][0]
        if "nvidia.com/gpu" not in c["resources"]["limits"] or rj["template"]["spec"]["parallelism"] < 2:
            continue
        checked += 1
        assert spec["coordinator"] == {"replicatedJob": "worker", "jobIndex": 0, "podIndex": 0}, path
        env = {e["name"]: e for e in c["env"]}
        assert env["MASTER_ADDR"]["valueFrom"]["fieldRef"]["fieldPath"] == \
            "metadata.annotations['jobset.sigs.k8s.io/coordinator']", path
        assert env["NNODES"]["value"] == str(rj["template"]["spec"]["parallelism"]), path
        assert env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == \
            "metadata.annotations['batch.kubernetes.io/job-completion-index']", path
        shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
        memory = int(c["resources"]["requests"]["memory"][:-2])
        assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{memory // 2}Gi"}, path
        assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"], path
    assert checked >= (3 if fleet == "example" else 2)


def test_fast_networking_on_eks_p5_and_gke_a3_mega() -> None:
    files = rendered(workloads())
    eks = jobset_of(files, "eks-use1/jobsets/vision.pretrain-eks.yaml")
    pod = eks["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]  # type: ignore[index]
    res = pod["spec"]["containers"][0]["resources"]
    assert res["requests"]["vpc.amazonaws.com/efa"] == res["limits"]["vpc.amazonaws.com/efa"] == 32   # p5.48xlarge
    (cq,) = [d for d in docs(files["eks-use1/kueue.yaml"]) if d["kind"] == "ClusterQueue" and
             d["metadata"]["name"] == "vision"]
    (rg,) = cq["spec"]["resourceGroups"]
    assert "vpc.amazonaws.com/efa" in rg["coveredResources"]      # else Kueue admits nothing that requests it
    efa = {r["name"]: r["nominalQuota"] for r in rg["flavors"][0]["resources"]}["vpc.amazonaws.com/efa"]
    assert efa == 16 * 32
    gke = jobset_of(files, "gke-use4/jobsets/vision.pretrain-gke.yaml")
    pod = gke["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]  # type: ignore[index]
    nets = json.loads(pod["metadata"]["annotations"]["networking.gke.io/interfaces"])
    assert [n["network"] for n in nets] == ["default"] + [f"vpc{i}" for i in range(1, 9)]   # A3 Mega: 8 GPU NICs
    assert "vpc.amazonaws.com/efa" not in pod["spec"]["containers"][0]["resources"]["requests"]
    infra = json.loads(files["stacks/gke-use4-infra.json"])["node_pools"][0]
    assert (infra["gpu_direct"], infra["efa_interfaces"]) == ({"kind": "tcpxo", "networks": 8}, 0)
    assert json.loads(files["stacks/eks-use1-infra.json"])["node_pools"][0]["efa_interfaces"] == 32


def test_job_fields_reach_the_pod_and_nothing_else() -> None:
    files = rendered(workloads())
    pod = jobset_of(files, "gke-use4/jobsets/vision.pretrain-gke.yaml")["spec"]["replicatedJobs"][0][  # type: ignore[index]
        "template"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "trainer" and pod["imagePullSecrets"] == [{"name": "regcred"}]
    c = pod["containers"][0]
    assert c["envFrom"] == [{"secretRef": {"name": "wandb"}}]
    assert c["volumeMounts"][:2] == [{"name": "data", "mountPath": "/data", "readOnly": True},
                                     {"name": "out", "mountPath": "/ckpt", "readOnly": False}]
    assert pod["volumes"][:2] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "vision-data", "readOnly": True}},
        {"name": "out", "persistentVolumeClaim": {"claimName": "vision-ckpt", "readOnly": False}}]
    for path, obj in workload_objects(files):
        text = json.dumps(obj)
        for forbidden in ("hostPath", "hostNetwork", "privileged", "hostPID", "hostIPC"):
            assert forbidden not in text, (path, forbidden)
    js = jobset_of(files, "gke-use4/jobsets/vision.pretrain-gke.yaml")
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 10  # type: ignore[index]


def test_inference_is_a_service_that_kueue_admits() -> None:
    files = rendered(workloads())
    dep, svc = docs(files["gke-usc1/services/lang.serve-small.yaml"])
    assert dep["kind"] == "Deployment" and dep["spec"]["replicas"] == 2
    assert dep["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lang"
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}  # new before old stops
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    # the selector is immutable: without the pool in it, a move to another pool is a rolling update
    assert dep["spec"]["selector"]["matchLabels"] == {"fleet.dev/team": "lang", "fleet.dev/job": "serve-small"}
    c = pod["spec"]["containers"][0]
    assert pod["spec"]["restartPolicy"] == "Always"
    assert c["ports"] == [{"name": "serve", "containerPort": 8000, "protocol": "TCP"}]
    assert c["readinessProbe"] == {"httpGet": {"path": "/healthz", "port": "serve"}}
    assert svc["spec"]["ports"] == [{"name": "serve", "port": 8000, "targetPort": "serve", "protocol": "TCP"}]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    lws, svc = docs(files["onprem-sjc/services/lang.serve-big.yaml"])
    assert lws["kind"] == "LeaderWorkerSet" and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {"maxUnavailable": 0, "maxSurge": 1}
    assert svc["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    ex = rendered(example())
    v = validated(example())
    placed = {pl.job for pl in plan(v).placements}
    inference = sorted(j.id for j in v.loaded.jobs if j.kind == "inference" and j.id in placed)
    have = sorted({f"{p.split('/')[-1].split('.')[0]}/{p.split('/')[-1].split('.')[1]}"
                   for p in ex if "/services/" in p})
    assert inference and have == inference
    for path, obj in workload_objects(ex):
        if "/services/" in path:
            assert obj["kind"] in ("Deployment", "LeaderWorkerSet", "Service"), path
        assert "/jobsets/" not in path or obj["kind"] == "JobSet", path
    assert all([d["kind"] for d in docs(ex[p])][-1] == "Service" for p in ex if "/services/" in p)


def test_validator_accepts_the_workloads_render(tmp_path: Path) -> None:
    """Every rendered object of the issue-13 fleet, LeaderWorkerSets included (their CRD is in ../shared/schemas)."""
    validator = shared_file(VALIDATOR)
    for rel, text in rendered(workloads()).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    for cluster in sorted(p for p in tmp_path.iterdir() if p.is_dir() and p.name not in ("stacks", "monitoring")):
        r = subprocess.run([sys.executable, str(validator), "--strict-refs", str(cluster)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert " 0 error(s)" in r.stdout
    assert "LeaderWorkerSet/serve-big: OK (leaderworkerset.x-k8s.io/v1)" in subprocess.run(
        [sys.executable, str(validator), str(tmp_path / "onprem-sjc")], capture_output=True, text=True).stdout


def test_the_longest_job_name_validate_allows_gives_names_the_cluster_accepts() -> None:
    """`fleet validate` allows a job name exactly as long as its derived pod names leave room for (46 here) and
    no longer: the rendered JobSet's longest child Job and pod names (as the JobSet webhook computes them) are
    DNS-1035 labels of at most 63 characters."""
    import re

    from reconciler.kube_rules import longest_pod_name

    name = "n" * 46
    files = with_files({"jobs/vision/train.yaml": None,
                        f"jobs/vision/{name}.yaml": base_files()["jobs/vision/train.yaml"].replace(
                            b"name: train", f"name: {name}".encode())})
    longer = with_files({"jobs/vision/train.yaml": None,
                         f"jobs/vision/{name}n.yaml": base_files()["jobs/vision/train.yaml"].replace(
                             b"name: train", f"name: {name}n".encode())})
    assert [p.field for p in check(longer, load_catalog()).errors] == ["name"]
    sets = [d for text in rendered(files).values() for d in docs(text) if d.get("kind") == "JobSet"]
    [js] = [d for d in sets if d["metadata"]["name"] == name]
    for rjob in js["spec"]["replicatedJobs"]:
        pod = longest_pod_name(name, rjob["name"], rjob["replicas"], rjob["template"]["spec"]["completions"])
        assert len(pod) <= 63 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", pod), pod


def test_a_change_of_a_spot_quota_alone_shows_in_the_plan_diff() -> None:
    """Raising vision's `spot:` quota from 8 to 16 changes what its queues hold for spot-only work: the change's
    quota tables (team and cluster) show it as the nominal cell `16 + 8 spot → 16 + 16 spot`, and the JSON
    report carries `spot` on both sides. Before, the diff compared nominal, borrowing and lending only, and
    this change showed no quota change at all."""
    from reconciler.pipeline import change
    from reconciler.report import _limits, diff_tables

    def teams(spot: int) -> str:
        return TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", f"nvidia-h100-80gb: {{nominal: 16, spot: {spot}}}")

    jobs = {"jobs/vision/od.yaml": job("od", "vision", "spot: never\n", count=16),
            "jobs/vision/s1.yaml": job("s1", "vision", "priority: opportunistic\n", count=8)}
    base = validated(with_files({**jobs, "policies/teams.yaml": teams(8)}))
    head = validated(with_files({**jobs, "policies/teams.yaml": teams(16)}))
    c = change(head, base)
    assert c.diff is not None
    mine = [q for q in c.diff.quotas if (q.team, q.accelerator) == ("vision", "nvidia-h100-80gb")]
    team_level = next(q for q in mine if not q.cluster)
    assert team_level.before is not None and team_level.after is not None
    assert (team_level.before[3], team_level.after[3]) == (8, 16)
    rows = diff_tables(c.diff)["team_quotas"].rows
    assert ("vision", "nvidia-h100-80gb", "16 + 8 spot → 16 + 16 spot", "unlimited", "all") in rows, rows
    assert any(q.cluster == "gke-usc1" for q in mine)                  # the cluster with the spot pool
    assert _limits(team_level.after) == {"nominal": 16, "borrowing_limit": None, "lending_limit": None, "spot": 16}
    assert _limits((16, None, None, 0)) == {"nominal": 16, "borrowing_limit": None, "lending_limit": None}
