"""`fleet apply` leaves a preemption made at the victim's next checkpoint to the reconcile loop (apply/safety.py
`checkpoint_holds`, apply/flow.py `held_back`, `without_held`): on a Slurm cluster too, and where the preemptor
runs elsewhere and the plan moves it onto the victim's units (a review of 0b5e7da found both)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from test_live import fleet, observed, snapshot, stamped
from test_preempt_cheap import CKPT, GPU, WINDOW
from test_slurm import check, node, sjob
from test_slurm import job as slurm_job

from reconciler.apply.flow import deletions_by_cluster, held_back, without_held
from reconciler.apply.safety import checkpoint_holds, said_now
from reconciler.apply.specs import StackSpec
from reconciler.observe.model import Snapshot
from reconciler.plan.types import Cost, Placement, Plan, Preemption
from reconciler.reconcile.decide import decide, job_facts
from reconciler.reconcile.model import Knobs, LoopMemory
from reconciler.slurm.act import apply_slurm
from reconciler.slurm.observe import parse

from builders import job

HELD = "; it keeps running until its next checkpoint in {} min, its units reserved for {}"


def test_a_running_preemptor_moved_onto_its_held_victims_units_keeps_its_old_copy() -> None:
    """`vision/p` runs on gke-usc1/h100; the plan moves it onto onprem-sjc/h100-owned, preempting `vision/x` at
    its checkpoint in 5 minutes. The loop leaves p running until then. Before, apply deleted p's running copy (a
    move) and held back its new one: running work stopped with no copy anywhere. Now apply deletes neither."""
    v = fleet({"policies/priorities.yaml": WINDOW, "jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None,
               "jobs/vision/x.yaml": job("x", count=32, body=CKPT),
               "jobs/vision/p.yaml": job("p", count=32, body="priority: production\nspot: never\n")})
    gke = observed("gke-usc1", stamped(v, "vision/p", "h100", "running", units=(0, 1, 2, 3), admitted=0, **GPU))
    sjc = observed("onprem-sjc", stamped(v, "vision/x", "h100-owned", "running", units=(0, 1, 2, 3), admitted=33,
                                         **GPU))
    snap = snapshot(60, gke, sjc)
    plan = Plan((Placement("vision/p", "onprem-sjc", "h100-owned", 0, (0, 1, 2, 3), 8, "moved", 0.0, "room"),), (),
                (Preemption("vision/x", "vision/p", "lower priority" + HELD.format(5, "vision/p"), 5.0),), (), (),
                Cost(0, 0, 0))
    holds = checkpoint_holds(v, plan, snap)
    assert sorted(holds) == ["vision/p", "vision/x"]
    objects = [{"kind": "JobSet", "metadata": {"namespace": "vision", "name": "p",
                                               "labels": {"fleet.dev/team": "vision", "fleet.dev/job": "p"}}}]
    spec = StackSpec("onprem-sjc-jobs", "jobs", "onprem-sjc", {"objects": objects}, "(rendered)")
    deletions, specs, waits = held_back(holds, deletions_by_cluster(v, plan, snap, None), [spec], True)
    assert deletions == {} and [s.spec["objects"] for s in specs] == [[]]
    assert sorted((r.cluster, r.name) for r in waits) == [("gke-usc1", "p"), ("onprem-sjc", "p"), ("onprem-sjc", "x")]
    assert "the reconcile loop moves it then" in next(r.reason for r in waits if r.cluster == "gke-usc1")
    loop = decide(plan, snap, LoopMemory(), Knobs(), snap.observed_at, jobs=job_facts(v))
    assert [a for a in loop.actions if a.job] == []          # the loop does the same


def test_a_preemptor_held_on_a_slurm_cluster_is_not_submitted_by_apply() -> None:
    """On Slurm cluster `hpc` `vision/train` ran 52 minutes of 30-minute checkpoints; the plan preempts it for
    `vision/h` at its checkpoint in 8 minutes. Before, apply held the victim but submitted h beside it. Now it
    submits neither and says so."""
    on_slurm = "slurm: {constraint: h100, time_limit_minutes: 600}\n"
    v = check(**{"jobs/vision/train.yaml": slurm_job("train", "checkpoint_minutes: 30\n" + on_slurm),
                 "jobs/vision/h.yaml": slurm_job("h", "priority: production\n" + on_slurm, count=32)})
    assert not v.errors, v.errors
    hpc = next(c for c in v.loaded.clusters if c.name == "hpc")
    tag = "fleet.dev/job=vision/train fleet.dev/pool=h100 fleet.dev/spec-digest=abc"
    seen = parse(hpc, {"nodes": [node("n1", "allocated"), node("n2", "allocated"), node("n3"), node("n4")]},
                 {"jobs": [sjob(7, "RUNNING", tag, nodes="n[1-2]")]}, {"vision": "vision"})
    snap = Snapshot(observed_at=datetime.fromtimestamp(1795561000, UTC) + timedelta(minutes=52), clusters=(seen,))
    plan = Plan((Placement("vision/h", "hpc", "h100", 0, (0, 1, 2, 3), 8, "new", 80.0),), (),
                (Preemption("vision/train", "vision/h", "needs the nodes" + HELD.format(8, "vision/h"), 8.0),),
                (), (), Cost(0, 0, 0))
    holds = checkpoint_holds(v, plan, snap)
    assert sorted(holds) == ["vision/h", "vision/train"]
    deletions, _, waits = held_back(holds, deletions_by_cluster(v, plan, snap, None), [], True)
    slurm_plan, more = without_held(v, plan, holds, True)
    assert [(r.kind, r.name, r.action) for r in more] == [("SlurmJob", "h", "wait")]
    sent = apply_slurm(v, slurm_plan, snap, deletions, preview=True, echo=lambda _: None)
    assert [r for r in sent if r.action in ("create", "delete")] == [], [r.line() for r in sent]
    assert [r.name for r in waits] == ["train"]


def test_apply_deletes_a_victim_past_its_checkpoint_saying_so() -> None:
    """The plan preempted `vision/x` at its checkpoint in 5 minutes; apply runs 5.5 minutes later, when it has
    checkpointed, and deletes it. Before the forty-first session the deletion said "preempted: by vision/p:
    preempted by vision/p (...): lower priority; it keeps running until its next checkpoint in 5 min ...", the
    preemptor named twice and the victim said to run on as apply deleted it."""
    v = fleet({"policies/priorities.yaml": WINDOW, "jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None,
               "jobs/vision/x.yaml": job("x", count=32, body=CKPT),
               "jobs/vision/p.yaml": job("p", count=32, body="priority: production\nspot: never\n")})
    sjc = observed("onprem-sjc", stamped(v, "vision/x", "h100-owned", "running", units=(0, 1, 2, 3), admitted=27.5,
                                         **GPU))
    snap = snapshot(60, sjc)
    plan = Plan((Placement("vision/p", "onprem-sjc", "h100-owned", 0, (0, 1, 2, 3), 8, "new", 0.0),), (),
                (Preemption("vision/x", "vision/p", "preempted by vision/p (priority 1000): lower priority"
                            + HELD.format(5, "vision/p"), 5.0),), (), (), Cost(0, 0, 0))
    assert checkpoint_holds(v, plan, snap) == {}
    deletions = said_now(v, plan, snap, {}, deletions_by_cluster(v, plan, snap, None))
    assert [d.reason for d in deletions["onprem-sjc"]] == [
        "preempted: by vision/p (priority 1000): lower priority; it reached its checkpoint"]
