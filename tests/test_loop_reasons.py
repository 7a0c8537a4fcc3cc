"""What the reconcile loop says when it stops or moves running work is true when it says it (the developers' guide:
"the reason must be true"). Each case was found by a review of the forty-first session (2026-12-07), and each
test fails on the code before it: a victim its plan held (to its checkpoint, or beside one so held) and the loop
stops or moves now says what the loop saw (ckptwait.py `released`), not the plan's "it keeps running ..."; a
preemptor waits for its last held victim; a stale service object serving nothing is not said to be replaced by
one that serves."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kube_objects import job_objects, serving
from test_fellow_victims import _plan
from test_preempt_cheap import WINDOW, placed_again
from test_reconcile_decide import CHAT, FACTS, KNOBS, NOW, at, chat, cluster, place, plan, snap

from reconciler.pipeline import plan as make_plan
from reconciler.plan.types import Cost, Plan, Preemption
from reconciler.reconcile.decide import decide
from reconciler.reconcile.model import JobFacts, Knobs, LoopMemory, job_facts

from builders import job

HEAD = "preempted by vision/h (priority 1000): lower priority in team vision"


def _stops(fellow: str, minutes: float, **kw: Any) -> tuple[tuple[str, ...], dict[str, str]]:
    """test_fellow_victims' fleet (`a` held to its checkpoint, `svc` beside it; `kw`: its `_plan`'s), the loop's cycle
    `minutes` after the plan's snapshot: (what it leaves as it is, job -> stop reason)."""
    v, snap_, p = _plan(5e6, fellow, **kw)
    d = decide(p, snap_, LoopMemory(), Knobs.of(v.loaded.placement), snap_.observed_at + timedelta(minutes=minutes),
               jobs=job_facts(v))
    return d.deferred, {a.job: a.reason for a in d.actions if a.kind == "stop" and a.job}


@pytest.mark.parametrize("fellow", ["service", "continuous"])
def test_a_fellow_stopped_in_the_cycle_its_held_victim_checkpointed_is_not_said_to_have_run_on(fellow: str) -> None:
    """`a` checkpoints every 10 minutes and did half a minute ago: the plan holds it 9.5 minutes (a 15-minute window)
    and `svc` beside it, but the loop's first cycle stops both (one checkpointed within the interval). Before,
    `svc`'s stop said its checkpoint interval was not known (and, at f1a8e40, that it ran on beside `a`)."""
    a = job("a", count=8, body="checkpoint_minutes: 10\nspot: never\nduration_hours: 10\n")
    held, stops = _stops(fellow, 0, files={"jobs/vision/a.yaml": a}, a_admitted=47.5)
    assert held == () and stops == {
        "vision/a": f"{HEAD}; it reached its checkpoint: stopped now",
        "vision/svc": f"{HEAD}; none of vision/h's victims is held to its checkpoint any longer: stopped now"}


def test_a_service_with_a_checkpoint_interval_that_stops_beside_its_held_fellow_is_not_said_to_reach_it() -> None:
    """`svc` (a Deployment, `checkpoint_minutes: 30`) runs on beside `a` as a service does; the loop never sees a
    service's checkpoints. Before, its stop said "it reached its checkpoint"."""
    svc = ("name: svc\nteam: vision\nkind: inference\nport: 8080\nimage: img:1\ncheckpoint_minutes: 30\n"
           "options:\n  - {accelerator: nvidia-h100-80gb, count: 8}\n")
    held, _ = _stops("service", 0, files={"jobs/vision/svc.yaml": svc})
    assert held == ("vision/a", "vision/h", "vision/svc")
    _, stops = _stops("service", 10.2, files={"jobs/vision/svc.yaml": svc})
    assert stops["vision/svc"] == f"{HEAD}; none of vision/h's victims is held to its checkpoint any longer: " \
                                  "stopped now"


def test_a_fellow_whose_copy_is_being_deleted_is_not_deleted_again() -> None:
    """`svc` (checkpointing continuously) is already being deleted while `a` is held: the loop cannot run it on,
    and deleting it again changes nothing. Before, its stop said its checkpoint interval was not known (and, at
    f1a8e40, that it ran on and no victim was held, while `a` was); a stop was sent for any copy being deleted
    that its plan placed nowhere, a write to a fleet already doing what the plan says."""
    held, stops = _stops("continuous", 0, svc_deleting=True)
    assert held == ("vision/a", "vision/h") and stops == {}


