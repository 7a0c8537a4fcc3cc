"""`reconcile.decide`: the plan against what runs -> actions (pure; the end-to-end loop is tested in
test_reconcile.py against local API servers). Plans and snapshots are built small, by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kube_objects import T0, job_objects, node, serving

from reconciler.observe.model import ClusterObservation, Snapshot
from reconciler.observe.parse import parse_deployment, parse_jobset, parse_node, parse_workload
from reconciler.plan.types import Cost, Pending, Placement, Plan, PoolPlan, Preemption
from reconciler.reconcile.act import Outcome, execute
from reconciler.reconcile.decide import (
    Action,
    Decision,
    Fence,
    JobFacts,
    Knobs,
    LoopMemory,
    ask_again_at,
    decide,
    lost_clusters,
    pool_targets,
    settle,
)
from reconciler.reconcile.model import Asked

NOW = T0.replace(tzinfo=UTC) + timedelta(minutes=200)
KNOBS = Knobs()


def at(minutes: float) -> datetime:
    return NOW + timedelta(minutes=minutes)


def cluster(name: str, *objs: dict[str, Any], status: str = "ok") -> ClusterObservation:
    if status == "unreachable":
        return ClusterObservation(name=name, status="unreachable")
    return ClusterObservation(
        name=name, status=status,
        jobsets=tuple(parse_jobset(o) for o in objs if o["kind"] == "JobSet"),
        workloads=tuple(parse_workload(o) for o in objs if o["kind"] == "Workload"),
        nodes=tuple(parse_node(o) for o in objs if o["kind"] == "Node"),
        services=tuple(x for o in objs if o["kind"] == "Deployment" and (x := parse_deployment(o)) is not None))


def snap(*clusters: ClusterObservation) -> Snapshot:
    return Snapshot(observed_at=NOW, clusters=tuple(sorted(clusters, key=lambda c: c.name)))


def place(job: str, cl: str, pool: str, units: tuple[int, ...] = (0,), status: str = "kept", reason: str = "",
          apu: int = 16) -> Placement:
    return Placement(job, cl, pool, 0, units, apu, status, 10.0, reason)


def plan(*placements: Placement, pools: tuple[PoolPlan, ...] = (), preempted: tuple[Preemption, ...] = (),
         pending: tuple[Pending, ...] = ()) -> Plan:
    return Plan(tuple(sorted(placements, key=lambda p: p.job)), pending, preempted, pools, (), Cost(0, 0, 0))


def pool(cl: str, name: str, target: int, lo: int = 0, hi: int = 8) -> PoolPlan:
    return PoolPlan(cl, name, lo, hi, target, target, 16, 10.0, 10.0 * target)


def slice_nodes(pool_name: str, *units: int, ready: bool = True) -> list[dict[str, Any]]:
    return [node(f"{pool_name}-s{u}-h0", node_pool=f"{pool_name}-s{u}", ready=ready) for u in units]


def kinds(actions: tuple[Action, ...]) -> list[tuple[str, str | None, str]]:
    return [(a.kind, a.job or a.pool, a.cluster) for a in actions]


FACTS = {"vision/train": JobFacts("training", 30, 10), "vision/eval": JobFacts("training", 30, 1)}


def test_running_job_at_its_place_needs_nothing() -> None:
    s = snap(cluster("a", *job_objects("vision", "train", "v5p"), *slice_nodes("v5p", 0)))
    d = decide(plan(place("vision/train", "a", "v5p"), pools=(pool("a", "v5p", 1),)), s, LoopMemory(), KNOBS, NOW,
               jobs=FACTS)
    assert d.actions == ()


def test_new_job_starts_and_its_pool_grows_first() -> None:
    s = snap(cluster("a"))
    d = decide(plan(place("vision/train", "a", "v5p", (0, 1), status="new"), pools=(pool("a", "v5p", 2),)), s,
               LoopMemory(), KNOBS, NOW, jobs=FACTS)
    assert kinds(d.actions) == [("resize", "v5p", "a"), ("start", "vision/train", "a")]
    assert (d.actions[0].current, d.actions[0].target) == (0, 2)
    assert d.memory.moved["vision/train"].cluster == "a"


def test_idle_unit_released_only_after_the_window() -> None:
    s = snap(cluster("a", *slice_nodes("v5p", 0, 1)))
    p = plan(pools=(pool("a", "v5p", 0),))
    first = decide(p, s, LoopMemory(), KNOBS, NOW, jobs=FACTS)
    assert first.actions == () and set(first.memory.idle_since) == {"a/v5p/0", "a/v5p/1"}
    early = decide(p, s, first.memory, KNOBS, at(29), jobs=FACTS)
    assert early.actions == ()
    ripe = decide(p, s, early.memory, KNOBS, at(30), jobs=FACTS)
    assert kinds(ripe.actions) == [("resize", "v5p", "a")] and ripe.actions[0].target == 0


def test_a_job_arriving_resets_the_idle_clock() -> None:
    """Hysteresis: a unit used again in between is idle afresh afterwards, not counted from before."""
    s = snap(cluster("a", *slice_nodes("v5p", 0)))
    idle = decide(plan(pools=(pool("a", "v5p", 0),)), s, LoopMemory(), KNOBS, NOW, jobs=FACTS)
    used = decide(plan(place("vision/eval", "a", "v5p"), pools=(pool("a", "v5p", 1),)), s, idle.memory, KNOBS,
                  at(20), jobs=FACTS)
    again = decide(plan(pools=(pool("a", "v5p", 0),)), s, used.memory, KNOBS, at(35), jobs=FACTS)
    assert [a.kind for a in again.actions] == [] and again.memory.idle_since["a/v5p/0"] == at(35)


def test_release_is_capped_per_cycle() -> None:
    s = snap(cluster("a", *slice_nodes("v5p", 0, 1, 2, 3)))
    mem = LoopMemory(idle_since={f"a/v5p/{u}": at(-60) for u in range(4)})
    d = decide(plan(pools=(pool("a", "v5p", 0),)), s, mem, Knobs(max_released_units_per_cycle=3), NOW, jobs=FACTS)
    assert [(a.current, a.target) for a in d.actions] == [(4, 1)]


def test_preempted_job_is_stopped_with_the_plans_reason_and_lost_work() -> None:
    s = snap(cluster("a", *job_objects("vision", "eval", "v5p", admitted=150)))
    d = decide(plan(preempted=(Preemption("vision/eval", "vision/train", "needs the slice"),)), s, LoopMemory(),
               KNOBS, NOW, jobs=FACTS)
    (stop,) = d.actions
    assert (stop.kind, stop.from_cluster, stop.job) == ("stop", "a", "vision/eval")
    # running since minute 152 (PodsReady), stopped at 200: 48 min ran, checkpointed at 30, 18 min lost
    assert "preempted by vision/train" in stop.reason and stop.lost_minutes == 18


def test_running_job_the_plan_leaves_pending_is_kept() -> None:
    s = snap(cluster("a", *job_objects("vision", "eval", "v5p")))
    d = decide(plan(pending=(Pending("vision/eval", ("over budget",)),)), s, LoopMemory(), KNOBS, NOW, jobs=FACTS)
    assert d.actions == () and "kept" in d.notes[0]


def test_job_whose_file_is_gone_is_stopped() -> None:
    s = snap(cluster("a", *job_objects("vision", "old", "v5p")))
    d = decide(plan(), s, LoopMemory(), KNOBS, NOW, jobs=FACTS)
    assert kinds(d.actions) == [("stop", "vision/old", "a")] and "jobs/vision/old.yaml" in d.actions[0].reason


def test_succeeded_job_is_never_started_again() -> None:
    s = snap(cluster("a", *job_objects("vision", "train", "v5p", phase="succeeded")), cluster("b"))
    d = decide(plan(place("vision/train", "b", "v5p", status="new")), s, LoopMemory(), KNOBS, NOW, jobs=FACTS)
    assert d.actions == () and "never started again" in d.notes[0]


def test_lost_cluster_after_the_threshold_and_failover_start() -> None:
    s = snap(cluster("a", status="unreachable"), cluster("b"))
    mem = decide(plan(), s, LoopMemory(), KNOBS, NOW).memory
    assert lost_clusters(s, mem, KNOBS, at(14)) == ()
    assert lost_clusters(s, mem, KNOBS, at(15)) == ("a",)
    moved = place("vision/train", "b", "v5p", status="moved", reason="cluster a is lost")
    d = decide(plan(moved), s, mem, KNOBS, at(15), jobs=FACTS)
    assert kinds(d.actions) == [("start", "vision/train", "b")] and d.lost_clusters == ("a",)
    assert d.memory.moved["vision/train"].cluster == "b"


def test_healed_partition_stale_copy_is_stopped_moved_copy_wins() -> None:
    s = snap(cluster("a", *job_objects("vision", "train", "v5p")), cluster("b", *job_objects("vision", "train", "v5p")))
    mem = LoopMemory(moved={"vision/train": Fence(cluster="b", pool="v5p", since=at(-5))})
    d = decide(plan(place("vision/train", "b", "v5p")), s, mem, KNOBS, NOW, jobs=FACTS)
    assert kinds(d.actions) == [("stop", "vision/train", "a")] and "fencing" in d.actions[0].reason


def test_failed_unit_restarts_in_the_same_pool_once() -> None:
    s = snap(cluster("a", *job_objects("vision", "train", "v5p", admitted=100), *slice_nodes("v5p", 0, ready=False),
                     *slice_nodes("v5p", 1)))
    p = plan(place("vision/train", "a", "v5p", (1,), status="moved", reason="slice 0 of a/v5p failed"),
             pools=(pool("a", "v5p", 1),))
    d = decide(p, s, LoopMemory(), KNOBS, NOW, jobs=FACTS)
    (move,) = [a for a in d.actions if a.kind == "move"]
    assert (move.from_cluster, move.cluster, move.units, move.force) == ("a", "a", (1,), True)
    # 98 min ran (PodsReady at 102), checkpoints every 30: 8 min of 16 accelerators lost
    assert move.lost_minutes == 8 and move.lost_accelerator_hours == 2.133
    again = decide(p, s, d.memory, KNOBS, at(1), jobs=FACTS)
    assert [a for a in again.actions if a.kind == "move"] == []


def test_voluntary_moves_limited_shortest_remaining_first_with_eta() -> None:
    objs = [*job_objects("vision", "train", "v5p", admitted=0), *job_objects("vision", "eval", "v5p", admitted=0)]
    s = snap(cluster("a", *objs), cluster("b"))
    p = plan(place("vision/train", "b", "v5p", status="moved", reason="cluster a drains"),
             place("vision/eval", "b", "v5p", (1,), status="moved", reason="cluster a drains"))
    d = decide(p, s, LoopMemory(), Knobs(max_migrations_per_cycle=1), NOW, jobs=FACTS)
    assert kinds(d.actions) == [("move", "vision/eval", "b")]         # 1 h job, not the 10 h one
    (prog,) = d.progress
    assert (prog.cluster, prog.moved, prog.remaining, prog.eta_cycles) == ("a", 1, 1, 1)
    assert "vision/train" not in d.memory.moved


def test_quota_change_updates_kueue_once() -> None:
    from reconciler.plan.types import QuotaPlan
    p = Plan((), (), (), (), (QuotaPlan("a", "vision", "tpu-v5p", 64, None, None),), Cost(0, 0, 0))
    d = decide(p, snap(cluster("a")), LoopMemory(), KNOBS, NOW)
    assert kinds(d.actions) == [("kueue", None, "a")]
    assert decide(p, snap(cluster("a")), d.memory, KNOBS, NOW).actions == ()


def test_a_change_of_the_spot_quota_part_alone_updates_kueue() -> None:
    """A team's `spot:` quota sits in its spot flavors (render/flavor_quota.py), split over clusters where its
    spot-only work runs (`QuotaPlan.spot`): when only that part moves, the cluster's ClusterQueues are stale, so
    the loop updates Kueue there, once."""
    from reconciler.plan.types import QuotaPlan
    before = Plan((), (), (), (), (QuotaPlan("a", "vision", "tpu-v5p", 64, None, None, 8),), Cost(0, 0, 0))
    d = decide(before, snap(cluster("a")), LoopMemory(), KNOBS, NOW)
    after = Plan((), (), (), (), (QuotaPlan("a", "vision", "tpu-v5p", 64, None, None, 16),), Cost(0, 0, 0))
    d2 = decide(after, snap(cluster("a")), d.memory, KNOBS, NOW)
    assert kinds(d2.actions) == [("kueue", None, "a")] and "spot=16" in d2.actions[0].reason
    assert decide(after, snap(cluster("a")), d2.memory, KNOBS, NOW).actions == ()


def test_nothing_on_an_unreachable_cluster() -> None:
    s = snap(cluster("a", status="unreachable"))
    p = plan(place("vision/train", "a", "v5p", status="new"), pools=(pool("a", "v5p", 1),))
    d = decide(p, s, LoopMemory(), KNOBS, NOW, jobs=FACTS)
    assert d.actions == ()


class Recorder:
    def __init__(self, fail: set[str]) -> None:
        self.fail, self.calls = fail, []  # type: ignore[var-annotated]

    def _out(self, what: str, cluster: str) -> Outcome:
        self.calls.append((what, cluster))
        return Outcome(cluster not in self.fail, "500 internal error" if cluster in self.fail else "")

    def resize(self, cluster: str, actions: Any) -> Outcome:
        return self._out("resize", cluster)

    def kueue(self, action: Action) -> Outcome:
        return self._out("kueue", action.cluster)

    def stop(self, action: Action) -> Outcome:
        return self._out("stop", action.from_cluster or "")

    def start(self, action: Action) -> Outcome:
        return self._out("start", action.cluster)

    def move(self, action: Action) -> Outcome:
        return self._out("move", action.from_cluster or "")


def test_a_cluster_failing_mid_cycle_blocks_what_assumes_it_acted() -> None:
    s = snap(cluster("a", *job_objects("vision", "eval", "v5p"), *job_objects("vision", "train", "v5p")),
             cluster("b"))
    p = plan(place("vision/train", "b", "v5p", status="moved", reason="drain"),
             preempted=(Preemption("vision/eval", "x/y", "room"),), pools=(pool("b", "v5p", 1),))
    d = decide(p, s, LoopMemory(), KNOBS, NOW, jobs=FACTS)
    rec = Recorder({"a"})
    results = execute(d, rec)
    assert [(r.action.kind, r.status) for r in results] == [("resize", "done"), ("stop", "failed"),
                                                            ("move", "skipped")]
    assert "cluster a failed earlier" in results[2].message
    mem = settle(LoopMemory(), d.memory, [r.action for r in results if r.status != "done"])
    assert "vision/train" not in mem.moved


def test_pool_targets_keep_idle_units_until_released() -> None:
    s = snap(cluster("a", *slice_nodes("v5p", 0, 1)))
    p = plan(pools=(pool("a", "v5p", 0),))
    d = decide(p, s, LoopMemory(), KNOBS, NOW)
    assert [pp.target for pp in pool_targets(p, d, s).pools] == [2]


def test_one_jobs_manifests_are_what_render_writes_for_it() -> None:
    """The loop builds a start's objects for that job alone (reconcile/manifests.py); they must be the very
    objects `fleet render` writes, for JobSets and services alike."""
    from pathlib import Path

    import yaml

    from reconciler import pipeline
    from reconciler.catalog import load_catalog
    from reconciler.reconcile.manifests import job_manifests
    from reconciler.sources import read_worktree

    catalog = load_catalog()
    v = pipeline.check(read_worktree(Path(__file__).resolve().parents[1]), catalog)
    p = pipeline.plan(v)
    files = pipeline.render(v, p, catalog)
    kinds = set()
    for pl in p.placements:
        team, _, name = pl.job.partition("/")
        if f"{pl.cluster}/slurm/{team}.{name}.json" in files:       # a Slurm cluster's job: no manifests
            continue
        path = next(f for f in (f"{pl.cluster}/jobsets/{team}.{name}.yaml", f"{pl.cluster}/services/{team}.{name}.yaml",
                                f"{pl.cluster}/ray/{team}.{name}.yaml") if f in files)
        group = tuple(x for x in p.placements if (x.job, x.cluster) == (pl.job, pl.cluster))   # a spread service
        assert job_manifests(v, pl, catalog, group) == [d for d in yaml.safe_load_all(files[path]) if d], pl.job
        kinds.add(path.split("/")[1])
    assert kinds == {"jobsets", "services", "ray"}


def test_pool_and_kueue_specs_are_render_s() -> None:
    from pathlib import Path

    from reconciler import pipeline
    from reconciler.catalog import load_catalog
    from reconciler.render import pool_and_kueue_specs
    from reconciler.sources import read_worktree

    catalog = load_catalog()
    v = pipeline.check(read_worktree(Path(__file__).resolve().parents[1]), catalog)
    p = pipeline.plan(v)
    files = pipeline.render(v, p, catalog)
    specs = pool_and_kueue_specs(v, p, catalog, {"gke-use5", "onprem-sjc"})
    assert sorted(specs) == ["stacks/gke-use5-infra.json", "stacks/gke-use5-kueue.json",
                             "stacks/onprem-sjc-infra.json", "stacks/onprem-sjc-kueue.json"]
    assert all(files[k] == text for k, text in specs.items())


def json_native(o: object, seen: set[int], at: str = "$") -> list[str]:
    """Where `o` is not what `json.loads` would give: a type JSON has not, a key that is not a string, a
    dict or list met twice (a stack that changed one would change the other)."""
    if type(o) in (str, int, float, bool, type(None)):
        return []
    if type(o) not in (dict, list):
        return [f"{at}: a {type(o).__name__}"]
    if id(o) in seen:
        return [f"{at}: shared with an earlier place"]
    seen.add(id(o))
    if isinstance(o, list):
        return [bad for i, x in enumerate(o) for bad in json_native(x, seen, f"{at}[{i}]")]
    assert isinstance(o, dict)
    return [bad for k, x in o.items()
            for bad in ([f"{at}: key {k!r}"] if type(k) is not str else json_native(x, seen, f"{at}.{k}"))]


@pytest.mark.parametrize("fleet", ["example", "generated"])
def test_pool_and_kueue_docs_are_the_specs_files_read_back_and_share_nothing(fleet: str) -> None:
    """The specs `fleet reconcile` hands to the stacks are built without a JSON round trip: they must be what
    the round trip would give (JSON's types, string keys, equal to render's files) and share no dict or list
    (the TPU slices of a pool once shared their labels and taints)."""
    import json
    import sys
    from pathlib import Path

    from reconciler import pipeline
    from reconciler.catalog import load_catalog
    from reconciler.render import pool_and_kueue_docs
    from reconciler.sources import read_worktree

    root = Path(__file__).resolve().parents[1]
    if fleet == "example":
        files = read_worktree(root)
    else:
        sys.path.insert(0, str(root / "bench"))
        from generate import generate

        files = {k: t.encode() for k, t in generate(clusters=12, pools=80, teams=8, jobs=600, seed=5).items()}
    catalog = load_catalog()
    v = pipeline.check(files, catalog)
    p = pipeline.plan(v)
    stacks = {f"{c.name}-{layer}" for c in v.loaded.clusters if c.provider != "slurm" for layer in ("infra", "kueue")}
    docs = pool_and_kueue_docs(v, p, catalog, stacks)
    rendered = pipeline.render(v, p, catalog)
    assert sorted(docs) == sorted(stacks)
    assert any(n["slice"] for d in docs.values() for n in d.get("node_pools", []))   # TPU pools of several slices
    seen: set[int] = set()
    assert [bad for d in docs.values() for bad in json_native(d, seen)] == []
    assert all(docs[name] == json.loads(rendered[f"stacks/{name}.json"]) for name in docs)


def resizes(d: Decision) -> list[Action]:
    return [a for a in d.actions if a.kind == "resize"]


def test_a_resize_is_not_sent_again_while_its_nodes_come() -> None:
    s = snap(cluster("a", *slice_nodes("v5p", 0)))
    p = plan(place("vision/train", "a", "v5p", (0, 1), status="new"), pools=(pool("a", "v5p", 2),))
    first = decide(p, s, LoopMemory(), KNOBS, NOW, jobs=FACTS)
    assert [(a.kind, a.target) for a in first.actions if a.kind == "resize"] == [("resize", 2)]
    assert [a for a in decide(p, s, first.memory, KNOBS, at(0.5), jobs=FACTS).actions if a.kind == "resize"] == []
    failed = settle(LoopMemory(), first.memory, [a for a in first.actions if a.kind == "resize"])   # not tried
    assert [a.kind for a in resizes(decide(p, s, failed, KNOBS, at(0.5), jobs=FACTS))] == ["resize"]
    came = snap(cluster("a", *slice_nodes("v5p", 0, 1)))
    done = decide(p, came, first.memory, KNOBS, at(5), jobs=FACTS)
    assert [a for a in done.actions if a.kind == "resize"] == [] and done.memory.targets == {}


def test_a_resize_reported_done_that_the_pool_does_not_show_is_asked_again_after_a_backoff() -> None:
    """Issue 20: a resize was remembered as reached once asked, so a pool that never got its nodes (a lost
    change, a failed slice) was never asked again. A grow is asked again once its nodes should have come
    (15 min), then after twice as long, at most 30 min apart; never while they may still be booting."""
    s = snap(cluster("a", *slice_nodes("v5p", 0)))
    p = plan(place("vision/train", "a", "v5p", (0,)), place("vision/eval", "a", "v5p", (1, 2), status="new"),
             pools=(pool("a", "v5p", 3),))
    mem, asked_at = LoopMemory(), []
    for minute in range(0, 120):
        d = decide(p, s, mem, KNOBS, at(minute), jobs=FACTS)
        mem = d.memory                    # every action done, as the actuator said
        if resizes(d):
            asked_at.append(minute)
            a = resizes(d)[0]
            assert (a.current, a.target) == (1, 3) and a.reason.endswith("2 more unit(s) for vision/eval")
    assert asked_at == [0, 15, 45, 75, 105]
    a = resizes(decide(p, s, mem, KNOBS, at(135), jobs=FACTS))[0]
    assert a.reason.startswith(f"asked for 3 unit(s) at {NOW.isoformat()}, the pool still has 1: asking again "
                               "(attempt 6); 2 more unit(s) for vision/eval")


def test_a_shrink_the_pool_does_not_show_is_asked_again() -> None:
    s = snap(cluster("a", *slice_nodes("v5p", 0, 1)))
    p = plan(pools=(pool("a", "v5p", 0),))
    mem = LoopMemory(idle_since={"a/v5p/0": at(-60), "a/v5p/1": at(-60)})
    first = decide(p, s, mem, KNOBS, NOW, jobs=FACTS)
    assert [(a.current, a.target) for a in resizes(first)] == [(2, 0)]
    assert "idle: unit(s) 0, 1" in resizes(first)[0].reason
    assert resizes(decide(p, s, first.memory, KNOBS, at(0.5), jobs=FACTS)) == []
    again = resizes(decide(p, s, first.memory, KNOBS, at(1), jobs=FACTS))
    assert [(a.current, a.target) for a in again] == [(2, 0)] and "asking again (attempt 2)" in again[0].reason


def test_a_refused_resize_is_asked_again_after_the_backoff_with_its_failure() -> None:
    """A resize the actuator refused (a failed stack, no Pulumi CLI) is not remembered as reached, and is not
    sent in every cycle either: asked again after the backoff, the reason quoting the failure."""
    s = snap(cluster("a", *slice_nodes("v5p", 0)))
    p = plan(place("vision/train", "a", "v5p", (0, 1), status="new"), pools=(pool("a", "v5p", 2),))
    mem = LoopMemory()
    tries = []
    for minute in range(0, 8):
        d = decide(p, s, mem, KNOBS, at(minute), jobs=FACTS)
        results = execute(d, Recorder({"a"}))
        undone = [r.action for r in results if r.status != "done"]
        refused = [(r.action, r.message) for r in results if r.action.kind == "resize" and r.status == "failed"]
        mem = settle(mem, d.memory, undone, refused=refused)
        if resizes(d):
            tries.append((minute, resizes(d)[0].reason))
        assert mem.targets["a/v5p"].units == 2 and mem.targets["a/v5p"].failed == "500 internal error"
    assert [m for m, _ in tries] == [0, 1, 3, 7]
    assert "(the last attempt failed: 500 internal error): asking again (attempt 4)" in tries[-1][1]
    ok = decide(p, s, mem, KNOBS, at(15), jobs=FACTS)
    assert settle(mem, ok.memory, []).targets["a/v5p"].failed == ""      # an accepted ask clears the failure


def test_the_backoff_is_capped_and_an_older_memory_file_is_read() -> None:
    asked = Asked(units=3, first=NOW, last=NOW, attempts=12)
    assert ask_again_at(asked, KNOBS) == at(30)
    old = LoopMemory.model_validate_json(b'{"targets": {"a/v5p": 3}}')       # a bare count: no time kept
    assert old.targets["a/v5p"] == Asked(units=3) and ask_again_at(old.targets["a/v5p"], KNOBS) is None
    s = snap(cluster("a", *slice_nodes("v5p", 0)))
    p = plan(place("vision/eval", "a", "v5p", (1, 2), status="new"), pools=(pool("a", "v5p", 3),))
    a = resizes(decide(p, s, old, KNOBS, NOW, jobs=FACTS))
    assert a[0].reason.startswith("asked for 3 unit(s) in an earlier cycle, the pool still has 1: asking again")


def test_a_grow_reason_names_exactly_the_jobs_on_units_the_pool_lacks() -> None:
    """A user saw resize reasons naming jobs that already ran: every placement not `kept` was listed, a job
    restarted on a unit the pool has included."""
    s = snap(cluster("a", *job_objects("vision", "train", "v5p"), *slice_nodes("v5p", 0, 1)))
    p = plan(place("vision/train", "a", "v5p", (0,)), place("vision/eval", "a", "v5p", (1,), status="moved"),
             place("vision/big", "a", "v5p", (2, 3), status="new"),
             place("vision/next", "a", "v5p", (4,), status="new"),
             pools=(pool("a", "v5p", 5),))
    a = resizes(decide(p, s, LoopMemory(), KNOBS, NOW, jobs=FACTS))
    assert [(x.current, x.target, x.reason) for x in a] == [(2, 5, "3 more unit(s) for vision/big, vision/next")]


def test_pool_targets_keep_a_shrink_asked_and_not_yet_shown() -> None:
    """Another pool's resize renders the whole cluster's stack: a pool whose release was asked and is not
    done yet keeps the size asked (rendering the observed size would undo the release)."""
    s = snap(cluster("a", *slice_nodes("v5p", 0, 1)))
    p = plan(place("vision/eval", "a", "gpu", (0, 1), status="new"), pools=(pool("a", "v5p", 0), pool("a", "gpu", 2)))
    mem = LoopMemory(targets={"a/v5p": Asked(units=0, first=NOW, last=NOW)},
                     idle_since={"a/v5p/0": at(-60), "a/v5p/1": at(-60)})
    d = decide(p, s, mem, KNOBS, at(0.5), jobs=FACTS)
    assert [(a.pool, a.target) for a in resizes(d)] == [("gpu", 2)]
    assert {pp.pool: pp.target for pp in pool_targets(p, d, s).pools} == {"v5p": 0, "gpu": 2}


SERVE = {"serving/chat": JobFacts("inference", 0, None)}


def test_a_spread_service_starts_in_every_cluster_it_is_placed_in_and_moves_per_cluster() -> None:
    """A service spread over clusters (plan/spread.py: one placement per pool) starts once per cluster; a later
    plan that moves the replicas of one cluster elsewhere moves only those (new copy first), the rest stays."""
    s = snap(cluster("a"), cluster("b"), cluster("c"))
    spread = plan(place("serving/chat", "a", "l4", status="new"), place("serving/chat", "b", "l4", status="new"))
    d = decide(spread, s, LoopMemory(), KNOBS, NOW, jobs=SERVE)
    assert kinds(d.actions) == [("start", "serving/chat", "a"), ("start", "serving/chat", "b")]
    assert all(a.service for a in d.actions)
    assert decide(spread, s, d.memory, KNOBS, at(1), jobs=SERVE).actions == ()
    moved = plan(place("serving/chat", "a", "l4"), place("serving/chat", "c", "l4", status="moved"))
    m = decide(moved, s, d.memory, KNOBS, at(2), jobs=SERVE)
    assert [(a.kind, a.cluster, a.from_cluster) for a in m.actions] == [("move", "c", "b")]
    assert decide(moved, s, m.memory, KNOBS, at(3), jobs=SERVE).actions == ()


def test_a_spread_service_waits_for_an_unreadable_cluster_and_stops_everywhere_when_preempted() -> None:
    s = snap(cluster("a"), cluster("b"))
    spread = plan(place("serving/chat", "a", "l4", status="new"), place("serving/chat", "b", "l4", status="new"))
    mem = decide(spread, s, LoopMemory(), KNOBS, NOW, jobs=SERVE).memory
    dark = snap(cluster("a"), cluster("b", status="unreachable"))
    moved = plan(place("serving/chat", "a", "l4"), place("serving/chat", "a", "l4b", status="moved"))
    d = decide(moved, dark, mem, KNOBS, at(1), jobs=SERVE)
    assert d.actions == () and d.memory.services == mem.services
    assert any("cannot be read" in n for n in d.notes)
    gone = plan(preempted=(Preemption("serving/chat", "serving/critical", "critical needs l4"),))
    stop = decide(gone, s, mem, KNOBS, at(2), jobs=SERVE)
    assert [(a.kind, a.cluster) for a in stop.actions] == [("stop", "a"), ("stop", "b")]
    assert all(a.service and "preempted by serving/critical" in a.reason for a in stop.actions)
    assert "serving/chat" not in stop.memory.services


def test_a_spread_service_is_compared_by_its_observed_objects_labels_not_by_memory_alone() -> None:
    """What runs is what the snapshot shows (Fleet's Deployments by their job and pool labels): objects of a
    pool the plan left (here remembered by no reconciler: a restart lost the memory) make a start in that
    cluster, whose actuator applies the plan's objects and deletes the others; objects named for another
    number of pools (`chat-l4` where the plan keeps only l4 in the cluster: render names it `chat`) too."""
    two = snap(cluster("a", serving("serving", "chat", "l4", name="chat-l4"),
                       serving("serving", "chat", "a100", name="chat-a100")), cluster("b"))
    one = plan(place("serving/chat", "a", "l4"))
    d = decide(one, two, LoopMemory(), KNOBS, NOW, jobs=SERVE)
    assert [(a.kind, a.cluster, a.pool, a.service) for a in d.actions] == [("start", "a", "l4", True)]
    renamed = snap(cluster("a", serving("serving", "chat", "l4", name="chat-l4")), cluster("b"))
    assert kinds(decide(one, renamed, d.memory, KNOBS, at(1), jobs=SERVE).actions) == [("start", "serving/chat", "a")]
    settled = snap(cluster("a", serving("serving", "chat", "l4")), cluster("b"))
    assert decide(one, settled, d.memory, KNOBS, at(2), jobs=SERVE).actions == ()
    gone = plan(preempted=(Preemption("serving/chat", "serving/critical", "critical needs l4"),))
    stop = decide(gone, two, LoopMemory(), KNOBS, at(3), jobs=SERVE)
    assert [(a.kind, a.cluster, a.service) for a in stop.actions] == [("stop", "a", True)]


def test_a_moved_copy_still_being_deleted_loses_no_work_twice() -> None:
    """A move deletes the old JobSet in the foreground: the next cycle may still see it (deletionTimestamp set)
    while its pods stop. The move is asked again (it is idempotent, and the new copy waits for the old one),
    but the work it loses was counted when the move was decided."""
    js, wl = job_objects("vision", "train", "v5p", admitted=100)
    js["metadata"]["annotations"] = {"fleet.dev/units": "0"}
    p = plan(place("vision/train", "a", "v5p", (1,), status="moved", reason="slice 0 of a/v5p failed"),
             pools=(pool("a", "v5p", 1),))
    first = decide(p, snap(cluster("a", js, wl, *slice_nodes("v5p", 1))), LoopMemory(), KNOBS, NOW, jobs=FACTS)
    assert [(a.kind, a.lost_minutes) for a in first.actions] == [("move", 8)]      # 98 min ran, modulo 30
    js["metadata"]["deletionTimestamp"] = "2026-11-23T03:20:00Z"
    again = decide(p, snap(cluster("a", js, wl, *slice_nodes("v5p", 1))), first.memory, KNOBS, at(1), jobs=FACTS)
    assert [(a.kind, a.lost_minutes, a.lost_accelerator_hours) for a in again.actions] == [("move", 0, 0)]


# --- services by replica count (issue 20) ----------------------------------------------------------------------
CHAT = {"serving/chat": JobFacts("inference", 0, None, (16,))}       # one replica: 16 accelerators, one unit


def chat(cl: str, pool_name: str, replicas: int, status: str = "kept", first: int = 0) -> Placement:
    return place("serving/chat", cl, pool_name, tuple(range(first, first + replicas)), status=status)


def test_a_service_on_a_lost_cluster_is_scaled_up_elsewhere_within_one_interval() -> None:
    """3 of 4 replicas ran on cluster a, 1 on b. While a is only unreachable its replicas count and nothing is
    done; once it is lost, the plan puts all 4 on b/l4 and the loop scales b's Deployment 1 -> 4 at once (it
    used to wait for a, which never answers, and keep 1 of 4 replicas while paying for the slices)."""
    mem = LoopMemory(services={"serving/chat": "a/l4=3,b/l4=1"})
    dark = snap(cluster("a", status="unreachable"), cluster("b", serving("serving", "chat", "l4", replicas=1,
                                                                          ready=1)))
    kept = plan(chat("a", "l4", 3), chat("b", "l4", 1))
    d = decide(kept, dark, mem, KNOBS, NOW, jobs=CHAT)
    assert d.actions == ()
    later = at(KNOBS.cluster_lost_after_minutes)
    failover = plan(chat("b", "l4", 4, status="moved"))
    f = decide(failover, dark, d.memory, KNOBS, later, jobs=CHAT)
    assert f.lost_clusters == ("a",)
    assert [(a.kind, a.cluster, a.pool, a.service) for a in f.actions] == [("start", "b", "l4", True)]
    assert "b/l4 x1 -> b/l4 x4" in f.actions[0].reason
    assert f.memory.services == {"serving/chat": "b/l4=4"}


def test_more_replicas_in_git_scale_the_deployment_and_extra_ones_are_scaled_down() -> None:
    four = plan(chat("b", "l4", 4))
    for running in (2, 5):
        s = snap(cluster("b", serving("serving", "chat", "l4", replicas=running, ready=running)))
        d = decide(four, s, LoopMemory(), KNOBS, NOW, jobs=CHAT)
        assert [(a.kind, a.cluster, a.keep) for a in d.actions] == [("start", "b", ())], running
        assert f"x{running} -> b/l4 x4" in d.actions[0].reason


def test_a_service_that_runs_the_plan_gets_no_action_on_the_first_cycle() -> None:
    """No memory (a new reconciler), objects named, pooled and sized as the plan's: nothing to do."""
    s = snap(cluster("a", serving("serving", "chat", "l4", name="chat-l4", replicas=2, ready=2),
                     serving("serving", "chat", "a100", name="chat-a100", replicas=1, ready=0)),
             cluster("b", serving("serving", "chat", "l4", replicas=1, ready=1)))
    p = plan(chat("a", "l4", 2), chat("a", "a100", 1), chat("b", "l4", 1))
    d = decide(p, s, LoopMemory(), KNOBS, NOW, jobs=CHAT)
    assert d.actions == ()
    assert d.memory.services == {"serving/chat": "a/a100=1,a/l4=2,b/l4=1"}


