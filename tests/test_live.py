"""Planning from what runs (`--observed`, plan/live.py): snapshots built from the live objects of
tests/kube_objects.py (valid against ../shared/schemas, parsed as `fleet observe` parses them) against the small
fleet of tests/builders.py; the completion record end to end against tests/kube_api.py servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kube_api import KubeCluster, write_kubeconfig
from kube_objects import cond, job_objects, node

from reconciler.catalog import load_catalog
from reconciler.models import pod_digest, spec_digest
from reconciler.observe.fleetwide import observe_repo, record_completions_repo
from reconciler.observe.model import ClusterObservation, Completion, Snapshot, carry_over
from reconciler.observe.parse import parse_jobset, parse_node, parse_workload
from reconciler.pipeline import change, check, explain, live_inputs, plan, plan_markdown
from reconciler.plan.types import Plan
from reconciler.validate import Validated

from builders import JOB, PRIORITIES, TEAMS, job, with_files

T0 = datetime(2026, 11, 23, 0, 0, tzinfo=UTC)      # kube_objects.T0
CAT = load_catalog()
TPU_JOB = JOB.replace("name: train", "name: pretrain").replace(     # two v5p slices, nothing else
    "  - accelerator: nvidia-h100-80gb\n    count: 16\n    relative_speed: 0.5\n", "")
GPU_JOB = job("small", count=8, body="checkpoint_minutes: 20\n")
FILES = {"jobs/vision/pretrain.yaml": TPU_JOB, "jobs/vision/small.yaml": GPU_JOB, "jobs/vision/train.yaml": None}


def fleet(changes: dict[str, str | None] | None = None) -> Validated:
    v = check(with_files({**FILES, **(changes or {})}), CAT)
    assert v.ok, v.errors
    return v


def stamped(v: Validated, job_id: str, pool: str, phase: str, units: tuple[int, ...] | None = None,
            digest: str | None = None, **kw: Any) -> list[dict[str, Any]]:
    """The JobSet and Workload of `job_id` in `phase`, with the annotations render stamps."""
    team, name = job_id.split("/")
    js, wl = job_objects(team, name, pool, phase, **kw)
    spec = next(j for j in v.loaded.jobs if j.id == job_id)
    js["metadata"]["annotations"] = {"fleet.dev/spec-digest": digest or spec_digest(spec),
                                     "fleet.dev/pod-digest": pod_digest(spec)}
    if units is not None:
        js["metadata"]["annotations"]["fleet.dev/units"] = ",".join(map(str, units))
    return [js, wl]


def observed(name: str, objs: list[dict[str, Any]], **kw: Any) -> ClusterObservation:
    parse = {"Workload": parse_workload, "JobSet": parse_jobset, "Node": parse_node}
    got: dict[str, list[Any]] = {"Workload": [], "JobSet": [], "Node": []}
    for o in objs:
        got[o["kind"]].append(parse[o["kind"]](o))
    return ClusterObservation(name=name, status=kw.pop("status", "ok"), workloads=tuple(got["Workload"]),
                              jobsets=tuple(got["JobSet"]), nodes=tuple(got["Node"]), **kw)


def snapshot(minutes: float, *clusters: ClusterObservation) -> Snapshot:
    names = {c.name for c in clusters}
    rest = [ClusterObservation(name=n, status="ok") for n in ("gke-usc1", "onprem-sjc") if n not in names]
    return Snapshot(observed_at=T0 + timedelta(minutes=minutes),
                    clusters=tuple(sorted([*clusters, *rest], key=lambda c: c.name)))


def slices(pool: str, units: int, *, bad: int | None = None, since: float = 30) -> list[dict[str, Any]]:
    """One node per TPU slice (node pool `<pool>-s<i>`); slice `bad` NotReady since minute `since`."""
    out = []
    for u in range(units):
        n = node(f"{pool}-s{u}-0", node_pool=f"{pool}-s{u}", ready=u != bad)
        n["status"]["conditions"][0]["lastTransitionTime"] = f"2026-11-23T00:{int(since):02d}:00Z"
        out.append(n)
    return out


def with_context() -> dict[str, bytes]:
    """The fleet with gke-usc1 reachable through kubeconfig context `usc1`."""
    gke = with_files({})["fleet/clusters/gke-usc1.yaml"].decode()
    return with_files({**FILES, "fleet/clusters/gke-usc1.yaml": gke.replace("{cluster: ml-usc1}",
                                                                           "{cluster: ml-usc1, context: usc1}")})


def where(p: Plan, job_id: str) -> tuple[str, str, tuple[int, ...], str] | None:
    pl = p.placement_of(job_id)
    return None if pl is None else (pl.cluster, pl.pool, pl.units, pl.status)


def target(p: Plan, key: str) -> int:
    return next(q.target for q in p.pools if f"{q.cluster}/{q.pool}" == key)


def test_reconcile_knobs_have_design_defaults_and_located_errors() -> None:
    knobs = fleet().loaded.placement.reconcile       # type: ignore[union-attr]
    assert (knobs.interval_seconds, knobs.cluster_lost_after_minutes, knobs.node_failed_after_minutes,
            knobs.scale_down_after_minutes, knobs.paused, knobs.lease_cluster) == (60, 15, 10, 30, False, None)
    def errors(text: str) -> dict[tuple[str, int, str], tuple[str, str]]:
        v = check(with_files({**FILES, "policies/placement.yaml": text}), CAT)
        return {(e.path, e.line, e.field): (e.message, e.hint) for e in v.errors}

    assert set(errors("reconcile:\n  interval_seconds: 0\n  pause: true\n")) == {
        ("policies/placement.yaml", 2, "reconcile.interval_seconds"), ("policies/placement.yaml", 3, "reconcile.pause")}
    assert errors("reconcile:\n  paused: true\n  lease_cluster: mgmt-usc1\n") == {
        ("policies/placement.yaml", 3, "reconcile.lease_cluster"): (
            "lease_cluster `mgmt-usc1` is not a cluster of fleet/clusters/",
            "did you mean `gke-usc1`? name one of: gke-usc1, onprem-sjc")}
    assert errors("reconcile:\n  lease_cluster: gke-usc1\n") == {}


def test_live_inputs_sort_every_phase() -> None:
    v = fleet({"jobs/lang/a.yaml": job("a", team="lang"), "jobs/lang/b.yaml": job("b", team="lang"),
               "jobs/lang/c.yaml": job("c", team="lang")})
    gpu = {"accel": "gpu", "per_pod": 1}
    objs = [*stamped(v, "vision/pretrain", "v5p-4x4x4", "running", units=(2, 3)),
            *stamped(v, "vision/small", "h100", "succeeded", digest="0123456789abcdef", **gpu),   # an older spec
            *stamped(v, "lang/a", "h100", "failed", **gpu), *stamped(v, "lang/b", "h100", "evicted", **gpu),
            *stamped(v, "lang/c", "h100", "queued", **gpu), *job_objects("lang", "gone", "h100", "running", **gpu),
            *slices("v5p-4x4x4", 2, bad=1)]
    live = live_inputs(v, snapshot(45, observed("gke-usc1", objs), _down(40)))
    assert {j: (r.cluster, r.pool, r.units) for j, r in live.running.items()} == {
        "vision/pretrain": ("gke-usc1", "v5p-4x4x4", (2, 3))}      # lang/gone has no file: not Fleet's to plan
    assert dict(live.done) == {"lang/a": "failed"} and live.evicted == {"lang/b"}
    assert list(live.failed_units) == ["gke-usc1/v5p-4x4x4"] and list(live.failed_units["gke-usc1/v5p-4x4x4"]) == [1]
    assert not live.lost and list(live.unreachable) == ["onprem-sjc"]
    assert live.run_minutes["vision/pretrain"] == 33              # PodsReady at minute 12
    assert live_inputs(v, snapshot(45, observed("gke-usc1", objs), _down(30))).lost.keys() == {"onprem-sjc"}


def _down(since: float) -> ClusterObservation:
    return ClusterObservation(name="onprem-sjc", status="unreachable", unreachable_since=T0 + timedelta(minutes=since))


# -- running work stays; finished work releases its capacity ---------------------------------------------------

def test_a_running_job_is_kept_where_it_runs_after_a_budget_cut() -> None:
    cut = fleet({"policies/teams.yaml": with_files({})["policies/teams.yaml"].decode()
                 .replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 1")})
    assert plan(cut).placement_of("vision/pretrain") is None          # from git alone: over budget, dropped
    snap = snapshot(60, observed("gke-usc1", stamped(cut, "vision/pretrain", "v5p-4x4x4", "running", units=(1, 2))))
    p = plan(cut, observed=snap)
    assert where(p, "vision/pretrain") == ("gke-usc1", "v5p-4x4x4", (1, 2), "kept")
    assert target(p, "gke-usc1/v5p-4x4x4") == 2


def test_the_observation_beats_the_base_plan() -> None:
    v = fleet()
    base = plan(v)
    assert where(base, "vision/small")[:2] == ("onprem-sjc", "h100-owned")   # type: ignore[index]
    snap = snapshot(60, observed("gke-usc1", stamped(v, "vision/small", "h100", "running", units=(3,),
                                                     accel="gpu", per_pod=8)))
    # GPU nodes of a node group are interchangeable: the plan renumbers used nodes 0.. (summary.node_numbers)
    assert where(plan(v, base=base, observed=snap), "vision/small") == ("gke-usc1", "h100", (0,), "kept")


def test_what_runs_keeps_its_units_before_a_base_placement_that_never_started() -> None:
    """Issue 15: the base placed `first` (production) on gke-usc1/h100 node 0, but its start failed; `small`
    (research) runs on node 0. Kept first by priority, `first` took node 0 and `small` was renumbered in the
    plan's bookkeeping: the loop then tried, every cycle, a start on a node that was full (a job waited days)."""
    v = fleet({"jobs/vision/first.yaml": job("first", count=8, body="priority: production\n")})
    base = plan(v)
    first = base.placement_of("vision/first")
    assert first is not None
    stale = replace(base, placements=tuple(replace(p, cluster="gke-usc1", pool="h100", units=(0,))
                                           if p.job == "vision/first" else p for p in base.placements))
    snap = snapshot(60, observed("gke-usc1", stamped(v, "vision/small", "h100", "running", units=(0,),
                                                     accel="gpu", per_pod=8)))
    p = plan(v, base=stale, observed=snap)
    assert where(p, "vision/small") == ("gke-usc1", "h100", (0,), "kept")
    assert where(p, "vision/first")[:3] != ("gke-usc1", "h100", (0,))    # type: ignore[index]


