"""Per-flavor TPU quotas in whole slices (render/flavor_quota.py): the split itself, and the rendered example."""

from __future__ import annotations

from collections import defaultdict

import pytest
from test_render import example, rendered, small

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan import Plan, plan
from reconciler.render import render_quotas
from reconciler.render.flavor_quota import FlavorQuota, whole_split
from reconciler.render.kueue import UNKNOWN_NODE_CPUS, UNKNOWN_NODE_MEMORY_GIB
from reconciler.validate import Validated

from builders import with_files
from render_check import docs, whole_split_exists, workload_pods

H100 = "nvidia-h100-80gb"


def validated(files: dict[str, bytes]) -> Validated:
    v = check(files, load_catalog())
    assert v.ok, v.errors
    return v


@pytest.mark.parametrize(("name", "total", "weights", "unit", "room", "want"), [
    # 23 chips over v6e 16x16 / 4x4 / 2x2 by capacity: no whole split exists; 3 chips are left to the caller
    ("remainder", 23, {"a16x16": 2048, "b4x4": 256, "c2x2": 64}, {"a16x16": 256, "b4x4": 16, "c2x2": 4},
     {}, ({"a16x16": 0, "b4x4": 16, "c2x2": 4}, 3)),
    ("whole slices", 300, {"big": 2048, "small": 64}, {"big": 256, "small": 4}, {},
     ({"big": 256, "small": 44}, 0)),
    # greedy fills the small flavor (the proportions want it) and is stuck at 508; the knapsack finds 512 + 8
    ("knapsack", 520, {"a": 1, "b": 1000}, {"a": 512, "b": 4}, {"a": 1024, "b": 12}, ({"a": 512, "b": 8}, 0)),
    ("bounded by usage", 300, {"x": 512, "y": 32}, {"x": 256, "y": 32}, {"x": 512, "y": 32},
     ({"x": 256, "y": 32}, 12)),
    ("nothing to split", 0, {"x": 1, "y": 1}, {"x": 4, "y": 8}, {}, ({"x": 0, "y": 0}, 0)),
])
def test_whole_split(name: str, total: int, weights: dict[str, float], unit: dict[str, int],
                     room: dict[str, int], want: tuple[dict[str, int], int]) -> None:
    got = whole_split(total, weights, unit, {k: room.get(k) for k in weights})
    assert got == want, name
    parts, left = got
    assert sum(parts.values()) + left == total
    assert all(parts[k] % unit[k] == 0 and parts[k] <= room.get(k, total) for k in parts)


@pytest.mark.parametrize("total", [0, 1, 7, 64, 255, 1001])
def test_whole_split_with_unit_one_is_the_largest_remainder_split(total: int) -> None:
    """GPU flavors (unit 1) split exactly as before: by capacity, largest remainder, ties by name."""
    weights = {"p5": 512.0, "p5-spot": 256.0, "p5en": 256.0, "p5en-spot": 0.0}
    exact = {k: total * w / 1024 for k, w in weights.items()}
    want = {k: int(x) for k, x in exact.items()}
    for k in sorted(weights, key=lambda k: (-(exact[k] - want[k]), k))[: total - sum(want.values())]:
        want[k] += 1
    assert whole_split(total, weights, dict.fromkeys(weights, 1), dict.fromkeys(weights)) == (want, 0)


def roots(v: Validated) -> dict[str, str | None]:
    teams = v.loaded.teams
    assert teams is not None
    parent = {c.name: c.parent for c in teams.cohorts}

    def root(c: str | None) -> str | None:
        while c is not None and parent.get(c):
            c = parent[c]
        return c

    return {t.name: root(t.cohort) for t in teams.teams}


def whole_slice_violations(fs: list[FlavorQuota], unit: dict[tuple[str, str], int]) -> list[str]:
    """The exception of the test below, for one cluster, team and TPU accelerator (empty: none)."""
    total = sum(f.nominal for f in fs)
    borrower = sum(f.used for f in fs) >= total
    bounds = [(unit[(f.cluster, f.flavor)], 0, f.used) if borrower else
              (unit[(f.cluster, f.flavor)], f.used + f.lent, None) for f in fs]
    off = [f"{f.flavor}={f.nominal}" for f in fs if f.nominal % unit[(f.cluster, f.flavor)]]
    idle = [f for f in fs if f.nominal % unit[(f.cluster, f.flavor)] and f.nominal > f.used + f.lent]
    where = f"{fs[0].cluster}/{fs[0].team}/{fs[0].accelerator}"
    if off and whole_split_exists(total, bounds):
        return [f"{where}: {off} are not whole slices, yet a whole-slice split of {total} exists"]
    if len(idle) > 1:
        return [f"{where}: {off}: more than one flavor holds idle quota that is not whole slices"]
    return []