def test_a_held_victim_placed_again_moves_saying_it_reached_its_checkpoint() -> None:
    """`a` (checkpointing every 10 minutes, half a minute past one) is preempted by `h` and placed again on
    h100-spot; the loop's first cycle moves it (it checkpointed within the interval). Before, the move said "it
    keeps running until its next checkpoint in 9.5 min"."""
    v, s = placed_again(WINDOW, "checkpoint_minutes: 10\n", 47.5)
    p = make_plan(v, observed=s)
    (pre,) = p.preemptions
    assert pre.after_minutes == 9.5 and p.placement_of(pre.job).status == "moved"
    d = decide(p, s, LoopMemory(), Knobs.of(v.loaded.placement), s.observed_at, jobs=job_facts(v))
    (move,) = [a for a in d.actions if a.job == pre.job]
    assert move.kind == "move" and move.reason == ("preempted by vision/h (priority 1000): lower priority in team "
                                                   "vision; it reached its checkpoint; placed again on "
                                                   "gke-usc1/h100-spot"), move.reason


def test_a_preemptor_is_said_to_wait_for_its_last_held_victim() -> None:
    """`e1` checkpoints in 3 minutes, `eval` in 12: the preemptor starts once both stopped. Before, its note named the
    first in the plan's order: "starts once vision/e1 reached its checkpoint, in 3 min"."""
    facts = {**FACTS, "vision/e1": JobFacts("training", 30, 1)}
    s = snap(cluster("a", *job_objects("vision", "e1", "v5p", admitted=171),
                     *job_objects("vision", "eval", "v5p", admitted=150)))
    tail = "; it keeps running until its next checkpoint in {} min, its units reserved for vision/train"
    p = Plan((place("vision/train", "a", "v5p", status="new"),), (),
             (Preemption("vision/e1", "vision/train", "needs the slice" + tail.format(3), 3.0),
              Preemption("vision/eval", "vision/train", "needs the slice" + tail.format(12), 12.0)), (), (),
             Cost(0, 0, 0))
    d = decide(p, s, LoopMemory(), KNOBS, NOW, jobs=facts)
    assert d.actions == () and "vision/train starts once vision/eval reached its checkpoint, in 12 min (its units " \
                               "are reserved for it)" in d.notes, d.notes
    later = decide(p, s, LoopMemory(), KNOBS, at(3.5), jobs=facts)
    assert [(a.kind, a.job) for a in later.actions] == [("stop", "vision/e1")]
    assert "vision/train starts once vision/eval reached its checkpoint, in 8 min (its units are reserved for it)" \
        in later.notes, later.notes


def test_a_stale_service_object_serving_nothing_is_not_said_to_be_replaced_by_one_that_serves() -> None:
    """The plan's `chat` (2 replicas on l4) has none ready; the stale `chat-a100` serves none either, so it goes.
    Before, the stop said "its replacement serves (0/2 replicas ready)"."""
    s = snap(cluster("a", serving("serving", "chat", "l4", replicas=2, ready=0),
                     serving("serving", "chat", "a100", name="chat-a100", replicas=1, ready=0)))
    d = decide(plan(chat("a", "l4", 2)), s, LoopMemory(), KNOBS, NOW, jobs=CHAT)
    assert [a.reason for a in d.actions if a.kind == "stop"] == [
        "chat-a100 left the plan; it serves no ready replica (its replacement: 0/2 ready)"]


def test_a_held_victim_not_started_yet_is_not_said_to_have_an_unknown_running_time() -> None:
    """`eval` (checkpointing every 30 minutes) is queued again (suspended) when the loop reads the plan that held it
    to its checkpoint: it stops now. Before the review of the forty-first session's first form, its stop
    said "its running time is not known to the loop"; it is not running."""
    p = Plan((place("vision/train", "a", "v5p", status="new"),), (),
             (Preemption("vision/eval", "vision/train", "needs the slice; it keeps running until its next checkpoint "
                         "in 12 min, its units reserved for vision/train", 12.0),), (), (), Cost(0, 0, 0))
    d = decide(p, snap(cluster("a", *job_objects("vision", "eval", "v5p", phase="queued", admitted=150))),
               LoopMemory(), KNOBS, NOW, jobs=FACTS)
    assert [a.reason for a in d.actions if a.kind == "stop"] == [
        "preempted by vision/train: needs the slice; it is not running now, so it waits for no checkpoint: stopped now"]