def test_a_spread_service_seen_in_one_pool_keeps_every_group_and_preempts_nothing() -> None:
    """Issue 15: a service spread over two pools, seen running (a JobSet, as the simulator shows it) in one
    of them. Planned from that one object, its other group was placed anew every cycle, preempting the
    team's running work for a replica that already ran (and moving the service back and forth)."""
    web = ("name: web\nteam: vision\npriority: critical\nkind: inference\nreplicas: 2\nport: 8080\n"
           "options:\n  - {accelerator: nvidia-h100-80gb, count: 8}\nimage: img:1\n")
    jobs: dict[str, str | None] = {"jobs/vision/web.yaml": web, "jobs/vision/small.yaml": None,
                                   "jobs/vision/big.yaml": job("big", count=56, body="checkpoint_minutes: 30\n")}
    base = plan(fleet(jobs))
    assert {(p.cluster, p.pool) for p in base.placements if p.job == "vision/web"} == {
        ("gke-usc1", "h100"), ("onprem-sjc", "h100-owned")}
    teams = with_files({})["policies/teams.yaml"].decode().replace(
        "nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 64, borrowing_limit: 0}")
    tight = fleet({**jobs, "policies/teams.yaml": teams})     # what runs now fills the team's quota
    gpu = {"accel": "gpu", "per_pod": 8}
    objs = [*stamped(tight, "vision/big", "h100", "running", units=(1, 2, 3, 4, 5, 6, 7), **gpu),
            *stamped(tight, "vision/web", "h100", "running", units=(0,), **gpu)]
    p = plan(tight, base=base, observed=snapshot(60, observed("gke-usc1", objs)))
    assert p.preemptions == () and p.pending == ()
    assert sorted((x.cluster, x.pool, x.units, x.status) for x in p.placements if x.job == "vision/web") == [
        ("gke-usc1", "h100", (0,), "kept"), ("onprem-sjc", "h100-owned", (0,), "kept")]


def test_preemption_takes_the_victim_that_loses_the_least_since_its_last_checkpoint() -> None:
    """Issue 15: victims were ranked by their checkpoint interval alone (both 30 min here), then by id, so
    `a`, 29 minutes past its last checkpoint, was preempted rather than `b`, which checkpointed a minute ago.
    Planned from what runs, the rank is the accelerator-minutes since the last checkpoint (running minutes,
    from PodsReady, modulo checkpoint_minutes). Without a checkpoint window (issue 22: with one, `a`, a minute
    from its checkpoint, would keep running until it and lose nothing)."""
    teams = with_files({})["policies/teams.yaml"].decode().replace(
        "nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 64, borrowing_limit: 0}")
    prio = PRIORITIES.replace("preemption:\n", "preemption:\n  checkpoint_window_minutes: 0\n")
    ckpt = "checkpoint_minutes: 30\n"
    v = fleet({"policies/teams.yaml": teams, "policies/priorities.yaml": prio, "jobs/vision/small.yaml": None,
               "jobs/vision/a.yaml": job("a", count=32, body=ckpt), "jobs/vision/b.yaml": job("b", count=32, body=ckpt),
               "jobs/vision/h.yaml": job("h", count=8, body="priority: production\n")})
    gpu = {"accel": "gpu", "per_pod": 8}
    objs = [*stamped(v, "vision/a", "h100", "running", units=(0, 1, 2, 3), admitted=29, **gpu),   # ran 29 min
            *stamped(v, "vision/b", "h100", "running", units=(4, 5, 6, 7), admitted=27, **gpu)]   # ran 31 min
    p = plan(v, observed=snapshot(60, observed("gke-usc1", objs)))
    assert [(x.job, x.by) for x in p.preemptions] == [("vision/b", "vision/h")]
    assert plan(v).placement_of("vision/h") is not None          # from git alone nothing runs: nothing to preempt


def test_two_victims_that_just_checkpointed_go_before_one_that_would_lose_half_an_hour() -> None:
    """Issue 15: the fewest victims won whatever they lost (a 1,024-chip pretraining job 25 minutes past its
    checkpoint before two small jobs that just checkpointed). Planned from what runs, least work lost first.
    Without a checkpoint window (issue 22: with one, `big`, a minute from its checkpoint, would run until it)."""
    teams = with_files({})["policies/teams.yaml"].decode().replace(
        "nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 64, borrowing_limit: 0}")
    prio = PRIORITIES.replace("preemption:\n", "preemption:\n  checkpoint_window_minutes: 0\n")
    ckpt = "checkpoint_minutes: 30\n"
    v = fleet({"policies/teams.yaml": teams, "policies/priorities.yaml": prio, "jobs/vision/small.yaml": None,
               "jobs/vision/big.yaml": job("big", count=32, body=ckpt),
               "jobs/vision/s1.yaml": job("s1", count=16, body=ckpt),
               "jobs/vision/s2.yaml": job("s2", count=16, body=ckpt),
               "jobs/vision/h.yaml": job("h", count=32, body="priority: production\n")})
    gpu = {"accel": "gpu", "per_pod": 8}
    objs = [*stamped(v, "vision/big", "h100", "running", units=(0, 1, 2, 3), admitted=29, **gpu),  # 29 min at risk
            *stamped(v, "vision/s1", "h100", "running", units=(4, 5), admitted=27, **gpu),        # 1 min
            *stamped(v, "vision/s2", "h100", "running", units=(6, 7), admitted=27, **gpu)]
    p = plan(v, observed=snapshot(60, observed("gke-usc1", objs)))
    assert sorted(x.job for x in p.preemptions) == ["vision/s1", "vision/s2"]


