"""A running job whose file changed what its pods run (so it is re-created) and asks more cpus than its units have
free: re-created where its new pods fit, or left running as it started, never re-created where they cannot be
scheduled (plan/sticky.py `_respec_elsewhere`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_live import change, explain, fleet, job, observed, plan, snapshot, stamped, where

from reconciler.reconcile.decide import LoopMemory, decide, job_facts
from reconciler.reconcile.model import Knobs
from reconciler.validate import Validated

from builders import PRIORITIES

POOL = "    min: 16\n    max: 16\n    node: {accelerators: 8, cpus: 192, memory_gib: 2048}\n"


def _fleet(nodes: int, a: str, more: dict[str, str] | None = None) -> Validated:
    """onprem-sjc's h100-owned with `nodes` nodes, and nothing else that runs H100s."""
    sjc = (Path(__file__).resolve().parents[1] / "fleet/clusters/onprem-sjc.yaml").read_text()
    assert POOL in sjc
    return fleet({"jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None,
                  "fleet/clusters/gke-usc1.yaml": None,
                  "fleet/clusters/onprem-sjc.yaml": sjc.replace(POOL, POOL.replace("16", str(nodes))),
                  "jobs/vision/a.yaml": a, "jobs/vision/x.yaml": job("x", count=4, body="checkpoint_minutes: 30\n"),
                  "jobs/vision/y.yaml": job("y", count=8, body="checkpoint_minutes: 30\n"), **(more or {})})