def test_new_replicas_are_ready_before_the_old_objects_go() -> None:
    """The plan moves the service from a to c. Cycle 1 starts it on c and leaves a serving; once c's replicas
    are ready, a's objects go; then nothing."""
    old = cluster("a", serving("serving", "chat", "l4", replicas=2, ready=2))
    moved = plan(chat("c", "l4", 2, status="moved"))
    d1 = decide(moved, snap(old, cluster("c")), LoopMemory(), KNOBS, NOW, jobs=CHAT)
    assert [(a.kind, a.cluster) for a in d1.actions] == [("start", "c")]
    assert any("keep serving until the plan's are ready (0/2 ready)" in n for n in d1.notes)
    starting = cluster("c", serving("serving", "chat", "l4", replicas=2, ready=1))
    d2 = decide(moved, snap(old, starting), d1.memory, KNOBS, at(1), jobs=CHAT)
    assert d2.actions == ()
    ready = cluster("c", serving("serving", "chat", "l4", replicas=2, ready=2))
    d3 = decide(moved, snap(old, ready), d2.memory, KNOBS, at(2), jobs=CHAT)
    assert [(a.kind, a.cluster, a.service) for a in d3.actions] == [("stop", "a", True)]
    assert decide(moved, snap(cluster("a"), ready), d3.memory, KNOBS, at(3), jobs=CHAT).actions == ()