def test_running_gpu_jobs_whose_units_collide_both_stay_in_their_pool() -> None:
    v = fleet({"jobs/vision/other.yaml": job("other", count=8)})
    gpu = {"accel": "gpu", "per_pod": 8}
    snap = snapshot(60, observed("gke-usc1", [*stamped(v, "vision/small", "h100", "running", units=(0,), **gpu),
                                              *stamped(v, "vision/other", "h100", "running", units=(0,), **gpu)]))
    p = plan(v, observed=snap)
    assert [where(p, j) for j in ("vision/other", "vision/small")] == [
        ("gke-usc1", "h100", (0,), "kept"), ("gke-usc1", "h100", (1,), "kept")]


def test_a_running_job_without_units_takes_free_units_of_its_pool() -> None:
    v = fleet()
    snap = snapshot(60, observed("gke-usc1", stamped(v, "vision/small", "h100", "admitted", accel="gpu", per_pod=8)))
    assert where(plan(v, observed=snap), "vision/small") == ("gke-usc1", "h100", (0,), "kept")


def test_a_finished_job_releases_its_pool_and_is_reported() -> None:
    v = fleet()
    base = plan(v)
    assert target(base, "gke-usc1/v5p-4x4x4") == 2
    snap = snapshot(200, observed("gke-usc1", stamped(v, "vision/pretrain", "v5p-4x4x4", "succeeded", units=(0, 1))))
    c = change(v, v, observed=snap)
    p = c.head.plan
    assert p.placement_of("vision/pretrain") is None
    assert all(q.job != "vision/pretrain" for q in p.pending)
    assert target(p, "gke-usc1/v5p-4x4x4") == 0
    assert "finished: 1 (vision/pretrain)" in plan_markdown(c)
    assert "vision/pretrain" not in p.to_json()                    # neither placed nor pending; same JSON keys
    assert set(json.loads(p.to_json())) == set(json.loads(base.to_json()))


def test_explain_says_a_finished_job_is_not_planned() -> None:
    v = fleet()
    snap = snapshot(200, observed("gke-usc1", stamped(v, "vision/pretrain", "v5p-4x4x4", "succeeded", units=(0, 1))))
    assert explain(v, "vision/pretrain", observed=snap).startswith("# vision/pretrain\n\nFinished: it succeeded ")
    assert json.loads(explain(v, "vision/pretrain", observed=snap, fmt="json"))["finished"] == "succeeded"
    assert "gke-usc1" in explain(v, "vision/small", observed=snap)


def test_failed_stays_failed_until_its_file_changes() -> None:
    v = fleet()
    snap = snapshot(200, observed("gke-usc1", stamped(v, "vision/pretrain", "v5p-4x4x4", "failed", units=(0, 1),
                                                      restarts=3)))
    c = change(v, observed=snap)
    assert c.head.plan.placement_of("vision/pretrain") is None
    assert "failed: 1 (vision/pretrain)" in plan_markdown(c)
    edited = fleet({"jobs/vision/pretrain.yaml": TPU_JOB.replace("duration_hours: 24", "duration_hours: 25")})
    assert where(plan(edited, observed=snap), "vision/pretrain") == ("gke-usc1", "v5p-4x4x4", (0, 1), "new")


def test_an_evicted_job_is_placed_again() -> None:
    v = fleet()
    base = plan(v)
    snap = snapshot(60, observed("onprem-sjc", stamped(v, "vision/small", "h100-owned", "evicted", units=(0,),
                                                       accel="gpu", per_pod=8)))
    live = live_inputs(v, snap)
    assert live.evicted == {"vision/small"} and not live.running
    p = plan(v, base=base, observed=snap)
    assert where(p, "vision/small") is not None and where(p, "vision/small")[3] == "new"   # type: ignore[index]


# -- failed units ---------------------------------------------------------------------------------------------

def test_a_notready_slice_past_the_threshold_moves_its_job_and_counts_the_lost_work() -> None:
    v = fleet()
    objs = [*stamped(v, "vision/pretrain", "v5p-4x4x4", "running", units=(0, 1)), *slices("v5p-4x4x4", 4, bad=1)]
    late = snapshot(41, observed("gke-usc1", objs))       # NotReady since minute 30: 11 min > 10
    c = change(v, observed=late)
    p = c.head.plan
    pl = p.placement_of("vision/pretrain")
    assert pl is not None and pl.status == "moved" and 1 not in pl.units and pl.pool == "v5p-4x4x4"
    assert "unit 1 of gke-usc1/v5p-4x4x4 failed: node v5p-4x4x4-s1-0 NotReady for 11 min" in pl.reason
    # running since minute 12 (PodsReady), so 29 min ran: at most its 30 min checkpoint interval, 29 min lost
    md = plan_markdown(c)
    assert "work lost since the last checkpoint: 61.9 accelerator-hours (vision/pretrain (29 min))" in md
    assert p.live is not None and p.live.lost_work[0].minutes == 29


def test_a_notready_slice_below_the_threshold_keeps_its_job() -> None:
    v = fleet()
    objs = [*stamped(v, "vision/pretrain", "v5p-4x4x4", "running", units=(0, 1)), *slices("v5p-4x4x4", 4, bad=1)]
    early = snapshot(35, observed("gke-usc1", objs))
    assert where(plan(v, observed=early), "vision/pretrain") == ("gke-usc1", "v5p-4x4x4", (0, 1), "kept")
    # the knob decides: 3 minutes is enough when placement.yaml says so
    quick = fleet({"policies/placement.yaml": "reconcile:\n  node_failed_after_minutes: 3\n"})
    assert where(plan(quick, observed=early), "vision/pretrain")[3] == "moved"   # type: ignore[index]


def test_a_failed_unit_takes_no_new_work_and_is_not_paid() -> None:
    v = fleet()
    snap = snapshot(60, observed("gke-usc1", slices("v5p-4x4x4", 4, bad=0)))
    p = plan(v, observed=snap)
    pl = p.placement_of("vision/pretrain")
    assert pl is not None and 0 not in pl.units
    assert target(p, "gke-usc1/v5p-4x4x4") == 2


def test_failed_gpu_nodes_take_capacity_away() -> None:
    v = fleet()
    sick = [cond("fleet.dev/AcceleratorHealthy", False, "XidError", 5)]

    def gpus(failed: int) -> Snapshot:
        return snapshot(60, observed("onprem-sjc", [node(f"h100-owned-{i}", pool="h100-owned", accel="gpu",
                                                         extra=tuple(sick) if i < failed else ()) for i in range(4)]))
    live = live_inputs(v, gpus(4))
    assert len(live.failed_nodes["onprem-sjc/h100-owned"]) == 4 and not live.failed_units
    assert where(plan(v, observed=gpus(3)), "vision/small")[:2] == ("onprem-sjc", "h100-owned")  # type: ignore[index]
    assert where(plan(v, observed=gpus(4)), "vision/small")[:2] == ("gke-usc1", "h100")  # type: ignore[index]


# -- lost clusters --------------------------------------------------------------------------------------------

def _unreachable(v: Validated, minutes: float) -> Snapshot:
    """onprem-sjc ran vision/small when last read (minute 0), and is unreachable since minute 1."""
    first = snapshot(0, observed("onprem-sjc", stamped(v, "vision/small", "h100-owned", "running", units=(2,),
                                                       accel="gpu", per_pod=8)))
    down = ClusterObservation(name="onprem-sjc", status="unreachable")
    return carry_over(carry_over(first, snapshot(1, down)), snapshot(minutes, down))


def test_an_unreachable_cluster_is_lost_after_the_threshold_and_not_before() -> None:
    v = fleet()
    before = plan(v, observed=_unreachable(v, 15))         # 14 min unreachable: assumed still running there
    assert where(before, "vision/small") == ("onprem-sjc", "h100-owned", (0,), "kept")   # GPU nodes renumbered
    after = change(v, observed=_unreachable(v, 16))        # 15 min: lost
    pl = after.head.plan.placement_of("vision/small")
    assert pl is not None and pl.cluster == "gke-usc1" and pl.status == "moved"
    assert "cluster onprem-sjc is lost: unreachable for 15 min" in pl.reason
    md = plan_markdown(after)
    assert "lost clusters: onprem-sjc" in md and "vision/small (20 min)" in md   # its checkpoint interval
    assert target(after.head.plan, "onprem-sjc/h100-owned") == 4    # owned: its min stays paid


