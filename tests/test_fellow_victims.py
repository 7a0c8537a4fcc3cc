"""A preemption's victim that loses nothing by running on (a service that runs, a job that checkpoints continuously)
runs on while a fellow victim of the same preemptor runs to its checkpoint, and stops with it: the reconcile loop
has it so (reconcile/ckptwait.py). Until the fortieth session (2026-12-07) the plan counted it stopped at once, so a
job of its team started on its spend (and quota) while it ran on: the team went over its budget's pace for that
cycle. Now the plan holds it as it holds the victim at its checkpoint (`victims.runs_on`, `preempt.take`), and its
preemption says so. Before the review of the session's change, a service was held only where seen as Deployments:
one checkpointing continuously and seen as a JobSet (as the simulator's services are) still went as stopped at once.

gke-usc1 alone; vision's 16 H100s (no borrowing) are held by `a` (8 GPUs, 20 minutes past its 30-minute checkpoint;
a 15-minute window holds it 10 minutes) and the service `svc` (8 GPUs, a Deployment). `h` (production, 16 GPUs)
preempts both; `t` (research, a v5p slice) would start on the service's spend."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from kube_objects import serving
from test_live import fleet, observed, snapshot, stamped

from reconciler.apply.safety import checkpoint_holds
from reconciler.observe.parse import parse_deployment
from reconciler.pipeline import plan
from reconciler.plan.types import Plan
from reconciler.reconcile.decide import decide
from reconciler.reconcile.model import Knobs, LoopMemory, job_facts
from reconciler.validate import Validated

from builders import PRIORITIES, TEAMS, job

WINDOW = PRIORITIES.replace("preemption:\n", "preemption:\n  checkpoint_window_minutes: 15\n")
NODE = 88.49    # an on-demand H100 node of gke-usc1/h100 an hour (the catalog's a3-highgpu-8g)
SLICE = 268.8   # t's v5p 4x4x4 slice an hour


CONTINUOUS = "name: svc\nteam: vision\nkind: inference\nport: 8080\nimage: img:1\ncheckpoint_minutes: 0\n" \
             "options:\n  - {accelerator: nvidia-h100-80gb, count: 8}\n"   # `svc` as the simulator's services are


def _plan(budget: float, fellow: str = "service", files: dict[str, str] | None = None, a_admitted: float = 38,
          svc_deleting: bool = False, svc_untimed: bool = False) -> tuple[Validated, object, Plan]:
    """The fleet above planned from what runs; `files` replace its files, `a` admitted `a_admitted` minutes into
    the snapshot's hour, and the JobSet of `svc` (fellow "continuous") already being deleted where `svc_deleting`,
    its Workload's conditions without a time where `svc_untimed`."""
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 16, borrowing_limit: 0}") \
        .replace("budget_monthly_usd: 5000000", f"budget_monthly_usd: {budget:.0f}")
    ckpt = "checkpoint_minutes: 30\nspot: never\n"
    v = fleet({"policies/teams.yaml": teams, "policies/priorities.yaml": WINDOW, "jobs/vision/small.yaml": None,
               "jobs/vision/pretrain.yaml": None, "fleet/clusters/onprem-sjc.yaml": None,
               "jobs/vision/a.yaml": job("a", count=8, body=ckpt + "duration_hours: 10\n"),
               "jobs/vision/svc.yaml": CONTINUOUS if fellow == "continuous" else
               "name: svc\nteam: vision\nkind: inference\nport: 8080\nimage: img:1\n"
               "options:\n  - {accelerator: nvidia-h100-80gb, count: 8}\n",
               "jobs/vision/h.yaml": job("h", count=16, body="priority: production\nspot: never\n"),
               "jobs/vision/t.yaml": "name: t\nteam: vision\nimage: img:1\nduration_hours: 1\nspot: never\n"
                                     "options:\n  - {accelerator: tpu-v5p, topology: 4x4x4}\n", **(files or {})})
    gpu = {"accel": "gpu", "per_pod": 8}
    objs = stamped(v, "vision/a", "h100", "running", units=(0,), admitted=a_admitted, **gpu)
    if fellow == "continuous":
        objs += stamped(v, "vision/svc", "h100", "running", units=(1,), admitted=38, **gpu)
        for o in objs[-2:] if svc_deleting else ():
            o["metadata"]["deletionTimestamp"] = o["metadata"]["creationTimestamp"]
        for c in (c for o in objs[-2:] if svc_untimed for c in o.get("status", {}).get("conditions", ())):
            c.pop("lastTransitionTime", None)
    gke = observed("gke-usc1", objs)
    dep = parse_deployment(serving("vision", "svc", "h100", replicas=1, ready=1))
    snap = snapshot(60, gke.model_copy(update={"services": (dep,)}) if fellow == "service" else gke)
    return v, snap, plan(v, observed=snap)