def test_a_renamed_object_in_the_same_cluster_is_removed_only_after_its_replacement_serves() -> None:
    """Two pools of a become one (render: `chat-l4` -> `chat`): the start applies `chat` and keeps `chat-l4`
    (it serves); the stop that follows keeps `chat` (the plan's) and the Service."""
    p = plan(chat("a", "l4", 2))
    before = cluster("a", serving("serving", "chat", "l4", name="chat-l4", replicas=1, ready=1),
                     serving("serving", "chat", "a100", name="chat-a100", replicas=1, ready=1))
    d1 = decide(p, snap(before), LoopMemory(), KNOBS, NOW, jobs=CHAT)
    assert [(a.kind, a.keep) for a in d1.actions] == [("start", ("chat-a100", "chat-l4"))]
    both = cluster("a", serving("serving", "chat", "l4", name="chat-l4", replicas=1, ready=1),
                   serving("serving", "chat", "a100", name="chat-a100", replicas=1, ready=1),
                   serving("serving", "chat", "l4", replicas=2, ready=2))
    d2 = decide(p, snap(both), d1.memory, KNOBS, at(1), jobs=CHAT)
    assert [(a.kind, a.keep) for a in d2.actions] == [("stop", ("chat",))]


def test_the_loop_and_the_simulator_think_with_one_step() -> None:
    """Issue 20 item 2: `fleet reconcile` and `fleet simulate` run the same cycle (reconcile/step.py), not two
    copies of the observe -> plan -> decide sequence; and the step decides the same from the same inputs."""
    import inspect

    from reconciler.reconcile import loop as real
    from reconciler.reconcile import step as one
    from reconciler.simulate import loop as simulated

    assert real.step is one.step and simulated.step is one.step
    for module in (real, simulated):       # the code, not its docstring, calls neither the planner nor decide
        code = inspect.getsource(module).replace(module.__doc__ or "", "")
        assert "pipeline.plan(" not in code and "decide(" not in code