def test_max_migrations_does_not_limit_forced_moves() -> None:
    v = fleet({"policies/placement.yaml": "max_migrations_per_plan: 0\n"})
    assert where(plan(v, observed=_unreachable(v, 30)), "vision/small")[:2] == ("gke-usc1", "h100")  # type: ignore[index]


def test_carry_over_keeps_since_when_and_the_records_of_an_unreachable_cluster() -> None:
    record = Completion(job="vision/pretrain", digest="d", result="succeeded")

    def at(minutes: float, status: str, **kw: Any) -> Snapshot:
        return Snapshot(observed_at=T0 + timedelta(minutes=minutes),
                        clusters=(ClusterObservation(name="c", status=status, **kw),))

    once = carry_over(at(0, "ok", completions=(record,)), at(5, "unreachable"))
    assert once.clusters[0].unreachable_since == T0 + timedelta(minutes=5) and once.clusters[0].completions == (record,)
    assert carry_over(once, at(9, "unreachable")).clusters[0].unreachable_since == T0 + timedelta(minutes=5)
    back = at(12, "ok")
    assert carry_over(once, back).clusters[0].unreachable_since is None


# -- the completion record, end to end against local API servers --------------------------------------------

def test_a_completed_job_whose_objects_vanished_does_not_run_again_until_its_file_changes(tmp_path: Path) -> None:
    files = with_context()
    v = check(files, CAT)
    assert v.ok
    with KubeCluster("gke-usc1") as api:
        kc = write_kubeconfig(tmp_path / "kubeconfig", {"usc1": api.url})
        api.add(*stamped(v, "vision/pretrain", "v5p-4x4x4", "succeeded", units=(0, 1)))
        now = T0 + timedelta(hours=3)
        snap = record_completions_repo(files, observe_repo(files, str(kc), now), str(kc))
        cm = api.objects["configmaps"][("fleet-system", "fleet-completions")]
        assert json.loads(cm["data"]["vision.pretrain"])["result"] == "succeeded"
        assert [m["manager"] for m in cm["metadata"]["managedFields"]] == ["fleet-completions"]
        for plural in ("jobsets", "workloads"):              # garbage-collected; Fleet restarts
            api.objects[plural].clear()
            api._encoded[plural].clear()
        again = observe_repo(files, str(kc), now + timedelta(hours=1))
    assert snap.cluster("gke-usc1").completions == again.cluster("gke-usc1").completions   # type: ignore[union-attr]
    assert plan(v, observed=again).placement_of("vision/pretrain") is None
    changed = check(with_files({**FILES, "jobs/vision/pretrain.yaml": TPU_JOB.replace("24", "48")}), CAT)
    assert plan(changed, observed=again).placement_of("vision/pretrain") is not None


def test_a_bad_completion_record_is_a_located_problem(tmp_path: Path) -> None:
    files = with_context()
    with KubeCluster("gke-usc1") as api:
        kc = write_kubeconfig(tmp_path / "kubeconfig", {"usc1": api.url})
        api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fleet-completions",
                 "namespace": "fleet-system"}, "data": {"vision.pretrain": "{\"digest\": 3}"}})
        c = observe_repo(files, str(kc), T0).cluster("gke-usc1")
    assert c is not None and c.status == "degraded"
    (p,) = c.problems
    assert "fleet-system/configmaps/fleet-completions" in p.message and "key `vision.pretrain`" in p.message
    assert "kubectl -n fleet-system edit configmap fleet-completions" in p.hint


# -- the CLI ----------------------------------------------------------------------------------------------------

def _fleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reconciler", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)


def _repo(tmp_path: Path, changes: dict[str, str | None] | None = None) -> Path:
    for rel, data in with_files({**FILES, **(changes or {})}).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    return tmp_path


@pytest.mark.parametrize("command", [["plan"], ["explain", "vision/small"], ["cost"],
                                     ["render", "--out", "out"]])
def test_observed_flag_plans_from_the_snapshot(tmp_path: Path, command: list[str]) -> None:
    repo = _repo(tmp_path / "repo")
    v = fleet()
    snap = snapshot(60, observed("gke-usc1", stamped(v, "vision/small", "h100", "running", units=(3,),
                                                     accel="gpu", per_pod=8)))
    (tmp_path / "snap.json").write_text(snap.to_json())
    r = _fleet(*command, "--observed", str(tmp_path / "snap.json"), cwd=repo)
    assert r.returncode == 0, r.stderr
    if command[0] == "render":      # from git alone vision/small would go to onprem-sjc's owned nodes
        assert (repo / "out/gke-usc1/jobsets/vision.small.yaml").is_file()
        assert not (repo / "out/onprem-sjc/jobsets/vision.small.yaml").exists()
    elif command[0] == "plan":
        assert "| vision/small | gke-usc1/h100 | 0 | 0 (1) | 88.49 | kept |" in r.stdout
    elif command[0] == "cost":
        assert "gke-usc1" in r.stdout and "88.49" in r.stdout
    else:
        assert "gke-usc1/h100" in r.stdout