def _running(v: Validated, jobs: tuple[tuple[str, tuple[int, ...], int], ...] = (
        ("vision/a", (0,), 4), ("vision/x", (0,), 4), ("vision/y", (1,), 8)), cpu: str = "48") -> list[dict[str, Any]]:
    """(job, units, GPUs a pod) running on h100-owned, each pod requesting `cpu`; by default a and x share node 0
    (each pod 48 of its 192 cpus), y fills node 1."""
    objs = [o for j, units, n in jobs
            for o in stamped(v, j, "h100-owned", "running", units=units, admitted=20, accel="gpu", per_pod=n)]
    for o in objs:
        if o["kind"] == "JobSet":
            c = o["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
            c.setdefault("resources", {}).setdefault("requests", {})["cpu"] = cpu
    return objs


A = job("a", count=4, body="checkpoint_minutes: 30\n")
A2 = A.replace("count: 4}", "count: 4, cpus: 160}").replace("img:1", "img:2")
LACKS = ("its file changed what its pods run{}, which a running JobSet cannot take, and its new pods ask 160 cpus "
         "per node, more than its units on onprem-sjc/h100-owned have free")


def test_a_re_created_job_whose_new_pods_do_not_fit_its_node_is_re_created_where_they_fit() -> None:
    # Before: "re-created with it where it runs", on node 0, where x's pod holds 48 of 192 cpus and the new pod asks
    # 160: it could never be scheduled there, and the job waited with its place lost.
    was, now = _fleet(3, A), _fleet(3, A2)
    seen = snapshot(60, observed("onprem-sjc", _running(was)))
    p = plan(now, observed=seen)
    assert where(p, "vision/a") == ("onprem-sjc", "h100-owned", (2,), "moved")
    why = LACKS.format("") + ": re-created with it where they fit, from its last checkpoint"
    assert p.placement_of("vision/a").reason == why       # type: ignore[union-attr]
    assert where(p, "vision/x") == ("onprem-sjc", "h100-owned", (0,), "kept")
    assert p.live is not None and [w.job for w in p.live.lost_work] == ["vision/a"]   # its restart loses work
    acts = [(a.kind, a.units, a.reason) for a in decide(p, seen, LoopMemory(), Knobs(), seen.observed_at,
                                                        jobs=job_facts(now)).actions if a.job == "vision/a"]
    assert acts == [("move", (2,), why)]
    pr = change(now, was).head.plan                         # the pull request's plan says the same, naming the field
    assert where(pr, "vision/a") == ("onprem-sjc", "h100-owned", (2,), "moved")
    assert pr.placement_of("vision/a").reason == why.replace("run,", "run (image),")   # type: ignore[union-attr]
    story = explain(now, "vision/a", observed=seen)       # not "keeps its units ... re-created on them" (review)
    assert f"**decided by**: running work re-created where its new pods fit: {why}" in story, story


def test_a_re_created_job_whose_new_pods_fit_nowhere_runs_on_as_it_started() -> None:
    was, now = _fleet(2, A), _fleet(2, A2)
    seen = snapshot(60, observed("onprem-sjc", _running(was)))
    p = plan(now, observed=seen)
    assert where(p, "vision/a") == ("onprem-sjc", "h100-owned", (0,), "kept")
    reason = p.placement_of("vision/a").reason          # type: ignore[union-attr]
    assert reason.startswith(LACKS.format("") + " (") and reason.endswith(
        "): it runs as it started until they fit, and is re-created then"), reason
    assert p.live is not None and not p.live.lost_work
    assert f"**kept as it runs**: {reason}" in explain(now, "vision/a", observed=seen)   # not "on a draining cluster"
    assert [a for a in decide(p, seen, LoopMemory(), Knobs(), seen.observed_at, jobs=job_facts(now)).actions
            if a.job == "vision/a"] == []


def test_a_job_re_created_where_its_new_pods_fit_is_not_left_pending_for_a_job_that_may_not_preempt_it() -> None:
    # The improvement phase took the job out for a critical job of its team, which the policy forbids to preempt
    # it, and left it pending: the PR said a running job stops, with no preemption (review).
    never = PRIORITIES.replace("within_team: lower_priority", "within_team: never")
    urgent = {"policies/priorities.yaml": never,
              "jobs/vision/urgent.yaml": job("urgent", count=8, body="priority: critical\ncheckpoint_minutes: 30\n")}
    was = _fleet(3, A)
    now = _fleet(3, A2, urgent)
    p = plan(now, observed=snapshot(60, observed("onprem-sjc", _running(was))))
    assert where(p, "vision/a") == ("onprem-sjc", "h100-owned", (2,), "moved") and p.preemptions == ()
    assert [w.job for w in p.pending] == ["vision/urgent"]


def test_two_jobs_re_created_on_one_node_one_leaving_room_for_the_other_say_each_what_it_does() -> None:
    # a and b (3 GPUs each) share node 0 with x (2); both change their image and ask more cpus (170, 130), and
    # each pod there requests 40. a's new pods fit only elsewhere; once a leaves, b's fit where it runs. Before,
    # b was re-created on node 0 with the reason "its new pods ask  per node, more than its units ... have free",
    # where its new pods could not be scheduled until the loop had moved a (review).
    files = {"jobs/vision/x.yaml": job("x", count=2, body="checkpoint_minutes: 30\n"),
             "jobs/vision/b.yaml": job("b", count=3, body="checkpoint_minutes: 30\n")}
    three = job("a", count=3, body="checkpoint_minutes: 30\n")
    was = _fleet(3, three, files)
    now = _fleet(3, three.replace("count: 3}", "count: 3, cpus: 170}").replace("img:1", "img:2"), {
        **files, "jobs/vision/b.yaml": files["jobs/vision/b.yaml"].replace("count: 3}", "count: 3, cpus: 130}")
        .replace("img:1", "img:2")})
    runs = _running(was, (("vision/a", (0,), 3), ("vision/b", (0,), 3), ("vision/x", (0,), 2), ("vision/y", (1,), 8)),
                    cpu="40")
    seen = snapshot(60, observed("onprem-sjc", runs))
    p = plan(now, observed=seen)
    head = "its file changed what its pods run, which a running JobSet cannot take"
    assert where(p, "vision/a") == ("onprem-sjc", "h100-owned", (2,), "moved")
    assert p.placement_of("vision/a").reason.startswith(f"{head}, and its new pods ask 170 cpus per node")  # type: ignore[union-attr]
    assert where(p, "vision/b") == ("onprem-sjc", "h100-owned", (0,), "kept")     # until a's old copy has left
    reason = p.placement_of("vision/b").reason         # type: ignore[union-attr]
    assert reason.startswith(f"{head}; its option 0 asks 130 cpus per node, more than its units on ") and \
        reason.endswith(", which it does once the jobs re-created elsewhere have left its units"), reason
    acts = [(a.kind, a.job) for a in decide(p, seen, LoopMemory(), Knobs(), seen.observed_at,
                                            jobs=job_facts(now)).actions if a.job in ("vision/a", "vision/b")]
    assert acts == [("move", "vision/a")]
    after = [o for o in runs if o["metadata"]["name"] != "a"]      # a moved: b is re-created where it runs
    q = plan(now, observed=snapshot(70, observed("onprem-sjc", after)))
    assert where(q, "vision/b") == ("onprem-sjc", "h100-owned", (0,), "moved")
    assert q.placement_of("vision/b").reason == (        # type: ignore[union-attr]
        f"{head}: re-created with it where it runs, from its last checkpoint")