def test_a_remembered_replica_count_that_is_no_number_is_not_known_not_a_traceback() -> None:
    from reconciler.reconcile.services import remembered

    assert remembered("a/l4=²,b/l4=2,c/x=,d/y") == {"a": {"l4": None}, "b": {"l4": 2}, "c": {"x": None},
                                                  "d": {"y": None}}


def test_a_deployment_deleted_by_hand_on_a_readable_cluster_is_applied_again() -> None:
    """Review of issue 20: the loop's memory said the service was applied on b, so b showing no object of it
    (deleted by hand) changed nothing and the service stayed down. Where services were listed, what is listed
    is what runs; the memory stands in only where they were not (unreadable clusters, the simulator)."""
    mem = LoopMemory(services={"serving/chat": "b/l4=2"})
    p = plan(chat("b", "l4", 2))
    listed = cluster("b").model_copy(update={"services_read": True})
    d = decide(p, snap(listed), mem, KNOBS, NOW, jobs=CHAT)
    assert [(a.kind, a.cluster, a.service) for a in d.actions] == [("start", "b", True)]
    assert "replicas none -> b/l4 x2" in d.actions[0].reason
    assert decide(p, snap(cluster("b")), mem, KNOBS, NOW, jobs=CHAT).actions == ()   # not listed: memory