@pytest.mark.parametrize("fleet", ["small", "example"])
def test_tpu_flavor_quotas_are_whole_slices_unless_no_whole_split_exists(fleet: str) -> None:
    """The exception, precisely. Per cluster, team and TPU accelerator with cluster quota N, a flavor's
    nominal may be other than whole slices only if no split of N into whole slices n_f exists with
    0 <= n_f <= used_f (a team that borrows there: used >= N) or n_f >= used_f + lent_f (any other team), and
    then at most one flavor holds such quota beyond what its placed jobs use and cohort-mates borrow
    (used + lent). `lent` is checked too: per cohort tree and flavor, never more than members borrow."""
    v = validated(small() if fleet == "small" else example())
    quotas = render_quotas(v, plan(v))
    unit = {(p.cluster, p.name): p.unit_accelerators for p in v.pools if p.kind == "tpu"}
    root = roots(v)
    borrowed: dict[tuple[str, str | None, str], int] = defaultdict(int)
    lent: dict[tuple[str, str | None, str], int] = defaultdict(int)
    entries: dict[tuple[str, str, str], list[FlavorQuota]] = defaultdict(list)
    for f in quotas:
        borrowed[(f.cluster, root[f.team], f.flavor)] += max(0, f.used - f.nominal)
        lent[(f.cluster, root[f.team], f.flavor)] += f.lent
        assert f.lent == 0 or (f.lending_limit is not None and f.lent <= f.lending_limit), f
        if (f.cluster, f.flavor) in unit:
            entries[(f.cluster, f.team, f.accelerator)].append(f)
    assert all(n <= borrowed[k] for k, n in lent.items()), "lent where nobody borrows"
    exceptions = [k for k, fs in sorted(entries.items()) if any(f.nominal % unit[(f.cluster, f.flavor)] for f in fs)]
    assert [m for fs in entries.values() for m in whole_slice_violations(fs, unit)] == []
    assert len(entries) >= (40 if fleet == "example" else 1)
    if fleet == "example":
        assert 0 < len(exceptions) < len(entries)     # both branches are exercised


def test_the_whole_slice_check_can_fail() -> None:
    """What the review found (gke-use5 before the fix): evals held 20, 2 and 1 chips of its 23 in v6e 16x16,
    4x4 and 2x2, rl 1 chip of a 4x4; and a split that is off although a whole one exists."""
    unit = {("c", "v6e-16x16"): 256, ("c", "v6e-4x4"): 16, ("c", "v6e-2x2"): 4}

    def fq(team: str, flavor: str, nominal: int, used: int = 0, lent: int = 0) -> FlavorQuota:
        return FlavorQuota("c", team, "tpu-v6e", flavor, nominal, 0, 0, used, lent)

    old = [fq("evals", "v6e-16x16", 20), fq("evals", "v6e-4x4", 2), fq("evals", "v6e-2x2", 1)]
    assert "idle quota" in whole_slice_violations(old, unit)[0]
    assert whole_slice_violations([fq("evals", "v6e-4x4", 16), fq("evals", "v6e-2x2", 7)], unit) == []
    off = [fq("rl", "v6e-4x4", 1), fq("rl", "v6e-2x2", 11)]                 # 12 = three 2x2 slices
    assert "yet a whole-slice split of 12 exists" in whole_slice_violations(off, unit)[0]
    busy = [fq("rl", "v6e-4x4", 10, used=16), fq("rl", "v6e-2x2", 2, used=4)]   # borrows: all of it used
    assert whole_slice_violations(busy, unit) == []
    assert whole_split_exists(288, [(256, 0, 512), (32, 0, 32)]) is True
    assert whole_split_exists(300, [(256, 0, 512), (32, 0, 32)]) is False
    assert whole_split_exists(40, [(16, 7, None), (4, 0, 0)]) is False      # 7 rounds up to 16; 24 is left


# --- cpu and memory --------------------------------------------------------------------------------------


def test_unknown_node_ceiling_stays_far_above_every_known_machine() -> None:
    mts = load_catalog().machine_types.values()
    assert 4 * max(m.vcpus or 0 for m in mts) <= UNKNOWN_NODE_CPUS
    assert 4 * max(m.memory_gib or 0 for m in mts) <= UNKNOWN_NODE_MEMORY_GIB


