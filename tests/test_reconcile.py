"""`fleet reconcile` end to end: whole cycles (observe, plan, decide, elect, act, record) against local Kubernetes
API servers (tests/kube_api.py), with the clock in the test's hands (no sleeping) and the Pulumi stacks run by an
injected stack runner that records the specs it is given."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kube_api import KubeCluster, Request, clusters, write_kubeconfig
from kube_objects import T0, job_objects, node

from reconciler.apply.pool_guard import Preview, Step
from reconciler.reconcile.loop import Config, CycleReport, Reconciler

from builders import PRIORITIES, TEAMS

START = T0.replace(tzinfo=UTC) + timedelta(minutes=60)


def cluster_yaml(name: str, status: str = "active") -> str:
    return (f"name: {name}\nprovider: gcp\nregion: us-central1\nzone: us-central1-a\nstatus: {status}\n"
            f"kubernetes: {{cluster: ml-{name}, context: ctx-{name}}}\n"
            "pools:\n  - {name: v5p, accelerator: tpu-v5p, topology: 4x4x4, max: 4}\n")


def job_yaml(name: str, hours: float = 24) -> str:
    return (f"name: {name}\nteam: vision\npriority: production\noptions:\n"
            "  - {accelerator: tpu-v5p, topology: 4x4x4}\n"
            f"duration_hours: {hours}\ncheckpoint_minutes: 30\nimage: us-docker.pkg.dev/ml/train:1\n"
            "command: [python, -m, train]\n")


PLACEMENT = """\
max_migrations_per_plan: 5
reconcile:
  interval_seconds: 60
  cluster_lost_after_minutes: 15
  node_failed_after_minutes: 10
  scale_down_after_minutes: 30
  lease_cluster: mgmt