def test_a_refused_action_holds_back_the_jobs_later_actions_and_the_clusters_shrinks_only() -> None:
    """A refusal (the cluster answered: `Outcome.refused`) is the job's, not the cluster's: the same job's later
    action waits, another job's goes on, and the cluster's capacity is not released while it stands."""
    class Refuses(Recorder):
        def stop(self, action: Action) -> Outcome:
            self.calls.append(("stop", action.job))
            return Outcome(False, "HTTP 422 Invalid", refused=True)

    stop = Action(kind="stop", cluster="a", job="vision/x", from_cluster="a", reason="preempted")
    again = Action(kind="start", cluster="a", pool="h100", job="vision/x", reason="the plan starts it")
    other = Action(kind="start", cluster="a", pool="h100", job="vision/y", reason="the plan starts it")
    shrink = Action(kind="resize", cluster="a", pool="h100", reason="idle", target=1, current=2)
    elsewhere = Action(kind="resize", cluster="b", pool="h100", reason="idle", target=1, current=2)
    rec = Refuses(set())
    results = execute(Decision((stop, again, other, shrink, elsewhere), LoopMemory()), rec)
    assert [r.status for r in results] == ["failed", "skipped", "done", "skipped", "done"]
    assert "an action of vision/x was refused" in results[1].message
    assert rec.calls == [("stop", "vision/x"), ("start", "a"), ("resize", "b")]
