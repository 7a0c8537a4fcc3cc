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

import pytest
import yaml

from reconciler import sources
from reconciler.catalog import load_catalog
from reconciler.cli import main
from reconciler.pipeline import check
from reconciler.plan import plan
from reconciler.render import render, render_quotas
from reconciler.render.stackspec import node_pool_name
from reconciler.safeio import RENDER_MANIFEST
from reconciler.validate import Validated

from builders import base_files, job, shared_file, with_files
from render_check import admission, cohort_shortfalls, docs

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


def validated(files: dict[str, bytes]) -> Validated:
    v = check(files, load_catalog())
    assert v.ok, v.errors
    return v


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
        yaml_jobs = [d for k in sorted(files) if k.startswith(f"{c}/jobsets/") for d in docs(files[k])]
        key = lambda o: (o["metadata"]["namespace"], o["metadata"]["name"])  # noqa: E731
        assert jobs["objects"] == sorted(yaml_jobs, key=key)
        assert [key(o) for o in jobs["objects"]] == sorted(key(o) for o in jobs["objects"])


# --- quotas and admission --------------------------------------------------------------------------------


@pytest.mark.parametrize("fleet", ["small", "example"])
def test_nominal_quotas_sum_to_the_team_quota(fleet: str) -> None:
    files = small() if fleet == "small" else example()
    v = validated(files)
    out = render(v, plan(v), load_catalog())
    total: dict[tuple[str, str], int] = defaultdict(int)
    for view in admission(out).values():
        for (team, _flavor, res), cell in view.cells.items():
            if cell.declared:
                total[(team, res)] += cell.nominal
    acc_resource = {"tpu": "google.com/tpu", "gpu": "nvidia.com/gpu", "trainium": "aws.amazon.com/neuron"}
    present = {p.accelerator for p in v.pools if p.status != "down"}
    expected: dict[tuple[str, str], int] = defaultdict(int)
    assert v.loaded.teams is not None
    for t in v.loaded.teams.teams:
        for acc, q in t.quota.items():
            if acc in present:
                expected[(t.name, acc_resource[load_catalog().accelerators[acc].kind])] += q.nominal
    assert {k: n for k, n in total.items() if n or k in expected} == dict(expected)


@pytest.mark.parametrize("fleet", ["small", "example"])
def test_flavor_split_keeps_the_plans_cluster_quotas(fleet: str) -> None:
    v = validated(small() if fleet == "small" else example())
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


@pytest.mark.parametrize("fleet", ["small", "example"])
def test_every_placed_job_fits_its_flavor_quota(fleet: str) -> None:
    """Per team and flavor: what the JobSets request fits nominal + borrowingLimit, only where the plan
    borrowed, and only in a cohort; every JobSet's pods select exactly one flavor that its queue lists."""
    files = rendered(small() if fleet == "small" else example())
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
    assert checked >= (30 if fleet == "example" else 2)


@pytest.mark.parametrize("fleet", ["small", "example"])
def test_cohort_mates_lend_what_borrowers_take_in_each_cluster(fleet: str) -> None:
    """Kueue borrows only inside one cluster: per cohort tree and flavor, what members borrow must be lent
    by the others there (min(lendingLimit, unused nominal))."""
    files = rendered(small() if fleet == "small" else example())
    short = [f"{c}: {s}" for c, view in admission(files).items() for s in cohort_shortfalls(view)]
    assert short == []


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
    assert pod["containers"][0]["resources"] == {"requests": {"google.com/tpu": 4}, "limits": {"google.com/tpu": 4}}
    assert pod["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
                                   "cloud.google.com/gke-tpu-topology": "8x8x16", "fleet.dev/pool": "v5p-8x8x16"}
    assert rj["template"]["spec"]["template"]["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-slice-required-topology": "cloud.google.com/gke-nodepool",
        "kueue.x-k8s.io/podset-slice-size": "256"}
    assert js["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "foundation",  # type: ignore[index]
                                        "kueue.x-k8s.io/priority-class": "critical", "fleet.dev/team": "foundation"}
    assert js["metadata"]["annotations"] == {  # type: ignore[index]
        "alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"}
    assert js["spec"]["suspend"] is True  # type: ignore[index]
    chat = jobset_of(ex, "gke-use5/jobsets/serving.atlas-chat.yaml")   # inference: 8 replicas of a 4x4 v6e slice
    (rj,) = chat["spec"]["replicatedJobs"]  # type: ignore[index]
    assert (rj["replicas"], rj["template"]["spec"]["parallelism"]) == (8, 4)
    files = rendered(small())
    (rj,) = jobset_of(files, "onprem-sjc/jobsets/vision.train.yaml")["spec"]["replicatedJobs"]  # type: ignore[index]
    assert (rj["name"], rj["replicas"], rj["template"]["spec"]["parallelism"]) == ("worker", 1, 2)
    assert rj["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"fleet.dev/pool": "h100-owned"}
    serve = [k for k in files if k.endswith("/lang.serve.yaml")]
    (rj,) = jobset_of(files, serve[0])["spec"]["replicatedJobs"]  # type: ignore[index]
    assert (rj["replicas"], rj["template"]["spec"]["parallelism"]) == (3, 1)
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
    for cluster in sorted(p for p in (tmp_path / "out").iterdir() if p.is_dir() and p.name != "stacks"):
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
    assert written == sorted([*rendered(example()), RENDER_MANIFEST])
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


def test_preemption_kueue_would_reject_stops_the_render(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
    assert "policies/priorities.yaml: preemption.borrow_within_cohort.policy" in err and "hint:" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


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