"""


class StackRunner:
    """The stack runner the loop is given instead of Pulumi: records every spec it is asked to bring up."""

    def __init__(self) -> None:
        self.ups: list[dict[str, Any]] = []
        self.steps: dict[str, tuple[Step, ...]] = {}    # what each stack's preview finds, by stack name

    def up(self, spec: dict[str, Any]) -> dict[str, int]:
        self.ups.append(spec)
        return {"update": 1}

    def preview(self, spec: dict[str, Any]) -> dict[str, int]:
        return {}

    def preview_steps(self, spec: dict[str, Any]) -> Preview:
        return Preview({}, self.steps.get(spec["stack"], ()))

    def slices(self, stack: str) -> list[int]:
        spec = [s for s in self.ups if s["stack"] == stack][-1]
        return sorted(n["slice"] for n in spec["node_pools"])


class Rig:
    """A fleet repository, one API server per cluster (a, b and the Lease's mgmt), and the test's clock."""

    def __init__(self, tmp: Path, servers: dict[str, KubeCluster], files: dict[str, str]) -> None:
        self.repo, self.servers, self.now = tmp / "repo", servers, START
        for path, text in files.items():
            (self.repo / path).parent.mkdir(parents=True, exist_ok=True)
            (self.repo / path).write_text(text)
        self.kubeconfig = write_kubeconfig(tmp / "kubeconfig", {f"ctx-{n}": c.url for n, c in servers.items()})
        self.runner = StackRunner()
        self.lines: list[str] = []
        self.log = tmp / "actions.jsonl"

    def reconciler(self, identity: str = "r1", *, skew: timedelta = timedelta(0), **config: Any) -> Reconciler:
        """A reconciler whose wall clock is the test's `now` plus `skew` (a machine whose clock is off), and whose
        monotonic clock counts the test's seconds from an origin of its own (as another process's would)."""
        cfg = Config(**{"repo": self.repo, "kubeconfig": str(self.kubeconfig), "once": True, "identity": identity,
                        "log_file": self.log, **config})
        origin = 1000.0 * len(identity)
        return Reconciler(cfg, clock=lambda: self.now + skew, say=self.lines.append, engine=lambda: self.runner,
                          ticks=lambda: origin + (self.now - START).total_seconds())

    def at(self, minutes: float) -> None:
        self.now = START + timedelta(minutes=minutes)

    def writes(self, name: str | None = None) -> list[Request]:
        """Requests that change something (not the Lease's), on one cluster or all."""
        chosen = [self.servers[name]] if name else list(self.servers.values())
        return [r for c in chosen for r in c.requests if r.method != "GET" and "/leases" not in r.path]

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def actions(self, status: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["event"] == "action" and (status is None or r["status"] == status)]


def jobs_and_pools(report: CycleReport) -> list[Any]:
    """The results of a cycle less its Kueue updates (a fresh reconciler applies every cluster's quotas once)."""
    return [r for r in report.results if r.action.kind != "kueue"]


def slice_nodes(cluster: KubeCluster, *units: int, ready: bool = True) -> None:
    cluster.add(*[node(f"v5p-s{u}-h{h}", node_pool=f"v5p-s{u}", ready=ready) for u in units for h in range(2)])


def running(team: str, job: str, units: str = "0", **kw: Any) -> list[dict[str, Any]]:
    objs = job_objects(team, job, "v5p", **kw)
    objs[0]["metadata"]["annotations"] = {"fleet.dev/units": units}
    return objs


def fleet_files(*, a_status: str = "active", jobs: tuple[str, ...] = ("train",), placement: str = PLACEMENT,
                ) -> dict[str, str]:
    files = {"policies/teams.yaml": TEAMS, "policies/priorities.yaml": PRIORITIES,
             "policies/placement.yaml": placement,
             "fleet/clusters/a.yaml": cluster_yaml("a", a_status), "fleet/clusters/b.yaml": cluster_yaml("b"),
             "fleet/clusters/mgmt.yaml": "name: mgmt\nprovider: gcp\nregion: us-central1\n"
                                         "kubernetes: {cluster: mgmt, context: ctx-mgmt}\n"}
    for j in jobs:
        files[f"jobs/vision/{j}.yaml"] = job_yaml(j)
    return files


@pytest.fixture
def servers() -> Iterator[dict[str, KubeCluster]]:
    with clusters("a", "b", "mgmt") as cs:
        yield cs


def kueue_admits(c: KubeCluster, job: str, at_minutes: float) -> None:
    """What Kueue does to a JobSet the reconciler created: a running Workload owned by it."""
    js = c.objects["jobsets"][("vision", job)]
    wl = job_objects("vision", job, js["metadata"]["labels"]["fleet.dev/pool"], admitted=at_minutes)[1]
    wl["metadata"]["ownerReferences"][0]["uid"] = js["metadata"].get("uid", f"uid-vision-{job}")
    c.add(wl)


def test_finished_job_releases_its_unit_after_the_idle_window_not_before(tmp_path: Path,
                                                                         servers: dict[str, KubeCluster]) -> None:
    a = servers["a"]
    slice_nodes(a, 0)
    a.add(*running("vision", "train"))
    rig = Rig(tmp_path, servers, fleet_files())
    loop = rig.reconciler()
    first = loop.cycle()
    assert [r.action.kind for r in first.results] == ["kueue"] * 3        # Kueue once (a fresh memory), the
    assert [s["stack"] for s in rig.runner.ups] == ["a-kueue", "b-kueue", "mgmt-kueue"]   # job runs where it runs
    for obj in job_objects("vision", "train", "v5p", phase="succeeded", ended=65):
        obj["metadata"].setdefault("annotations", {})["fleet.dev/units"] = "0"
        a.add(obj)
    rig.at(10)
    assert loop.cycle().results == ()                                     # finished: idle from now
    rig.at(39)
    assert loop.cycle().results == ()                                     # 29 minutes idle: kept
    assert [s for s in rig.runner.ups if s["layer"] == "infra"] == []
    rig.at(40)
    report = loop.cycle()
    (release,) = report.results
    assert (release.action.kind, release.action.cluster, release.action.current, release.action.target,
            release.status) == ("resize", "a", 1, 0, "done")
    assert rig.runner.slices("a-infra") == []                             # the stack spec has no slice left
    assert "idle since" in rig.actions("done")[-1]["why"]
    assert rig.writes("a") == []                                          # a release touches no job


def test_a_notready_tpu_slice_moves_its_job_within_one_cycle_with_lost_work(tmp_path: Path,
                                                                           servers: dict[str, KubeCluster]) -> None:
    a = servers["a"]
    slice_nodes(a, 1)
    a.add(node("v5p-s0-h0", node_pool="v5p-s0", ready=False), node("v5p-s0-h1", node_pool="v5p-s0"))
    a.add(*running("vision", "train", admitted=0))          # running for 60 min, on slice 0; NotReady since ts(30)
    rig = Rig(tmp_path, servers, fleet_files())
    loop = rig.reconciler()
    rig.at(-21)                                              # NotReady for 9 minutes: not failed yet
    assert [r.action.kind for r in loop.cycle().results] == ["kueue"] * 3
    rig.at(0)                                                # 30 minutes: the slice is failed
    report = loop.cycle()
    (move,) = [r for r in report.results if r.action.kind == "move"]
    assert move.status == "done", move.message
    assert (move.action.from_cluster, move.action.cluster) == ("a", "a") and move.action.units != (0,)
    # 58 min ran (PodsReady at minute 2), checkpoints every 30: 28 min of 64 accelerators lost
    assert move.action.lost_minutes == 28 and move.action.lost_accelerator_hours == 29.867
    [record] = [r for r in rig.actions("done") if r["what"] == "move"]
    assert record["lost_accelerator_hours"] == 29.867 and "failed" in record["why"]
    methods = [(r.method, r.path.rsplit("/", 1)[-1]) for r in rig.writes("a") if "/jobsets" in r.path]
    assert methods == [("DELETE", "train"), ("PATCH", "train")]         # old copy gone first, new one applied
    js = a.objects["jobsets"][("vision", "train")]
    assert js["metadata"]["annotations"]["fleet.dev/units"] == ",".join(map(str, move.action.units))
    events = list(a.objects["events"].values())
    assert events and events[0]["regarding"]["name"] == "train" and events[0]["reportingController"] == \
        "fleet.dev/reconciler"


def test_lost_cluster_fails_over_after_the_threshold_and_the_stale_copy_goes_when_it_heals(
        tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    a, b = servers["a"], servers["b"]
    slice_nodes(a, 0)
    slice_nodes(b, 0)
    a.add(*running("vision", "train"))
    rig = Rig(tmp_path, servers, fleet_files())
    loop = rig.reconciler()
    assert jobs_and_pools(loop.cycle()) == []
    a.faults["*"] = 500                                      # a stops answering
    rig.at(1)
    assert jobs_and_pools(loop.cycle()) == []
    rig.at(15)                                               # 14 minutes: not lost yet, nothing moves
    assert jobs_and_pools(loop.cycle()) == [] and rig.writes("b") == []
    rig.at(16)                                               # 15 minutes: lost; its job starts on b
    report = loop.cycle()
    assert [(r.action.kind, r.action.cluster, r.status) for r in jobs_and_pools(report)] == [("start", "b", "done")]
    assert "a" in jobs_and_pools(report)[0].action.reason and ("vision", "train") in b.objects["jobsets"]
    kueue_admits(b, "train", 78)
    del a.faults["*"]                                        # the partition heals: a still runs its copy
    rig.at(17)
    report = loop.cycle()
    assert [(r.action.kind, r.action.from_cluster, r.status) for r in jobs_and_pools(report)] == [("stop", "a", "done")]
    assert "fencing" in jobs_and_pools(report)[0].action.reason
    assert ("vision", "train") not in a.objects["jobsets"] and ("vision", "train") in b.objects["jobsets"]
    rig.at(18)
    assert jobs_and_pools(loop.cycle()) == []                        # one copy, where it moved


def test_only_the_lease_holder_writes(tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    slice_nodes(servers["a"], 0)
    rig = Rig(tmp_path, servers, fleet_files())
    one, two = rig.reconciler("one"), rig.reconciler("two")
    first = one.cycle()
    assert first.leader and first.writes and ("vision", "train") in {
        k for s in servers.values() for k in s.objects["jobsets"]}
    written = len(rig.writes())
    second = two.cycle()
    assert not second.leader and not second.writes and len(rig.writes()) == written
    assert "held by one" in " ".join(rig.lines)
    lease = servers["mgmt"].objects["leases"][("fleet-system", "fleet-reconciler")]
    assert lease["spec"]["holderIdentity"] == "one"
    rig.at(3)                                                # one stopped renewing: 150 s later two takes over
    assert two.cycle().leader
    assert servers["mgmt"].objects["leases"][("fleet-system", "fleet-reconciler")]["spec"]["holderIdentity"] == "two"
    assert not one.cycle().leader


def test_a_lease_update_that_loses_the_race_writes_nothing(tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    from reconciler.reconcile.kubeio import Client
    from reconciler.reconcile.lease import acquire

    rig = Rig(tmp_path, servers, fleet_files())
    client = Client("mgmt", "ctx-mgmt", str(rig.kubeconfig))
    clock = [0.0]
    assert acquire(client, "one", START, 150, ticks=lambda: clock[0]).leader
    stale = servers["mgmt"].objects["leases"][("fleet-system", "fleet-reconciler")]
    held = acquire(client, "two", START, 150, ticks=lambda: clock[0])
    assert not held.leader
    clock[0] = 300.0                                         # expired: both try to take it with what they read
    later = START + timedelta(minutes=5)
    assert acquire(client, "two", later, 150, ticks=lambda: clock[0], seen=held.seen).leader
    put = client.request("PUT", "/apis/coordination.k8s.io/v1/namespaces/fleet-system/leases/fleet-reconciler",
                         {**stale, "spec": {**stale["spec"], "holderIdentity": "three"}})
    assert put.status == 409                                 # the old resourceVersion loses
    assert servers["mgmt"].objects["leases"][("fleet-system", "fleet-reconciler")]["spec"]["holderIdentity"] == "two"


@pytest.mark.parametrize("how", ["flag", "placement"])
def test_paused_writes_nothing(tmp_path: Path, servers: dict[str, KubeCluster], how: str) -> None:
    slice_nodes(servers["a"], 0, 1)
    servers["b"].add(*running("vision", "gone"))                   # a job whose file is gone: would be stopped
    placement = PLACEMENT + ("  paused: true\n" if how == "placement" else "")
    rig = Rig(tmp_path, servers, fleet_files(placement=placement))
    report = rig.reconciler(paused=how == "flag").cycle()
    assert report.decision is not None and {a.kind for a in report.decision.actions} >= {"start", "stop"}
    assert not report.writes and report.results == ()
    assert [r for s in servers.values() for r in s.requests if r.method != "GET"] == []   # not even the Lease
    assert all(r["status"] == "paused" for r in rig.actions()) and rig.actions()


def test_no_request_ever_sets_suspend_on_an_admitted_jobset(tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    """Every apply the reconciler sends in a run with a start, a failover and a heal goes to a JobSet that does
    not exist yet; the server's guard would record any apply carrying spec.suspend to an admitted one."""
    a, b = servers["a"], servers["b"]
    slice_nodes(a, 0, 1)
    slice_nodes(b, 0)
    a.add(*running("vision", "train"))
    rig = Rig(tmp_path, servers, fleet_files(jobs=("train", "eval")))
    loop = rig.reconciler()
    loop.cycle()
    for c in (a, b):
        if any(name == "eval" for _, name in c.objects["jobsets"]):
            kueue_admits(c, "eval", 61)
    a.faults["*"] = 500
    for minute in (1, 16, 17):
        rig.at(minute)
        loop.cycle()
        if minute == 16:
            del a.faults["*"]
    applies = [r for c in servers.values() for r in c.requests if r.method == "PATCH" and "/jobsets/" in r.path]
    assert applies and all(c.suspend_violations == [] for c in servers.values())
    # the guard works: an apply of the rendered (suspended) JobSet over the admitted one is caught
    body = next(r.body for r in applies if r.path.endswith("/train"))
    target = next(c for c in servers.values() if ("vision", "train") in c.objects["jobsets"])
    kueue_admits(target, "train", 80)
    from reconciler.reconcile.kubeio import Client
    name = next(n for n, c in servers.items() if c is target)
    Client(name, f"ctx-{name}", str(rig.kubeconfig)).request(
        "PATCH", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/vision/jobsets/train", json.dumps(body),
        query=(("fieldManager", "fleet"),), content_type="application/apply-patch+yaml")
    assert target.suspend_violations == ["vision/train"]


def test_a_cluster_failing_mid_cycle_leaves_a_consistent_state_and_a_clear_line(
        tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    """A drain moves the job from a to b; a's API fails between the observation and the delete: nothing is
    started on b (it would run twice), the log says what failed and why the move was not made."""
    a, b = servers["a"], servers["b"]
    slice_nodes(a, 0)
    slice_nodes(b, 0)
    a.add(*running("vision", "train"))
    rig = Rig(tmp_path, servers, fleet_files(a_status="draining"))
    loop = rig.reconciler()
    from reconciler.observe.fleetwide import observe_repo

    def observe_then_fail(files: Any, kubeconfig: str | None, now: datetime) -> Any:
        snap = observe_repo(files, kubeconfig, now)
        a.faults["jobsets"] = 500
        return snap

    loop.observer = observe_then_fail
    report = loop.cycle()
    (move,) = [r for r in report.results if r.action.kind == "move"]
    assert move.status == "failed" and "HTTP 500" in move.message and "none was started on b" in move.message
    assert ("vision", "train") in a.objects["jobsets"] and ("vision", "train") not in b.objects["jobsets"]
    assert [r for r in rig.writes("b") if "/jobsets" in r.path] == []
    assert any(line.startswith("  FAILED move vision/train: a/v5p -> b/v5p") for line in rig.lines)
    assert any("hint:" in line for line in rig.lines)
    failed = rig.actions("failed")
    assert failed and failed[0]["what"] == "move" and failed[0]["commit"] and failed[0]["observed_at"]
    loop.observer = None
    del a.faults["jobsets"]
    rig.at(1)
    again = loop.cycle()                                   # the next cycle finishes the drain
    assert [(r.action.kind, r.status) for r in again.results if r.action.kind == "move"] == [("move", "done")]
    assert ("vision", "train") not in a.objects["jobsets"] and ("vision", "train") in b.objects["jobsets"]


def test_every_action_is_a_json_line_with_what_where_why_commit_and_observation(
        tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    slice_nodes(servers["a"], 0)
    rig = Rig(tmp_path, servers, fleet_files())
    report: CycleReport = rig.reconciler().cycle()
    assert report.results
    for rec in rig.actions():
        assert {"what", "where", "why", "commit", "observed_at", "time", "status"} <= set(rec)
    cycle = [r for r in rig.records() if r["event"] == "cycle"]
    assert cycle and cycle[0]["leader"] is True


def test_once_dry_run_on_the_example_prints_readable_actions(tmp_path: Path) -> None:
    """The example repository against local servers (empty clusters): every job is a start, every pool it needs
    grows; nothing is written, and the output reads as sentences."""
    from click.testing import CliRunner

    from reconciler.cli import cli

    root = Path(__file__).resolve().parents[1]
    contexts = ["gke_ml-org-prod_europe-west4_ml-euw4", "gke_ml-org-prod_us-central1_ml-usc1",
                "gke_ml-org-prod_us-east4_ml-use4", "gke_ml-org-prod_us-east5_ml-use5", "sjc-ml-admin"]
    with clusters(*[f"c{i}" for i in range(len(contexts))]) as cs:
        kc = write_kubeconfig(tmp_path / "kubeconfig", {ctx: cs[f"c{i}"].url for i, ctx in enumerate(contexts)})
        result = CliRunner().invoke(cli, ["reconcile", "--once", "--dry-run", "--repo", str(root)],
                                    env={"KUBECONFIG": str(kc), "FLEET_NOW": "2026-11-23T08:00:00+00:00"})
        writes = [r for c in cs.values() for r in c.requests if r.method != "GET"]
    out = result.output
    assert result.exit_code == 0, out
    assert writes == []
    assert "dry-run: nothing written" in out and "eks-use1" in out       # no context: unreachable, said so
    starts = [line for line in out.splitlines() if line.startswith("  [dry-run] start ")]
    assert len(starts) > 10 and all(": " in line for line in starts)
    assert any(line.startswith("  [dry-run] resize ") and "->" in line for line in out.splitlines())
    # slurm-sjc (no token here) was never read: jobs that may run there (an H100 option) wait; TPU jobs start
    assert "wait this cycle: slurm-sjc cannot be read and this reconciler never read it" in out
    assert "start multimodal/video-diffusion-train on gke-euw4" in out and "start foundation/atlas-70b" not in out


def test_continuous_loop_without_a_lease_is_refused(tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    from reconciler.problems import UsageError

    rig = Rig(tmp_path, servers, fleet_files(placement="max_migrations_per_plan: 5\n"))
    loop = rig.reconciler(once=False)
    with pytest.raises(UsageError, match="lease_cluster"):
        loop.cycle()
    assert rig.writes() == []


def test_the_loop_counts_its_cycles_actions_and_lost_work_in_the_metrics(tmp_path: Path,
                                                                        servers: dict[str, KubeCluster]) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from reconciler.observability.metrics import FleetMetrics

    a = servers["a"]
    slice_nodes(a, 1)
    a.add(node("v5p-s0-h0", node_pool="v5p-s0", ready=False), node("v5p-s0-h1", node_pool="v5p-s0"))
    a.add(*running("vision", "train", admitted=0))
    rig = Rig(tmp_path, servers, fleet_files())
    metrics = FleetMetrics()
    loop = rig.reconciler()
    loop.metrics = metrics
    loop.cycle()                                            # the slice failed 30 minutes ago: the job moves
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(metrics.exposition()) for s in f.samples}
    assert samples[("fleet_reconcile_cycles_total", (("result", "ok"),))] == 1
    assert samples[("fleet_reconcile_actions_total", (("action", "move"),))] == 1
    assert samples[("fleet_migrations_total", (("priority_class", "production"),))] == 1
    assert samples[("fleet_lost_accelerator_hours_total", (("priority_class", "production"),))] == 29.867


def test_the_loop_runs_cycle_after_cycle_an_interval_apart_and_survives_a_failed_one(
        tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    slice_nodes(servers["a"], 0)
    rig = Rig(tmp_path, servers, fleet_files())
    loop = rig.reconciler(once=False)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:
            (rig.repo / "policies" / "teams.yaml").unlink()      # the next cycle cannot load the repository
        if len(slept) == 2:
            (rig.repo / "policies" / "teams.yaml").write_text(TEAMS)
        if len(slept) == 3:
            raise KeyboardInterrupt
        rig.at(len(slept))

    with pytest.raises(KeyboardInterrupt):
        loop.run(sleep=sleep)
    assert slept == [60.0, 60.0, 60.0]
    cycles = [r for r in rig.records() if r["event"] in ("cycle", "error")]
    assert [r["event"] for r in cycles] == ["cycle", "error", "cycle"]
    assert "validation error" in cycles[1]["message"]


def test_without_the_pulumi_cli_it_says_so_and_jobs_still_start(tmp_path: Path, servers: dict[str, KubeCluster],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    monkeypatch.setenv("PATH", str(bin_dir))                         # git, and no `pulumi` anywhere
    rig = Rig(tmp_path, servers, fleet_files())
    loop = Reconciler(Config(repo=rig.repo, kubeconfig=str(rig.kubeconfig), once=True, identity="r1",
                             log_file=rig.log), clock=lambda: rig.now, say=rig.lines.append)   # the real engine
    report = loop.cycle()
    assert any(line.startswith("warning: fleet apply needs the Pulumi CLI") for line in rig.lines)
    by_kind = {(r.action.kind, r.status) for r in report.results}
    assert ("resize", "failed") in by_kind and ("start", "done") in by_kind
    resize = next(r for r in report.results if r.action.kind == "resize")
    assert "Pulumi CLI is not on PATH" in resize.message


def test_a_reconciler_that_cannot_renew_the_lease_mid_cycle_writes_nothing_more() -> None:
    from reconciler.reconcile.act import Outcome
    from reconciler.reconcile.decide import Action
    from reconciler.reconcile.lease import LeaseGuard

    calls: list[str] = []

    class Inner:
        def start(self, action: Action) -> Outcome:
            calls.append(action.job or "")
            return Outcome(True)

    renewals = iter([True, False])
    guard = LeaseGuard(Inner(), lambda: next(renewals), every_s=0)
    a = Action(kind="start", cluster="a", job="vision/train", reason="r")
    assert guard.start(a).ok and calls == ["vision/train"]            # renewed: acts
    refused = guard.start(a)                                           # renewal failed: refuses from now on
    assert not refused.ok and "could not renew the Lease" in refused.message and calls == ["vision/train"]
    assert not guard.start(a).ok and calls == ["vision/train"]


def test_the_repository_is_loaded_once_a_cycle_and_reloaded_only_when_a_file_changes(
        tmp_path: Path, servers: dict[str, KubeCluster], monkeypatch: pytest.MonkeyPatch) -> None:
    """Observing and recording completions use the cycle's validated load (not a load each); an unchanged
    repository is not loaded again; a changed file is (its job is planned in that very cycle)."""
    import reconciler.observe.fleetwide as observe_fleetwide
    import reconciler.pipeline as pipeline
    from reconciler.load import load

    loads: list[int] = []

    def counted(files: Any, *cache: Any) -> Any:
        loads.append(len(files))
        return load(files, *cache)

    monkeypatch.setattr(pipeline, "load", counted)
    monkeypatch.setattr(observe_fleetwide, "load", counted)
    slice_nodes(servers["a"], 0, 1)
    rig = Rig(tmp_path, servers, fleet_files())
    loop = rig.reconciler()
    first = loop.cycle()
    assert first.writes and "completions" in first.timings and len(loads) == 1
    assert loop.cycle().decision is not None and len(loads) == 1          # same bytes: the last load reused
    (rig.repo / "jobs/vision/eval.yaml").write_text(job_yaml("eval"))
    rig.at(1)
    third = loop.cycle()
    assert len(loads) == 2 and loads[-1] == loads[0] + 1
    assert third.decision is not None
    assert any(a.job == "vision/eval" for a in third.decision.actions)


def test_a_service_that_left_a_pool_leaves_no_object_behind_and_the_loop_converges(
        tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    """Cluster a still holds `chat-h100` and `chat-old` (an older spread of the service over two pools, one of
    them gone from the files); the plan serves it from a/h100 alone, which render names `chat`. One cycle
    applies `chat` and then deletes the other two, found by their labels; the next cycle has nothing to do."""
    from kube_objects import serving

    a = servers["a"]
    a.add(serving("vision", "chat", "h100", name="chat-h100"), serving("vision", "chat", "old", name="chat-old"))
    files = fleet_files(jobs=())
    files["fleet/clusters/a.yaml"] = cluster_yaml("a").replace(
        "pools:\n", "pools:\n  - {name: h100, accelerator: nvidia-h100-80gb, max: 2}\n")
    files["jobs/vision/chat.yaml"] = ("name: chat\nteam: vision\npriority: production\nkind: inference\noptions:\n"
                                      "  - {accelerator: nvidia-h100-80gb, count: 1}\nreplicas: 1\n"
                                      "image: us-docker.pkg.dev/ml/serve:1\ncommand: [serve]\nport: 8080\n")
    rig = Rig(tmp_path, servers, files)
    loop = rig.reconciler()
    report = loop.cycle()
    (start,) = [r for r in report.results if r.action.job == "vision/chat"]
    assert (start.action.kind, start.action.cluster, start.action.pool, start.status) == ("start", "a", "h100", "done")
    # the old objects serve (2 replicas ready each) until `chat` is ready: nothing is deleted yet
    assert sorted(name for _, name in a.objects["deployments"]) == ["chat", "chat-h100", "chat-old"]
    assert a.objects["deployments"][("vision", "chat")]["metadata"]["labels"]["fleet.dev/pool"] == "h100"
    writes = [(r.method, r.path.rsplit("/", 1)[-1]) for r in rig.writes("a") if "/deployments/" in r.path]
    assert writes == [("PATCH", "chat")]
    rig.at(1)
    assert [r for r in loop.cycle().results if r.action.job == "vision/chat"] == []     # not ready yet: waits
    chat = a.objects["deployments"][("vision", "chat")]
    a.add({**chat, "status": {"replicas": 1, "readyReplicas": 1}})                     # its replica is ready
    rig.at(2)
    (stop,) = [r for r in loop.cycle().results if r.action.job == "vision/chat"]
    assert (stop.action.kind, stop.action.keep, stop.status) == ("stop", ("chat",), "done")
    assert sorted(name for _, name in a.objects["deployments"]) == ["chat"]
    assert ("vision", "chat") in a.objects["services"]
    writes = [(r.method, r.path.rsplit("/", 1)[-1]) for r in rig.writes("a") if "/deployments/" in r.path]
    assert sorted(writes[1:]) == [("DELETE", "chat-h100"), ("DELETE", "chat-old")]
    rig.at(3)
    assert [r for r in loop.cycle().results if r.action.job == "vision/chat"] == []


def test_what_a_cycle_acted_through_is_freed_when_the_cycle_ends_without_the_collector(
        tmp_path: Path, servers: dict[str, KubeCluster], monkeypatch: pytest.MonkeyPatch) -> None:
    """The Lease's guard and the actuator it wraps referred to each other (the actuator's clients ask the guard's
    fence before each request): a reference cycle that held the actuator, its clients and the rendered pool and
    Kueue specs (130,000 objects in a steady 10,000-job cycle) until the collector ran. The guard lets go of the
    actuator once the actions are done, so they are freed as the cycle returns."""
    import gc
    import weakref

    made: list[weakref.ref[Any]] = []
    actuator = Reconciler._actuator

    def kept(self: Reconciler, *args: Any, **kw: Any) -> Any:
        out = actuator(self, *args, **kw)
        made.append(weakref.ref(out))
        return out

    monkeypatch.setattr(Reconciler, "_actuator", kept)
    slice_nodes(servers["a"], 0)
    loop = Rig(tmp_path, servers, fleet_files()).reconciler()
    was = gc.isenabled()
    gc.disable()
    try:
        report = loop._cycle()    # the cycle itself, without the collection that `cycle` runs after it
        assert report.writes and report.results and all(r.status == "done" for r in report.results) and len(made) == 1
        assert made[0]() is None
    finally:
        if was:
            gc.enable()