def test_pods_with_defaulted_requests_fit_every_flavor() -> None:
    """A namespace LimitRange that gives every pod 1 cpu and 4Gi: with a pod on every node of every pool at
    max, on top of what placed jobs request, each flavor's cpu/memory quota still admits them. Before, the
    flavors of machines the catalog does not know (TPU v6e) had only the placed jobs' requests (often 0)."""
    files = rendered(example())
    v = validated(example())
    nodes = {(p.cluster, p.name): p.max * p.nodes_per_unit for p in v.pools}
    requested: dict[tuple[str, str, str], float] = defaultdict(float)
    for path, text in sorted(files.items()):
        if "/jobsets/" not in path and "/services/" not in path:
            continue
        for obj in docs(text):
            for pod, pods in ([] if obj["kind"] == "Service" else workload_pods(obj)):
                flavor = pod["nodeSelector"].get("fleet.dev/pool") or pod["nodeSelector"].get(
                    "cloud.google.com/gke-nodepool") or pod["nodeSelector"].get("eks.amazonaws.com/nodegroup")
                req = pod["containers"][0]["resources"]["requests"]
                requested[(path.split("/")[0], flavor, "cpu")] += pods * float(req.get("cpu", 0))
                requested[(path.split("/")[0], flavor, "memory")] += pods * float(str(req.get("memory", "0Gi"))[:-2])
    unknown = 0
    for path, text in sorted(files.items()):
        if not path.endswith("/kueue.yaml"):
            continue
        cluster = path.split("/")[0]
        for cq in (d for d in docs(text) if d["kind"] == "ClusterQueue"):
            for rg in cq["spec"]["resourceGroups"]:
                assert rg["coveredResources"][:2] == ["cpu", "memory"]
                for fl in rg["flavors"]:
                    q = {r["name"]: r["nominalQuota"] for r in fl["resources"]}
                    n = nodes[(cluster, fl["name"])]
                    assert float(q["cpu"]) >= requested[(cluster, fl["name"], "cpu")] + n * 1, (cluster, fl)
                    assert float(q["memory"][:-2]) >= requested[(cluster, fl["name"], "memory")] + n * 4, fl
                    unknown += fl["name"].startswith("v6e")
    assert unknown > 0


# --- stable per-cluster quotas (plan/quotasplit.py) ----------------------------------------------------------

STABLE_TEAMS = """\
admins: ["@org/admins"]
cohorts: [{name: org}]
teams:
  - {name: alpha, owners: ["@org/alpha"], cohort: org, quota: {nvidia-h100-80gb: {nominal: ALPHA}}}
  - {name: lang, owners: ["@org/lang"], cohort: org, quota: {nvidia-h100-80gb: {nominal: 32}}}
  - {name: vision, owners: ["@org/vision"], cohort: org, quota: {nvidia-h100-80gb: {nominal: 16}}}
"""


def h100_cluster(name: str, region: str, nodes: int, price: float) -> str:
    return (f"name: {name}\nprovider: gcp\nregion: {region}\nkubernetes: {{cluster: {name}}}\npools:\n"
            f"  - {{name: h100, accelerator: nvidia-h100-80gb, machine_type: a3-highgpu-8g, max: {nodes}, "
            f"hourly_usd: {price}}}\n")


def gpu_job(name: str, team: str, count: int, priority: str = "research") -> str:
    return f"name: {name}\nteam: {team}\npriority: {priority}\noptions:\n  - {{accelerator: nvidia-h100-80gb, " \
           f"count: {count}}}\nimage: img:1\n"


def two_clusters(jobs: dict[str, str], *, alpha: int = 4, cheap_nodes: int = 2) -> dict[str, bytes]:
    """gke-a ($8 a node, `cheap_nodes` nodes) and gke-b ($10, 4 nodes); teams alpha, lang and vision in one
    cohort; vision borrows when its jobs need more than 16 GPUs."""
    files: dict[str, str | bytes | None] = {
        "jobs/vision/train.yaml": None, "fleet/clusters/onprem-sjc.yaml": None,
        "policies/teams.yaml": STABLE_TEAMS.replace("ALPHA", str(alpha)),
        "fleet/clusters/gke-usc1.yaml": None,
        "fleet/clusters/gke-a.yaml": h100_cluster("gke-a", "us-central1", cheap_nodes, 8.0),
        "fleet/clusters/gke-b.yaml": h100_cluster("gke-b", "us-east5", 4, 10.0)}
    files.update({f"jobs/{k}.yaml": v for k, v in jobs.items()})
    return with_files(files)


def quota_values(files: dict[str, bytes], base: Plan | None = None) -> tuple[dict[tuple[str, ...], object], Plan]:
    """Every ClusterQueue quota Fleet renders (per cluster, team and flavor: nominal, borrowing and lending
    limits) and every per-cluster quota of the plan, as one mapping; and the plan."""
    v = validated(files)
    p = plan(v, base)
    out: dict[tuple[str, ...], object] = {("flavor", f.cluster, f.team, f.flavor): (
        f.nominal, f.borrowing_limit, f.lending_limit) for f in render_quotas(v, p)}
    out.update({("cluster", q.cluster, q.team, q.accelerator): (q.nominal, q.borrowing_limit, q.lending_limit)
                for q in p.quotas})
    return out, p