@pytest.mark.parametrize("fellow", ["service", "continuous"])
def test_a_victim_running_on_with_a_fellow_held_to_its_checkpoint_still_spends_its_teams_budget(fellow: str) -> None:
    """`svc` a service whose Deployment runs, or a service with `checkpoint_minutes: 0` seen as a JobSet (as the
    simulator's services are): the loop runs either on (ckptwait.py's two cases)."""
    budget = (2 * NODE + NODE + SLICE + 1.0) * 730     # h, `a` held to its checkpoint and `t`; not `svc` as well
    v, snap, p = _plan(budget, fellow)
    assert [(x.job, x.by, x.after_minutes) for x in p.preemptions] == [("vision/a", "vision/h", 10),
                                                                     ("vision/svc", "vision/h", 10)]
    (svc,) = [x.reason for x in p.preemptions if x.job == "vision/svc"]
    assert svc.endswith("; it keeps running while vision/a runs to its checkpoint, 10 min, and stops with it (it "
                        "loses nothing by running on), its units reserved for vision/h"), svc
    # the loop runs it on: what the plan says of it is what the loop does
    holds = checkpoint_holds(v, p, snap)
    assert "vision/a" in holds and "vision/svc" in holds and "stops with them" in holds["vision/svc"]
    assert p.placement_of("vision/h") is not None and p.placement_of("vision/t") is None
    (why,) = [r for x in p.pending if x.job == "vision/t" for r in x.reasons if "budget" in r]
    assert "held by vision/h" in why and "vision/svc ($64,598/month)" in why, why
    # with room for the service's spend as well, `t` starts
    _, _, roomy = _plan(budget + NODE * 730, fellow)
    assert roomy.placement_of("vision/t") is not None


def _cycle(v: Validated, snap: object, p: Plan, minutes: float) -> tuple[tuple[str, ...], dict[str, str]]:
    """A loop cycle `minutes` after the snapshot, with no memory: (jobs it leaves as they are, job -> stop reason)."""
    d = decide(p, snap, LoopMemory(), Knobs.of(v.loaded.placement), snap.observed_at + timedelta(minutes=minutes),
               jobs=job_facts(v))
    return d.deferred, {a.job: a.reason for a in d.actions if a.kind == "stop" and a.job}


@pytest.mark.parametrize("fellow", ["service", "continuous"])
def test_a_fellow_stops_with_its_held_victim_for_a_true_reason(fellow: str) -> None:
    """`a` reaches its checkpoint 10 minutes on; the cycle then stops it and `svc` with it. Before the forty-first
    session `svc`'s stop said it "keeps running while vision/a runs to its checkpoint" and that "its checkpoint
    interval or running time is not known to the loop" (it checkpoints continuously, or is a service), and each
    stop's reason named its preemptor twice ("preempted by vision/h: preempted by vision/h (priority 1000): ...")."""
    v, snap, p = _plan(5e6, fellow)
    held, stops = _cycle(v, snap, p, 0)
    assert held == ("vision/a", "vision/h", "vision/svc") and stops == {}
    held, stops = _cycle(v, snap, p, 10.2)
    head = "preempted by vision/h (priority 1000): lower priority in team vision; "
    assert held == () and stops == {
        "vision/a": head + "it reached its checkpoint: stopped now",
        "vision/svc": head + "none of vision/h's victims is held to its checkpoint any longer: stopped now"}


def test_the_loop_runs_on_only_the_fellows_the_plan_holds() -> None:
    """A plan that stops `svc` at once (no `after_minutes`: the plan does so where its preemptor shares its unit,
    `victims.hold_until_checkpoint`) counts its quota and spend freed; the loop stops it at once too. Before the
    forty-first session the loop ran it on beside `a` whatever the plan said."""
    v, snap, p = _plan(5e6, "continuous")
    at_once = "preempted by vision/h (priority 1000): lower priority in team vision"
    p = replace(p, preemptions=tuple(replace(x, after_minutes=None, reason=at_once) if x.job == "vision/svc" else x
                                     for x in p.preemptions))
    held, stops = _cycle(v, snap, p, 0)
    assert held == ("vision/a", "vision/h") and stops == {"vision/svc": at_once}


def test_a_continuous_fellow_runs_on_though_its_start_time_was_not_read() -> None:
    """`svc` checkpoints continuously and runs, but its Workload's conditions carry no lastTransitionTime, so the
    loop reads no start time. It loses nothing by running on whatever its running time, and the plan holds it
    beside `a`; the loop held it too only when it read a start time, and otherwise stopped it at once, saying "its
    running time is not known to the loop" (a running time it does not need)."""
    v, snap, p = _plan(5e6, "continuous", svc_untimed=True)
    assert [w.phase() for c in snap.clusters for w in c.workloads if "svc" in w.name] == ["running"]
    assert [p.job for p in p.preemptions] == ["vision/a", "vision/svc"]
    held, stops = _cycle(v, snap, p, 0)
    assert held == ("vision/a", "vision/h", "vision/svc") and stops == {}