def test_a_bad_observed_file_is_a_located_error(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (tmp_path / "snap.json").write_text('{"version": 1, "observed_at": "yesterday", "clusters": []}')
    r = _fleet("plan", "--observed", str(tmp_path / "snap.json"), cwd=repo)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "snap.json: field `observed_at`" in r.stderr and "hint:" in r.stderr
    r = _fleet("plan", "--observed", str(tmp_path / "missing.json"), cwd=repo)
    assert r.returncode == 2 and "cannot read the snapshot" in r.stderr



def test_gc_lists_finished_and_failed_job_files_and_removes_them(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", {"jobs/lang/done.yaml": job("done", team="lang")})
    v = check(with_files({**FILES, "jobs/lang/done.yaml": job("done", team="lang")}), CAT)
    record = Completion(job="lang/done", digest=spec_digest(next(j for j in v.loaded.jobs if j.id == "lang/done")),
                        result="succeeded")
    stale = Completion(job="vision/small", digest="0000000000000000", result="succeeded")   # an older spec
    snap = snapshot(300, observed("gke-usc1", stamped(v, "vision/pretrain", "v5p-4x4x4", "failed", units=(0, 1)),
                                  completions=(record, stale)))
    (tmp_path / "snap.json").write_text(snap.to_json())
    r = _fleet("gc", "--observed", str(tmp_path / "snap.json"), "--format", "json", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"jobs": [
        {"job": "lang/done", "file": "jobs/lang/done.yaml", "result": "succeeded", "clusters": ["gke-usc1"]},
        {"job": "vision/pretrain", "file": "jobs/vision/pretrain.yaml", "result": "failed", "clusters": ["gke-usc1"]}]}
    r = _fleet("gc", "--observed", str(tmp_path / "snap.json"), "--write", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert "jobs/vision/pretrain.yaml: failed on gke-usc1: removed" in r.stdout
    assert not (repo / "jobs/lang").exists() and not (repo / "jobs/vision/pretrain.yaml").exists()
    assert (repo / "jobs/vision/small.yaml").is_file()
    r = _fleet("gc", "--observed", str(tmp_path / "snap.json"), cwd=repo)
    assert r.stdout == "no finished or failed job files to remove\n"


def test_observe_records_completions_and_carries_over_an_unreachable_cluster(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    for rel, data in with_context().items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    v = check(with_context(), CAT)
    out = tmp_path / "snap.json"

    def observe(at: str) -> Snapshot:
        env = {**os.environ, "KUBECONFIG": str(kc), "FLEET_NOW": at}
        r = subprocess.run([sys.executable, "-m", "reconciler", "observe", "--record-completions", "--out", str(out)],
                           cwd=repo, env=env, capture_output=True, text=True, check=False)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        return Snapshot.model_validate_json(out.read_bytes())

    api = KubeCluster("gke-usc1").start()
    kc = write_kubeconfig(tmp_path / "kubeconfig", {"usc1": api.url})
    api.add(*stamped(v, "vision/pretrain", "v5p-4x4x4", "succeeded", units=(0, 1)),
            *stamped(v, "vision/small", "h100", "running", units=(0,), accel="gpu", per_pod=8))
    first = observe("2026-11-23T03:00:00Z").cluster("gke-usc1")
    assert first is not None and [r.job for r in first.completions] == ["vision/pretrain"]
    assert ("fleet-system", "fleet-completions") in api.objects["configmaps"]
    api.stop()                                                       # the cluster goes away
    observe("2026-11-23T03:10:00Z")
    gone = observe("2026-11-23T03:20:00Z").cluster("gke-usc1")
    assert gone is not None and gone.status == "unreachable"
    assert gone.unreachable_since == datetime(2026, 11, 23, 3, 10, tzinfo=UTC)
    assert [r.job for r in gone.completions] == ["vision/pretrain"]
    assert [js.job_id for js in gone.last_running] == ["vision/small"]


def test_a_cordoned_slice_counts_as_failed_from_when_fleet_first_saw_it_cordoned() -> None:
    """A cordon (`spec.unschedulable`) has no condition and no time (its taint is NoSchedule, and the API writes
    `timeAdded` only for NoExecute taints): its age runs from when Fleet first saw it, carried from snapshot to
    snapshot (`fleet observe --out`, the reconcile loop). Seen 5 minutes ago: kept; 11 minutes: moves."""
    v = fleet()
    nodes = slices("v5p-4x4x4", 4)
    nodes[1]["spec"]["unschedulable"] = True
    objs = [*stamped(v, "vision/pretrain", "v5p-4x4x4", "running", units=(0, 1)), *nodes]
    first = carry_over(None, snapshot(30, observed("gke-usc1", objs)))
    seen = next(n for n in first.clusters[0].nodes if n.unschedulable)
    assert seen.cordoned_since == T0 + timedelta(minutes=30)
    soon = carry_over(first, snapshot(35, observed("gke-usc1", objs)))
    assert where(plan(v, observed=soon), "vision/pretrain") == ("gke-usc1", "v5p-4x4x4", (0, 1), "kept")
    late = carry_over(soon, snapshot(41, observed("gke-usc1", objs)))
    pl = plan(v, observed=late).placement_of("vision/pretrain")
    assert pl is not None and pl.status == "moved" and 1 not in pl.units
    assert "node v5p-4x4x4-s1-0 cordoned for 11 min (threshold 10)" in pl.reason
    nodes[1]["spec"]["unschedulable"] = False                      # uncordoned, then cordoned again: a new time
    uncordoned = carry_over(late, snapshot(42, observed("gke-usc1", objs)))
    nodes[1]["spec"]["unschedulable"] = True
    again = carry_over(uncordoned, snapshot(43, observed("gke-usc1", objs)))
    assert next(n for n in again.clusters[0].nodes if n.unschedulable).cordoned_since == T0 + timedelta(minutes=43)


def test_the_reconcile_loop_remembers_when_it_first_saw_a_cordon_across_runs() -> None:
    """`fleet reconcile --once` starts without the previous snapshot: its memory (`--memory FILE`) keeps when
    each node was first seen cordoned, so the age of a cordon survives a restart."""
    from reconciler.reconcile.decide import LoopMemory, remember_clusters, since_unreachable

    v = fleet()
    nodes = slices("v5p-4x4x4", 2)
    nodes[1]["spec"]["unschedulable"] = True
    first = carry_over(None, snapshot(30, observed("gke-usc1", nodes)))
    mem = remember_clusters(first, LoopMemory(), first.observed_at)
    assert mem.cordoned_since == {"gke-usc1/v5p-4x4x4-s1-0": T0 + timedelta(minutes=30)}
    mem = LoopMemory.model_validate_json(mem.model_dump_json())             # written to, and read from, a file
    fresh = carry_over(None, snapshot(41, observed("gke-usc1", nodes)))     # a new run: no previous snapshot
    seen = since_unreachable(fresh, mem, fresh.observed_at)
    assert [n.cordoned_since for n in seen.clusters[0].nodes] == [None, T0 + timedelta(minutes=30)]
    assert "cordoned for 11 min" in live_inputs(v, seen).failed_units["gke-usc1/v5p-4x4x4"][1]
    nodes[1]["spec"]["unschedulable"] = False
    healed = carry_over(None, snapshot(42, observed("gke-usc1", nodes)))
    assert remember_clusters(healed, mem, healed.observed_at).cordoned_since == {}


def test_a_service_serving_on_one_pool_stays_there_when_planned_from_what_runs() -> None:
    """A fresh plan (no base: a new checkout, a restarted reconciler) keeps an inference service where its
    Deployment runs, not where an empty fleet would put it."""
    from kube_objects import serving

    from reconciler.observe.parse import parse_deployment

    chat = job("chat", body="kind: inference\nreplicas: 2\nport: 8080\n")
    v = fleet({"jobs/vision/chat.yaml": chat})
    fresh = where(plan(v), "vision/chat")
    assert fresh is not None
    other = next(p for p in v.pools if p.accelerator == "nvidia-h100-80gb" and (p.cluster, p.name) != fresh[:2]
                 and p.capacity != "spot")
    dep = parse_deployment(serving("vision", "chat", other.name, replicas=2))
    snap = snapshot(30, ClusterObservation(name=other.cluster, status="ok", services=(dep,) if dep else ()))
    kept = [(pl.cluster, pl.pool, pl.status) for pl in plan(v, observed=snap).placements if pl.job == "vision/chat"]
    assert kept == [(other.cluster, other.name, "kept")]


def test_a_service_whose_units_are_not_known_never_takes_a_running_jobs_slice() -> None:
    """Issue 20: a Deployment says nothing of units, so a service running in a TPU pool was kept (by its
    higher priority, first) on the pool's first free slice in the plan's bookkeeping: the slice the running
    `pretrain` held. The loop then deleted and re-created `pretrain` ("its units ... are gone") while other
    slices of the pool were free. What runs on known units is kept first; a service takes what is left."""
    from kube_objects import serving

    from reconciler.observe.parse import parse_deployment

    chat = ("name: chat\nteam: vision\npriority: critical\nkind: inference\nreplicas: 1\nport: 8080\n"
            "options:\n  - {accelerator: tpu-v5p, topology: 4x4x4}\nimage: img:1\n")
    v = fleet({"jobs/vision/chat.yaml": chat, "jobs/vision/small.yaml": None})
    dep = parse_deployment(serving("vision", "chat", "v5p-4x4x4", replicas=1, ready=1))
    assert dep is not None
    objs = [*stamped(v, "vision/pretrain", "v5p-4x4x4", "running", units=(0, 1)), *slices("v5p-4x4x4", 4)]
    seen = observed("gke-usc1", objs)
    snap = snapshot(60, seen.model_copy(update={"services": (dep,)}))
    p = plan(v, observed=snap)
    assert where(p, "vision/pretrain") == ("gke-usc1", "v5p-4x4x4", (0, 1), "kept")
    [c] = [x for x in p.placements if x.job == "vision/chat"]
    assert (c.cluster, c.pool, c.status) == ("gke-usc1", "v5p-4x4x4", "kept") and set(c.units) <= {2, 3}


def test_a_services_slices_are_read_from_its_pods() -> None:
    """With its pods observed, a service on TPU slices is kept on the slices it runs on (not the first free
    ones of the plan's bookkeeping)."""
    from kube_objects import serving

    from reconciler.observe.parse import parse_deployment, parse_pod

    chat = ("name: chat\nteam: vision\npriority: critical\nkind: inference\nreplicas: 1\nport: 8080\n"
            "options:\n  - {accelerator: tpu-v5p, topology: 4x4x4}\nimage: img:1\n")
    v = fleet({"jobs/vision/chat.yaml": chat, "jobs/vision/small.yaml": None})
    dep = parse_deployment(serving("vision", "chat", "v5p-4x4x4", replicas=1, ready=1))
    pod = parse_pod({"metadata": {"name": "chat-x", "namespace": "vision", "labels": {
        "fleet.dev/team": "vision", "fleet.dev/job": "chat", "fleet.dev/pool": "v5p-4x4x4"}},
        "spec": {"nodeName": "v5p-4x4x4-s3-0"}, "status": {"phase": "Running"}})
    assert dep is not None and pod is not None
    objs = [*stamped(v, "vision/pretrain", "v5p-4x4x4", "running", units=(0, 1)), *slices("v5p-4x4x4", 4)]
    snap = snapshot(60, observed("gke-usc1", objs).model_copy(update={"services": (dep,), "pods": (pod,)}))
    p = plan(v, observed=snap)
    assert where(p, "vision/chat") == ("gke-usc1", "v5p-4x4x4", (3,), "kept")
    assert where(p, "vision/pretrain") == ("gke-usc1", "v5p-4x4x4", (0, 1), "kept")


@pytest.mark.parametrize("failed", ["jobsets", "nodes", "workloads", "pods"])
def test_a_cluster_whose_list_failed_is_not_read_as_running_nothing(failed: str) -> None:
    """Review of issue 20: a cluster that answers but fails one list (a 403 on JobSets, a 500 on Nodes) was
    read as holding none of them: the loop started a second copy of a job that runs there, or shrank a pool
    under it. Such a cluster is treated as unreachable for the decision (what ran there stays, nothing is
    done there), and, since it answers, it never counts as lost."""
    from reconciler.observe.model import ObserveProblem
    from reconciler.reconcile.decide import Knobs, LoopMemory
    from reconciler.reconcile.step import step

    v = fleet()
    knobs = Knobs.of(v.loaded.placement)
    base = where(plan(v), "vision/pretrain")
    assert base is not None
    cluster_name, pool_name, units, _ = base
    objs = [*stamped(v, "vision/pretrain", pool_name, "running", units=units), *slices(pool_name, 4)]
    first = step(v, snapshot(60, observed(cluster_name, objs)), LoopMemory(), last_snapshot=None, last_plan=None,
                 knobs=knobs, now=T0 + timedelta(minutes=60))
    assert [a.describe() for a in first.decision.actions if a.job == "vision/pretrain"] == []
    problem = ObserveProblem(resource=failed, kind="forbidden", message=f"HTTP 403 on {failed}", hint="grant it")
    seen = observed(cluster_name, [o for o in objs if o["kind"].lower() + "s" != failed])
    later, memory = first, first.decision.memory
    for minute in (61, 90, 200):       # long past cluster_lost_after_minutes: it answers, so it is never lost
        broken = seen.model_copy(update={"status": "degraded", "problems": (problem,)})
        later = step(v, snapshot(minute, broken), memory, last_snapshot=later.snapshot, last_plan=later.plan,
                     knobs=knobs, now=T0 + timedelta(minutes=minute))
        memory = later.decision.memory
        assert [a.describe() for a in later.decision.actions if a.job == "vision/pretrain"
                or a.cluster == cluster_name] == [], minute
        assert later.decision.lost_clusters == ()
        assert where(later.plan, "vision/pretrain") == (cluster_name, pool_name, units, "kept")


def test_a_running_job_whose_options_swap_is_numbered_by_the_gang_it_runs() -> None:
    """Planned from what runs, `x` runs 8 GPUs on node 0 of gke-usc1/h100 (the base's option 0); a commit swaps
    its options. live_base numbered what runs by the first option that runs on the pool (now 4 GPUs): the plan's
    bookkeeping held 4 GPUs of node 0 for it, and a waiting 4-GPU job was placed beside it on a full node (the
    loop would start it where it cannot run). It is the option of the gang the base placed there (as
    plan/sticky.py `_option_kept` keeps it)."""
    eight = "{accelerator: nvidia-h100-80gb, count: 8}"
    four = "{accelerator: nvidia-h100-80gb, count: 4, relative_speed: 0.3}"
    def x(*options: str) -> str:
        return "name: x\nteam: vision\noptions:\n" + "".join(f"  - {o}\n" for o in options) + "image: img:1\n"
    gone = {"fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None}
    old = fleet({**gone, "jobs/vision/x.yaml": x(eight, four)})
    base = plan(old)
    assert where(base, "vision/x") == ("gke-usc1", "h100", (0,), "new")
    assert base.placement_of("vision/x").option == 0   # type: ignore[union-attr]
    v = fleet({**gone, "jobs/vision/x.yaml": x(four, eight), "jobs/vision/w.yaml": job("w", count=4)})
    snap = snapshot(60, observed("gke-usc1", stamped(v, "vision/x", "h100", "running", units=(0,),
                                                     accel="gpu", per_pod=8)))
    p = plan(v, base=base, observed=snap)
    kept = p.placement_of("vision/x")
    assert kept is not None
    assert (kept.option, kept.accelerators_per_unit, kept.units, kept.status) == (1, 8, (0,), "kept")
    assert where(p, "vision/w")[:3] == ("gke-usc1", "h100", (1,))   # type: ignore[index]


def test_a_running_job_whose_file_changed_its_shape_is_re_created_as_the_plan_from_git_says() -> None:
    """`x` runs 8 GPUs on node 0 (the base's option); a commit makes it ask 4. From git the plan re-creates it ("the
    job's shape changed": the pull request showed that move). From what runs, live_base took the first option
    that runs as its gang: `x` was kept silently as a 4-GPU job, the loop never carried out the reviewed change,
    and a waiting 4-GPU job was placed on node 0, which `x`'s 8 GPUs fill. Where `x` already runs the new spec
    (its JobSet's digest is the file's), the base's 8 GPUs are not what runs: it is kept."""
    eight = "{accelerator: nvidia-h100-80gb, count: 8}"
    four = "{accelerator: nvidia-h100-80gb, count: 4}"
    def x(option: str) -> str:
        return f"name: x\nteam: vision\noptions:\n  - {option}\nimage: img:1\n"
    gone = {"fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None}
    old = fleet({**gone, "jobs/vision/x.yaml": x(eight)})
    base = plan(old)
    v = fleet({**gone, "jobs/vision/x.yaml": x(four), "jobs/vision/w.yaml": job("w", count=4)})
    from_git = plan(v, base=base).placement_of("vision/x")
    assert from_git is not None and (from_git.status, from_git.reason) == ("moved", "the job's shape changed")
    runs_old = snapshot(60, observed("gke-usc1", stamped(old, "vision/x", "h100", "running", units=(0,),
                                                         accel="gpu", per_pod=8)))
    live = plan(v, base=base, observed=runs_old).placement_of("vision/x")
    assert live is not None
    assert (live.status, live.reason, live.accelerators_per_unit) == ("moved", "the job's shape changed", 4)
    runs_new = snapshot(60, observed("gke-usc1", stamped(v, "vision/x", "h100", "running", units=(0,),
                                                         accel="gpu", per_pod=4)))
    kept = plan(v, base=base, observed=runs_new).placement_of("vision/x")
    assert kept is not None and (kept.status, kept.accelerators_per_unit, kept.units) == ("kept", 4, (0,))


def test_a_service_seen_running_fewer_replicas_than_its_file_keeps_only_those_beyond_quota() -> None:
    """lang (16 H100s, the cohort's only ones) runs 1 replica of its service `r` (8 H100s a replica) on
    gke-usc1/h100, a Deployment whose pods are not seen (so no units are known); its file now asks 3. Before,
    a first cycle (no base: a restarted reconciler) kept all 3 replicas, "kept" whatever quota says (24 H100s
    on a quota of 16), and the loop would scale the Deployment to 3: a tenant raised its replicas past its quota.
    Now what runs is kept (the replica its object runs) and the others are placed as new work: one more fits
    lang's quota, the third waits for quota. A Deployment seen with all 3 replicas keeps all 3 (what runs is
    kept, as before)."""
    from kube_objects import serving

    from reconciler.observe.parse import parse_deployment

    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 0}") \
        .replace("nvidia-h100-80gb: {nominal: 32}", "nvidia-h100-80gb: {nominal: 16}")
    r = job("r", team="lang", count=8, body="kind: inference\nreplicas: 3\nport: 8080\nspot: never\n")
    v = fleet({"policies/teams.yaml": teams, "jobs/lang/r.yaml": r})

    def seen(replicas: int) -> Plan:
        dep = parse_deployment(serving("lang", "r", "h100", replicas=replicas, ready=replicas))
        assert dep is not None
        return plan(v, observed=snapshot(30, ClusterObservation(name="gke-usc1", status="ok", services=(dep,))))

    one = seen(1)
    # 16 H100s: 2 replicas of 8, not 3; the one added is new (not `moved`: no replica left a place)
    assert [(pl.cluster, pl.pool, len(pl.units), pl.status) for pl in one.placements if pl.job == "lang/r"] == [
        ("gke-usc1", "h100", 1, "kept"), ("onprem-sjc", "h100-owned", 1, "new")]
    [waits] = [x for x in one.pending if x.job == "lang/r"]
    assert waits.reasons[0] == "1 of 3 replicas wait; the others run"
    assert waits.reasons[1].startswith("insufficient nvidia-h100-80gb quota for team lang: 8 GPUs more needed"), \
        waits.reasons
    every = seen(3)    # what runs is kept, whatever quota says
    assert [(pl.pool, len(pl.units), pl.status) for pl in every.placements if pl.job == "lang/r"] == [
        ("h100", 3, "kept")]


def test_a_gang_whose_file_changed_its_size_on_the_node_it_runs_on_is_restarted_not_left_running() -> None:
    """`vision/a` runs 8 H100s on one node of onprem-sjc/h100-owned; its file now asks 4. The plan re-creates it
    on the same node ("the job's shape changed", `moved`, units (0,)), and the PR comment says it moves. Before,
    the loop restarted a `moved` job only where its units differ, so it did nothing: the JobSet ran on with 8,
    and the next plan counted it at 4 on a node it still filled (a job of 4 more was started there). Now a copy
    that runs an earlier spec of its file is restarted where the plan moves it onto its own units; one that runs
    the file as it is, is left alone."""
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    was = fleet({"jobs/vision/a.yaml": job("a", count=8, body="checkpoint_minutes: 30\n"),
                 "jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None})
    now = fleet({"jobs/vision/a.yaml": job("a", count=4, body="checkpoint_minutes: 30\n"),
                 "jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None})
    runs = observed("onprem-sjc", stamped(was, "vision/a", "h100-owned", "running", units=(0,), admitted=20,
                                          accel="gpu", per_pod=8))
    seen = snapshot(60, runs)
    p = plan(now, observed=seen)
    assert where(p, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "moved")
    assert p.placement_of("vision/a").reason == "the job's shape changed"     # type: ignore[union-attr]
    acts = [a for a in decide(p, seen, LoopMemory(), Knobs(), seen.observed_at, jobs=job_facts(now)).actions
            if a.job == "vision/a"]
    assert [(a.kind, a.units, a.reason, a.force) for a in acts] == [("move", (0,), "the job's shape changed", True)]
    same = snapshot(60, observed("onprem-sjc", stamped(now, "vision/a", "h100-owned", "running", units=(0,),
                                                       admitted=20, accel="gpu", per_pod=4)))
    kept = plan(now, observed=same)
    assert where(kept, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "kept")
    assert [a for a in decide(kept, same, LoopMemory(), Knobs(), same.observed_at,
                              jobs=job_facts(now)).actions if a.job == "vision/a"] == []


def test_a_running_job_whose_changed_file_no_pool_can_hold_stops_rather_than_share_its_node() -> None:
    """`vision/a` runs 8 H100s on node 0 of onprem-sjc/h100-owned (sjc); its file now requires data region
    eu-west4, where no pool has room. The plan leaves it pending ("was running, but ... outside the job's
    data_region") and places `vision/b` on node 0, and the PR comment says it stops. Before, the loop kept `a`
    running (only a preemption or a removed file stopped running work) and started `b` onto the node `a` still
    filled. Now a copy of an earlier spec that the plan cannot keep stops, saying why, as `b` starts; a running
    copy of the file as it is, left pending, is still kept."""
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    b = job("b", count=8, body="checkpoint_minutes: 30\n")
    gone = {"jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None, "jobs/vision/b.yaml": b}
    was = fleet({"jobs/vision/a.yaml": job("a", count=8, body="checkpoint_minutes: 30\n"), **gone})
    now = fleet({"jobs/vision/a.yaml": job("a", count=8, body="checkpoint_minutes: 30\ndata_region: eu-west4\n"
                                                               "data_residency: required\n"), **gone})
    seen = snapshot(60, observed("onprem-sjc", stamped(was, "vision/a", "h100-owned", "running", units=(0,),
                                                       admitted=20, accel="gpu", per_pod=8)))
    p = plan(now, observed=seen)
    assert where(p, "vision/a") is None and where(p, "vision/b") == ("onprem-sjc", "h100-owned", (0,), "new")
    acts = {(a.kind, a.job): a for a in decide(p, seen, LoopMemory(), Knobs(), seen.observed_at,
                                                jobs=job_facts(now)).actions if a.job}
    assert sorted(acts) == [("start", "vision/b"), ("stop", "vision/a")]
    stop = acts["stop", "vision/a"]
    assert (stop.cluster, stop.pool) == ("onprem-sjc", "h100-owned")
    assert stop.reason.startswith("jobs/vision/a.yaml changed (spec digest ")
    assert "outside the job's data_region eu-west4 (data_residency: required)" in stop.reason
    # the same running copy under the file it started with is not touched by this rule
    same = fleet({"jobs/vision/a.yaml": job("a", count=8, body="checkpoint_minutes: 30\n"), **gone})
    kept = plan(same, observed=seen)
    assert where(kept, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "kept")
    assert [a.kind for a in decide(kept, seen, LoopMemory(), Knobs(), seen.observed_at,
                                   jobs=job_facts(same)).actions if a.job == "vision/a"] == []


def test_a_running_job_whose_file_changed_a_field_that_does_not_keep_it_away_is_not_stopped_for_it() -> None:
    """`vision/a` runs on onprem-sjc, and the cluster is marked `status: down`; no other
    pool has room, and the job's file changed only its duration. The plan leaves it pending ("was running, but
    cluster onprem-sjc is down"), a reason its file did not cause. Before, the loop stopped it as if its file had
    moved it away (it runs an earlier spec); now it is kept, as any running job the plan leaves pending."""
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    from builders import ONPREM

    down = ONPREM.replace("region: sjc\n", "region: sjc\nstatus: down\n")
    common = {"jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None, "fleet/clusters/gke-usc1.yaml": None,
              "fleet/clusters/onprem-sjc.yaml": down}
    a = job("a", count=8, body="checkpoint_minutes: 30\nduration_hours: 10\n")
    was = fleet({"jobs/vision/a.yaml": a, **common})
    longer = fleet({"jobs/vision/a.yaml": a.replace("duration_hours: 10", "duration_hours: 12"), **common})
    seen = snapshot(60, observed("onprem-sjc", stamped(was, "vision/a", "h100-owned", "running", units=(0,),
                                                       admitted=20, accel="gpu", per_pod=8)))
    p = plan(longer, observed=seen)
    assert where(p, "vision/a") is None
    assert "was running, but cluster onprem-sjc is down" in next(q for q in p.pending if q.job == "vision/a").reasons
    d = decide(p, seen, LoopMemory(), Knobs(), seen.observed_at, jobs=job_facts(longer))
    assert [x for x in d.actions if x.job == "vision/a"] == []
    assert any("vision/a runs on onprem-sjc/h100-owned but the plan leaves it pending: kept" in n for n in d.notes)


def test_a_running_job_whose_file_changed_its_image_is_re_created_where_it_runs_as_the_pr_says() -> None:
    """`vision/a` runs img:1 on node 0 of onprem-sjc/h100-owned; its file now says img:2. JobSet's webhook refuses
    a change of a JobSet's pods, so the running copy cannot take it. Before, the plan kept the job (its shape is
    the same), the loop did nothing, and `fleet apply` sent the new spec over the running JobSet ("updated"). Now
    the plan re-creates it where it runs, saying why: from git against the base commit (the PR's plan, naming the
    field) and from what runs (the JobSet's `fleet.dev/pod-digest`); the loop restarts it there. A change of no
    pod field (its duration) keeps it, and a copy that runs the file's pods is left alone."""
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    gone = {"jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None}
    was = fleet({"jobs/vision/a.yaml": job("a", count=8, body="checkpoint_minutes: 30\n"), **gone})
    now = fleet({"jobs/vision/a.yaml": job("a", count=8, body="checkpoint_minutes: 30\n").replace("img:1", "img:2"),
                 **gone})
    why = "its file changed what its pods run{}, which a running JobSet cannot take: re-created with it where it " \
          "runs, from its last checkpoint"
    pr = change(now, was)                                    # the pull request's plan, from git
    assert where(pr.head.plan, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "moved")
    assert pr.head.plan.placement_of("vision/a").reason == why.format(" (image)")   # type: ignore[union-attr]
    assert pr.diff is not None and [(j.change, j.before, j.after) for j in pr.diff.jobs if j.job == "vision/a"] == [
        ("move", "onprem-sjc/h100-owned", "onprem-sjc/h100-owned")]
    exact = change(now, was, solver="exact").head.plan.placement_of("vision/a")     # the exact solver says so too
    assert exact is not None and (exact.status, exact.reason) == ("moved", why.format(" (image)"))
    story = explain(now, "vision/a", was)                                           # and `fleet explain`
    assert "status moved" in story and "**decided by**: running work keeps its units (stickiness), and is " \
        f"re-created on them: {why.format(' (image)')}" in story
    longer = fleet({"jobs/vision/a.yaml": job("a", count=8, body="checkpoint_minutes: 30\nduration_hours: 9\n"),
                    **gone})
    assert where(change(longer, was).head.plan, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "kept")
    seen = snapshot(60, observed("onprem-sjc", stamped(was, "vision/a", "h100-owned", "running", units=(0,),
                                                       admitted=20, accel="gpu", per_pod=8)))
    p = plan(now, observed=seen)                              # the loop's plan, from what runs
    assert where(p, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "moved")
    assert p.placement_of("vision/a").reason == why.format("")      # type: ignore[union-attr]
    acts = [a for a in decide(p, seen, LoopMemory(), Knobs(), seen.observed_at, jobs=job_facts(now)).actions
            if a.job == "vision/a"]
    assert [(a.kind, a.units, a.reason, a.force) for a in acts] == [("move", (0,), why.format(""), True)]
    same = snapshot(60, observed("onprem-sjc", stamped(now, "vision/a", "h100-owned", "running", units=(0,),
                                                       admitted=20, accel="gpu", per_pod=8)))
    kept = plan(now, observed=same)
    assert where(kept, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "kept")
    assert [a for a in decide(kept, same, LoopMemory(), Knobs(), same.observed_at, jobs=job_facts(now)).actions
            if a.job == "vision/a"] == []


def test_a_running_job_whose_image_changed_keeps_its_node_while_a_job_that_may_not_preempt_it_waits() -> None:
    """Four owned nodes, each running one research job of `vision`; a production job of the team waits, and the
    policy forbids preemption within the team. `vision/a`'s file changes its image. Before (8323228), the job was
    sent back to the queue to be re-created, the production job took its node with no preemption, and the loop
    stopped `a` ("it waits"). Now it keeps its units and is re-created on them; the production job still waits."""
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    never = PRIORITIES.replace("within_team: lower_priority", "within_team: never")
    common: dict[str, str | None] = {
        "jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None, "fleet/clusters/gke-usc1.yaml": None,
        "policies/priorities.yaml": never,
        "jobs/vision/b.yaml": job("b", count=8, body="priority: production\ncheckpoint_minutes: 30\n"),
        **{f"jobs/vision/x{i}.yaml": job(f"x{i}", count=8, body="checkpoint_minutes: 30\n") for i in (1, 2, 3)}}
    a = job("a", count=8, body="checkpoint_minutes: 30\n")
    was = fleet({"jobs/vision/a.yaml": a, **common})
    now = fleet({"jobs/vision/a.yaml": a.replace("img:1", "img:2"), **common})
    objs = [o for i, name in enumerate(("a", "x1", "x2", "x3"))
            for o in stamped(was, f"vision/{name}", "h100-owned", "running", units=(i,), admitted=20, accel="gpu",
                             per_pod=8)]
    seen = snapshot(60, observed("onprem-sjc", objs))
    p = plan(now, observed=seen)
    assert where(p, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "moved") and where(p, "vision/b") is None
    assert p.preemptions == ()
    acts = [(x.kind, x.job) for x in decide(p, seen, LoopMemory(), Knobs(), seen.observed_at,
                                            jobs=job_facts(now)).actions if x.job in ("vision/a", "vision/b")]
    assert acts == [("move", "vision/a")]
    assert p.live is not None and [w.job for w in p.live.lost_work] == ["vision/a"]     # the restart's lost work
    # where the policy lets the production job preempt it, it is preempted at its next checkpoint instead: no
    # restart, and no work lost (before, the restart's loss was still reported)
    preempting = fleet({"jobs/vision/a.yaml": a.replace("img:1", "img:2"), **common,
                        "policies/priorities.yaml": PRIORITIES})
    q = plan(preempting, observed=seen)
    assert [x.job for x in q.preemptions] == ["vision/a"] and q.live is not None and q.live.lost_work == ()


@pytest.mark.parametrize("edit", [
    ("env:\n  A: '1'\n  B: '2'\n", "env:\n  B: '2'\n  A: '1'\n"),      # the same names in another order
    ("", "max_restarts: 3\n"),                                            # the default written out
    ("", "framework: jobset\n"),
])
def test_a_file_that_renders_the_same_pods_is_no_change_of_what_they_run(edit: tuple[str, str]) -> None:
    """Before, the pod digest and the PR's comparison read the fields as written: env names reordered, or a
    default spelled out, re-created a running job for nothing (render sorts env and writes the defaults). Now
    both the PR's plan and the loop's keep it."""
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    gone = {"jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None}
    was = fleet({"jobs/vision/a.yaml": job("a", count=8, body="checkpoint_minutes: 30\n" + edit[0]), **gone})
    now = fleet({"jobs/vision/a.yaml": job("a", count=8, body="checkpoint_minutes: 30\n" + edit[1]), **gone})
    assert where(change(now, was).head.plan, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "kept")
    seen = snapshot(60, observed("onprem-sjc", stamped(was, "vision/a", "h100-owned", "running", units=(0,),
                                                       admitted=20, accel="gpu", per_pod=8)))
    p = plan(now, observed=seen)
    assert where(p, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "kept")
    assert [a for a in decide(p, seen, LoopMemory(), Knobs(), seen.observed_at, jobs=job_facts(now)).actions
            if a.job == "vision/a"] == []


def test_a_pool_shrunk_under_a_running_job_whose_file_changed_another_field_does_not_stop_it() -> None:
    """onprem-sjc/h100-owned is lowered to one node under `vision/a`, which runs on two, and the H100 pools of
    gke-usc1 are full; `a`'s file changed only its duration. Before, the plan's reason read "its option 0 no longer
    runs on ...", which the loop took for its file's doing (the copy runs an earlier spec) and stopped it. Now the
    reason says the pool no longer holds it, and the loop keeps it, as it does when the file is unchanged."""
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    from builders import ONPREM

    small = ONPREM.replace("min: 4\n    max: 4\n", "min: 1\n    max: 1\n")
    common = {"jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None,
              **{f"jobs/vision/{n}.yaml": job(n, count=64, body="checkpoint_minutes: 30\n") for n in ("b1", "b2")}}
    a = job("a", count=16, body="checkpoint_minutes: 30\nduration_hours: 10\n")
    was = fleet({"jobs/vision/a.yaml": a, **common})
    now = fleet({"jobs/vision/a.yaml": a.replace("duration_hours: 10", "duration_hours: 12"),
                 "fleet/clusters/onprem-sjc.yaml": small, **common})
    busy = [o for n, pool in (("b1", "h100"), ("b2", "h100-spot"))
            for o in stamped(was, f"vision/{n}", pool, "running", units=tuple(range(8)), admitted=5, accel="gpu",
                             per_pod=8, replicas=8)]
    seen = snapshot(60, observed("gke-usc1", busy),
                    observed("onprem-sjc", stamped(was, "vision/a", "h100-owned", "running", units=(0, 1),
                                                   admitted=20, accel="gpu", per_pod=8, replicas=2)))
    p = plan(now, base=plan(was), observed=seen)
    assert where(p, "vision/a") is None
    [why] = [r for q in p.pending if q.job == "vision/a" for r in q.reasons if r.startswith("was running, but")]
    assert why.startswith("was running, but pool onprem-sjc/h100-owned no longer holds what it runs")
    d = decide(p, seen, LoopMemory(), Knobs(), seen.observed_at, jobs=job_facts(now))
    assert [x for x in d.actions if x.job == "vision/a"] == []