def changed(a: dict[tuple[str, ...], object], b: dict[tuple[str, ...], object]) -> list[tuple[str, ...]]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def test_work_within_nominal_is_within_nominal_in_its_cluster_queue() -> None:
    # vision (nominal 16) runs a production job of 8 GPUs on gke-a and a research job of 16 on gke-b: the
    # plan has the production job within nominal and 8 GPUs of the research job borrowed. Split in proportion
    # to use (5 and 11), the production job sat on 3 borrowed GPUs in gke-a, where Kueue could reclaim it.
    files = two_clusters({"vision/serve": gpu_job("serve", "vision", 8, "production"),
                          "vision/sweep": gpu_job("sweep", "vision", 16)}, cheap_nodes=1)
    q, p = quota_values(files)
    assert {x.job: x.cluster for x in p.placements} == {"vision/serve": "gke-a", "vision/sweep": "gke-b"}
    assert q[("cluster", "gke-a", "vision", H100)] == (8, None, None)
    assert q[("flavor", "gke-a", "vision", "h100")] == (8, None, None)
    assert q[("flavor", "gke-b", "vision", "h100")] == (8, None, None)   # borrows the other 8 of the sweep
    lent = sum(f.lent for f in render_quotas(validated(files), p) if f.cluster == "gke-b")
    assert lent == 8


def test_adding_a_job_within_nominal_rewrites_no_quota() -> None:
    # lang has 32 GPUs of nominal quota and uses 4 on gke-a; a second 2-GPU job there still fits the share of
    # gke-a that its quota gets anyway. No ClusterQueue needs to change, lang's or anyone else's (vision
    # borrows 8 on gke-b throughout). Before, lang's unused quota was re-spread over both clusters.
    jobs = {"lang/a": gpu_job("a", "lang", 4), "vision/big": gpu_job("big", "vision", 24)}
    before, base = quota_values(two_clusters(jobs))
    after, p = quota_values(two_clusters({**jobs, "lang/b": gpu_job("b", "lang", 2)}), base)
    assert {x.job: x.cluster for x in p.placements} == {"lang/a": "gke-a", "lang/b": "gke-a", "vision/big": "gke-b"}
    assert changed(before, after) == []


def test_raising_one_teams_quota_rewrites_only_that_teams_quotas() -> None:
    # alpha's quota goes from 4 to 24 GPUs: alpha can now lend vision all it borrows on gke-b, where lang lent
    # part of it before. lang's quotas still hold everything the plan needs, so they stay; before, lang's
    # lent quota was re-steered and its ClusterQueues rewritten in both clusters.
    jobs = {"lang/a": gpu_job("a", "lang", 4), "vision/big": gpu_job("big", "vision", 24)}
    before, base = quota_values(two_clusters(jobs, alpha=4))
    after, _ = quota_values(two_clusters(jobs, alpha=24), base)
    moved = changed(before, after)
    assert moved and {k[2] for k in moved} == {"alpha"}


@pytest.mark.parametrize("fleet", ["small", "example"])
def test_no_flavor_borrows_for_work_of_a_class_the_nominal_covers(fleet: str) -> None:
    """Per team and accelerator, the jobs of the highest classes whose work together fits the team's nominal
    quota (whole classes, highest first) are within nominal in every flavor they run on."""
    v = validated(small() if fleet == "small" else example())
    p = plan(v)
    assert v.loaded.priorities is not None
    value = {c.name: c.value for c in v.loaded.priorities.classes}
    prio = {j.id: value[j.priority or v.loaded.priorities.default] for j in v.loaded.jobs}
    acc = {(x.cluster, x.name): x.accelerator for x in v.pools}
    nominal = {(t.name, a): q.nominal for t in v.loaded.teams.teams for a, q in t.quota.items()} \
        if v.loaded.teams else {}
    work: dict[tuple[str, str], dict[int, list[tuple[str, str, int]]]] = defaultdict(lambda: defaultdict(list))
    for x in p.placements:
        team = x.job.split("/")[0]
        work[(team, acc[(x.cluster, x.pool)])][prio[x.job]].append((x.cluster, x.pool, len(x.units) *
                                                                     x.accelerators_per_unit))
    flavors = {(f.cluster, f.team, f.flavor): f.nominal for f in render_quotas(v, p)}
    checked = 0
    for (team, a), by_class in sorted(work.items()):
        covered: dict[tuple[str, str], int] = defaultdict(int)
        total = 0
        for level in sorted(by_class, reverse=True):
            total += sum(n for _, _, n in by_class[level])
            if total > nominal.get((team, a), 0):
                break
            for cluster, pool, n in by_class[level]:
                covered[(cluster, pool)] += n
        for (cluster, pool), n in covered.items():
            assert flavors[(cluster, team, pool)] >= n, (team, cluster, pool, n)
            checked += 1
    assert checked >= (20 if fleet == "example" else 1)
