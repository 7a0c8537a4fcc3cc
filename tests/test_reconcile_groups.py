"""A job group (docs/workloads.md, `group:`) that Kueue admits only in part, end to end: whole cycles of
`fleet reconcile` against local API servers (tests/kube_api.py). Each member is its own JobSet with its own Kueue
Workload, and Kueue admits Workloads one by one, so live a group can run in part: the loop says so at once, and
after `Knobs.group_whole_minutes` stops the admitted members (their units go back) and starts them again with the
group; a member whose create failed is created again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kube_api import KubeCluster
from kube_objects import cond, job_objects
from test_reconcile import Rig, fleet_files, kueue_admits
from test_reconcile import servers as servers  # the fixture: API servers a, b and mgmt

from reconciler.reconcile.loop import CycleReport

QUOTA = "couldn't assign flavors to pod set workers: insufficient unused quota for google.com/tpu in flavor v5p, " \
        "64 more needed"


def group_job(name: str) -> str:
    return (f"name: {name}\nteam: vision\npriority: production\ngroup: rl\noptions:\n"
            "  - {accelerator: tpu-v5p, topology: 4x4x4}\n"
            "duration_hours: 24\ncheckpoint_minutes: 30\nimage: us-docker.pkg.dev/ml/train:1\n"
            "command: [python, -m, train]\n")


def group_files() -> dict[str, str]:
    return {**fleet_files(jobs=()), "jobs/vision/learner.yaml": group_job("learner"),
            "jobs/vision/actors.yaml": group_job("actors")}


def where(servers: dict[str, KubeCluster], job: str) -> KubeCluster:
    (c,) = [c for c in servers.values() if ("vision", job) in c.objects["jobsets"]]
    return c


def kueue_leaves_pending(c: KubeCluster, job: str, at_minutes: float) -> None:
    """Kueue's Workload of a JobSet it cannot admit: QuotaReserved False, with its reason."""
    js = c.objects["jobsets"][("vision", job)]
    wl = job_objects("vision", job, js["metadata"]["labels"]["fleet.dev/pool"], phase="queued")[1]
    wl["metadata"]["ownerReferences"][0]["uid"] = js["metadata"].get("uid", f"uid-vision-{job}")
    wl["status"] = {"conditions": [cond("QuotaReserved", False, "Pending", at_minutes, QUOTA)]}
    c.add(wl)


def jobs_done(report: CycleReport, kind: str) -> list[Any]:
    return [r.action for r in report.results if r.action.kind == kind and r.status == "done"]


def notes(report: CycleReport) -> str:
    assert report.decision is not None
    return "\n".join(report.decision.notes)


def test_a_group_kueue_admits_in_part_is_said_at_once_and_stopped_after_the_bound(
        tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    rig = Rig(tmp_path, servers, group_files())
    loop = rig.reconciler()
    first = loop.cycle()
    assert sorted(a.job for a in jobs_done(first, "start")) == ["vision/actors", "vision/learner"]
    c = where(servers, "actors")
    assert where(servers, "learner") is c                    # placed together
    kueue_admits(c, "actors", 60)                            # Kueue admits the actors...
    kueue_leaves_pending(c, "learner", 60)                   # ...and leaves the learner pending
    rig.at(1)
    report = loop.cycle()
    assert jobs_done(report, "stop") == []
    said = notes(report)                                     # said at once, with Kueue's reason
    assert "group vision/rl runs in part" in said and "vision/learner" in said and QUOTA in said, said
    assert "vision/actors" in said
    rig.at(9)
    assert jobs_done(loop.cycle(), "stop") == []             # within the bound: kept
    rig.at(11)                                               # 10 minutes in part: the admitted member stops
    report = loop.cycle()
    (stop,) = jobs_done(report, "stop")
    assert stop.job == "vision/actors" and "group vision/rl" in stop.reason and "vision/learner" in stop.reason
    assert "runs in part since" in stop.reason and QUOTA in stop.reason
    assert ("vision", "actors") not in c.objects["jobsets"]  # its units and quota go back
    assert ("vision", "learner") in c.objects["jobsets"]     # the pending member keeps its place in Kueue's queue
    [record] = [r for r in rig.actions("done") if r["what"] == "stop"]
    assert "all-or-nothing" in record["why"]
    rig.at(12)
    report = loop.cycle()                                    # not started again at once: it would run in part
    assert jobs_done(report, "start") == [] and "vision/actors" in notes(report)
    assert "starts again with its group" in notes(report)
    kueue_admits(c, "learner", 73)                           # the freed quota lets Kueue admit the learner
    rig.at(13)
    report = loop.cycle()
    assert [a.job for a in jobs_done(report, "start")] == ["vision/actors"]   # the group starts whole again
    assert ("vision", "actors") in c.objects["jobsets"]
    kueue_admits(c, "actors", 74)
    rig.at(14)
    report = loop.cycle()
    assert "runs in part" not in notes(report) and jobs_done(report, "stop") == []


def test_a_held_member_starts_again_when_its_backoff_ends(tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    """Kueue keeps the learner pending: the actors wait out the backoff, then start (and may stop again)."""
    rig = Rig(tmp_path, servers, group_files())
    loop = rig.reconciler()
    loop.cycle()
    c = where(servers, "actors")
    kueue_admits(c, "actors", 60)
    kueue_leaves_pending(c, "learner", 60)
    for minute in (1, 11):
        rig.at(minute)
        loop.cycle()
    assert ("vision", "actors") not in c.objects["jobsets"]
    rig.at(20)
    assert jobs_done(loop.cycle(), "start") == []
    rig.at(21)                                               # retry 1: 10 minutes after the stop
    assert [a.job for a in jobs_done(loop.cycle(), "start")] == ["vision/actors"]


def test_a_members_failed_create_is_retried_and_the_group_said_in_part(
        tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    rig = Rig(tmp_path, servers, group_files())
    a, b = servers["a"], servers["b"]
    for s in (a, b):
        s.faults["jobsets/vision/learner"] = 500
    loop = rig.reconciler()
    first = loop.cycle()
    failed = [r.action.job for r in first.results if r.status == "failed"]
    assert failed == ["vision/learner"] and [x.job for x in jobs_done(first, "start")] == ["vision/actors"]
    c = where(servers, "actors")
    kueue_admits(c, "actors", 60)
    rig.at(1)
    report = loop.cycle()                                    # still failing: retried, and the group said in part
    assert [r.action.job for r in report.results if r.status == "failed"] == ["vision/learner"]
    assert "group vision/rl runs in part" in notes(report) and "not created" in notes(report)
    for s in (a, b):
        del s.faults["jobsets/vision/learner"]
    rig.at(2)
    report = loop.cycle()
    assert [x.job for x in jobs_done(report, "start")] == ["vision/learner"]
    assert ("vision", "learner") in c.objects["jobsets"]


def test_status_says_a_group_runs_in_part_and_why(tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    from click.testing import CliRunner

    from reconciler.cli import cli

    rig = Rig(tmp_path, servers, group_files())
    rig.reconciler().cycle()
    c = where(servers, "actors")
    kueue_admits(c, "actors", 60)
    kueue_leaves_pending(c, "learner", 60)
    rig.at(1)

    def status(*args: str) -> str:
        r = CliRunner().invoke(cli, ["status", "--repo", str(rig.repo), *args],
                               env={"KUBECONFIG": str(rig.kubeconfig), "FLEET_NOW": rig.now.isoformat()})
        assert r.exit_code == 0, r.output
        return " ".join(r.stdout.split())

    table = status()
    assert "vision/rl" in table and "runs in part" in table and QUOTA in table, table
    story = status("vision/actors")
    assert "group vision/rl" in story and "runs in part" in story and "vision/learner queued" in story, story
    assert QUOTA in story


def test_a_group_the_plan_itself_keeps_in_part_is_said_and_never_stopped() -> None:
    """The plan keeps the running members of a group it cannot complete (a member added that does not fit:
    plan/workloads.py withhold): the loop says the group runs in part, and stops nothing, however long."""
    from dataclasses import replace

    from test_reconcile_decide import FACTS, NOW, at, cluster, place, plan, snap

    from reconciler.plan.types import Pending
    from reconciler.reconcile.decide import Knobs, LoopMemory, decide

    p = plan(replace(place("vision/actors", "a", "v5p"), group="vision/rl"),
             pending=(Pending("vision/learner", ("no tpu-v5p quota left",), "vision/rl"),))
    s = snap(cluster("a", *job_objects("vision", "actors", "v5p")))
    mem = LoopMemory()
    for minutes in (0, 30, 300):
        d = decide(p, s, mem, Knobs(), at(minutes), jobs=FACTS)
        assert d.actions == () and "group vision/rl runs in part" in "\n".join(d.notes)
        assert "vision/learner waits in the plan (no tpu-v5p quota left)" in "\n".join(d.notes)
        mem = d.memory
    assert mem.groups["vision/rl"].since == NOW


def test_status_of_a_group_the_plan_keeps_in_part_does_not_promise_a_stop() -> None:
    """The loop stops nothing of a group whose missing member the plan itself keeps waiting (reconcile/groups.py);
    `fleet status` said of every group in part that "the reconcile loop stops its admitted members", and counted
    members whose run had ended, which the loop does not."""
    from dataclasses import replace

    from test_live import observed, snapshot, stamped

    from reconciler.catalog import load_catalog
    from reconciler.pipeline import check, plan
    from reconciler.plan.types import Pending
    from reconciler.status import status

    from builders import job, with_files

    files = {"jobs/vision/train.yaml": None,
             **{f"jobs/vision/{n}.yaml": job(n, count=8, body="group: rl\n") for n in ("actors", "learner", "eval")}}
    v = check(with_files(files), load_catalog())
    assert v.ok, v.errors
    gpu = {"units": (0,), "accel": "gpu", "per_pod": 8}
    snap = snapshot(60, observed("onprem-sjc", [*stamped(v, "vision/actors", "h100-owned", "running", **gpu),
                                                *stamped(v, "vision/eval", "h100-owned", "succeeded", **gpu)]))
    full = plan(v)
    planned = replace(full, placements=tuple(p for p in full.placements if p.job == "vision/actors"),
                      pending=(Pending("vision/learner", ("no H100 quota left",), "vision/rl"),))
    (row,) = [g for g in status(v, snap, planned).groups if g[0] == "vision/rl"]
    assert "runs in part: 1 of 2 member(s) admitted" in row[2], row
    assert "the plan keeps a member waiting, so the running members are kept" in row[2], row
    assert "stops its admitted members" not in row[2], row


def test_the_groups_bound_is_set_in_placement_yaml() -> None:
    """`reconcile.group_whole_minutes` in policies/placement.yaml sets how long a group may run in part: the loop
    read it (Knobs.of) but the file's schema refused the field, so the 10-minute default could not be changed."""
    from reconciler.catalog import load_catalog
    from reconciler.pipeline import check
    from reconciler.reconcile.model import Knobs

    from builders import with_files

    v = check(with_files({"policies/placement.yaml": "reconcile:\n  group_whole_minutes: 45\n"}), load_catalog())
    assert v.ok, v.errors
    assert Knobs.of(v.loaded.placement).group_whole_minutes == 45
    bad = check(with_files({"policies/placement.yaml": "reconcile:\n  group_whole_minutes: -1\n"}), load_catalog())
    assert [(e.path, e.line, e.field) for e in bad.errors] == [
        ("policies/placement.yaml", 2, "reconcile.group_whole_minutes")]


def _in_part_for_hours(hours: int, knobs: Any) -> tuple[list[int], Any, list[str]]:
    """Kueue keeps vision/learner queued for `hours` while it admits vision/actors each time it is created: the
    loop's decisions minute by minute (decide.py), the copies following them. (the minutes of each stop of the
    actors, the memory at the end, the last cycle's notes)"""
    from dataclasses import replace

    from test_reconcile_decide import FACTS, at, cluster, place, plan, snap

    from reconciler.reconcile.decide import LoopMemory, decide

    p = plan(*(replace(place(j, "a", "v5p", (u,)), group="vision/rl") for u, j in enumerate(("vision/actors",
                                                                                               "vision/learner"))))
    actors, mem, stops, notes_ = True, LoopMemory(), [], []
    for minute in range(hours * 60):
        objs = job_objects("vision", "learner", "v5p", phase="queued")
        if actors:
            objs += job_objects("vision", "actors", "v5p")
        d = decide(p, snap(cluster("a", *objs)), mem, knobs, at(minute), jobs=FACTS)
        mine = [a.kind for a in d.actions if a.job == "vision/actors"]
        if "stop" in mine:
            actors = False
            stops.append(minute)
        elif "start" in mine:
            actors = True
        mem, notes_ = d.memory, list(d.notes)
    return stops, mem, notes_


def test_a_group_kueue_never_completes_is_not_stopped_and_restarted_for_ever() -> None:
    """The loop stopped the admitted members of a group in part after the bound and started them again after a
    backoff (at most an hour) with no end: 12 stops in 12 hours, and nothing said how many. Now, as Kueue's
    `requeuingStrategy.backoffLimitCount` deactivates a Workload requeued that often, the stopped members start
    again after a backoff at most `reconcile.group_retry_limit` times (default 5); after that stop they wait for
    their group, and the stop's reason, the cycle's notes and the memory say so."""
    from reconciler.reconcile.model import Knobs

    stops, mem, said = _in_part_for_hours(12, Knobs())
    # each stop the bound (10 min) after the actors come up again, which is a backoff of 10, 20, 40, 60, 60 minutes
    # (and a cycle) after the stop before
    assert stops == [10, 31, 62, 113, 184, 255], stops
    tried = mem.groups["vision/rl"]
    assert (tried.stopped, tried.attempts, tried.retry_at) == (("vision/actors",), 6, None)
    text = "\n".join(said)
    assert "vision/actors stopped so that group vision/rl would not run in part: it starts again with its group " \
           "once vision/learner is admitted, and only then: stopped 6 time(s), and the " \
           "`reconcile.group_retry_limit` (5) restarts after a backoff are spent" in text, text
    stops, mem, _ = _in_part_for_hours(3, Knobs(group_retry_limit=0))
    assert stops == [10] and mem.groups["vision/rl"].retry_at is None
    stops, _, _ = _in_part_for_hours(12, Knobs(group_retry_limit=None))   # null in the file: Kueue's default
    assert len(stops) == 12, stops


def test_the_groups_retry_limit_is_set_in_placement_yaml_and_null_means_no_limit() -> None:
    from reconciler.catalog import load_catalog
    from reconciler.pipeline import check
    from reconciler.reconcile.model import Knobs

    from builders import with_files

    def knobs(text: str) -> Knobs:
        v = check(with_files({"policies/placement.yaml": text}), load_catalog())
        assert v.ok, v.errors
        return Knobs.of(v.loaded.placement)

    assert knobs("reconcile:\n  group_retry_limit: 2\n").group_retry_limit == 2
    assert knobs("reconcile:\n  group_retry_limit: null\n").group_retry_limit is None   # the file's word stands
    assert knobs("reconcile:\n  interval_seconds: 30\n").group_retry_limit == 5
    bad = check(with_files({"policies/placement.yaml": "reconcile:\n  group_retry_limit: -1\n"}), load_catalog())
    assert [(e.path, e.line, e.field) for e in bad.errors] == [
        ("policies/placement.yaml", 2, "reconcile.group_retry_limit")]


def test_status_and_the_loop_read_a_group_by_one_rule() -> None:
    """`fleet status` decided on its own which members of a group ran (any JobSet admitted or running), so a
    member whose JobSet was being deleted (a stop the loop made, its pods going) counted as running there while
    the loop counted it out: status said "running together" of a group the loop saw in part. Both now read
    reconcile/groups.py `group_views`; status says what the loop remembers (`fleet status --memory`)."""
    from test_live import observed, snapshot, stamped

    from reconciler.catalog import load_catalog
    from reconciler.pipeline import check, plan
    from reconciler.reconcile.decide import copies
    from reconciler.reconcile.groups import group_views
    from reconciler.reconcile.model import GroupTry
    from reconciler.status import status

    from builders import job, with_files

    files = {"jobs/vision/train.yaml": None,
             **{f"jobs/vision/{n}.yaml": job(n, count=8, body="group: rl\n") for n in ("actors", "learner")}}
    v = check(with_files(files), load_catalog())
    assert v.ok, v.errors
    gpu = {"units": (0,), "accel": "gpu", "per_pod": 8}
    objs = [*stamped(v, "vision/actors", "h100-owned", "running", **gpu),
            *stamped(v, "vision/learner", "h100-owned", "running", **gpu)]
    objs[2]["metadata"]["deletionTimestamp"] = objs[2]["metadata"]["creationTimestamp"]   # the learner's JobSet
    snap = snapshot(60, observed("onprem-sjc", objs))
    planned = plan(v)
    view = group_views(planned, copies(snap))["vision/rl"]
    assert (view.admitted, view.waiting) == (("vision/actors",), ("vision/learner",))    # the loop's reading
    (row,) = status(v, snap, planned).groups
    assert row[2].startswith("runs in part: 1 of 2 member(s) admitted"), row
    assert "stops its admitted members if it is not whole within 10 min" in row[2], row
    gave_up = GroupTry(stopped=("vision/learner",), attempts=6)
    (row,) = status(v, snap, planned, {"vision/rl": gave_up}).groups
    assert "stopped its admitted members 6 time(s) and restarts them no more (limit 5)" in row[2], row


def test_a_retry_limit_raised_in_the_file_restarts_members_the_old_limit_left_waiting() -> None:
    """A stop that spent the restarts leaves no `retry_at` in the memory; the loop read that alone as "spent", so
    after `reconcile.group_retry_limit` was raised (or made null: no limit) the stopped members still waited for
    their group for ever, and `fleet status --memory` said "restarts them no more (no limit)". The limit the file
    states now decides: they start again at the next cycle, and status says so."""
    from dataclasses import replace

    from test_reconcile_decide import FACTS, at, cluster, place, plan, snap

    from reconciler.reconcile.decide import decide
    from reconciler.reconcile.groups import GroupView, loop_does
    from reconciler.reconcile.model import Knobs

    stops, mem, _ = _in_part_for_hours(1, Knobs(group_retry_limit=0))
    assert stops == [10] and mem.groups["vision/rl"].retry_at is None
    p = plan(*(replace(place(j, "a", "v5p", (u,)), group="vision/rl") for u, j in enumerate(("vision/actors",
                                                                                               "vision/learner"))))
    queued = snap(cluster("a", *job_objects("vision", "learner", "v5p", phase="queued")))
    held = decide(p, queued, mem, Knobs(group_retry_limit=0), at(61), jobs=FACTS)
    assert [a.kind for a in held.actions if a.job == "vision/actors"] == []          # the file's 0: still waits
    for limit in (None, 3):
        again = decide(p, queued, mem, Knobs(group_retry_limit=limit), at(61), jobs=FACTS)
        assert [a.kind for a in again.actions if a.job == "vision/actors"] == ["start"], (limit, again.actions)
    view = GroupView(("vision/actors", "vision/learner"), (), (), frozenset({"a"}))
    said = loop_does(view, mem.groups["vision/rl"], Knobs(group_retry_limit=None))
    assert "restarts them no more" not in said and "or at the loop's next cycle" in said, said
    assert "restarts them no more (limit 0)" in loop_does(view, mem.groups["vision/rl"], Knobs(group_retry_limit=0))


def test_a_groups_tries_start_over_once_a_members_file_is_edited() -> None:
    """With `reconcile.group_retry_limit: 0` the first stop spends the restarts: the stopped `actors` wait for
    `learner` to be admitted. The count belonged to the group for ever (only a whole run or the memory file edited
    by hand reset it), so a group fixed in git still waited with no backoff. Now the memory keeps the members'
    spec digests at the stop: the same files keep the actors waiting; `learner`'s file edited, the tries start over
    and the actors start again."""
    from dataclasses import replace

    from test_reconcile_decide import at, cluster, place, plan, snap

    from reconciler.catalog import load_catalog
    from reconciler.pipeline import check
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    from builders import job, with_files

    def facts(learner_body: str) -> Any:
        files = {"jobs/vision/actors.yaml": job("actors", body="group: rl\n"),
                 "jobs/vision/learner.yaml": job("learner", body="group: rl\n" + learner_body)}
        return job_facts(check(with_files(files), load_catalog()))

    knobs, before = Knobs(group_retry_limit=0), facts("")
    p = plan(*(replace(place(j, "a", "v5p", (u,)), group="vision/rl") for u, j in enumerate(("vision/actors",
                                                                                               "vision/learner"))))
    actors, mem = True, LoopMemory()
    for minute in range(30):
        objs = job_objects("vision", "learner", "v5p", phase="queued") + \
            (job_objects("vision", "actors", "v5p") if actors else [])
        d = decide(p, snap(cluster("a", *objs)), mem, knobs, at(minute), jobs=before)
        actors = actors and "stop" not in [a.kind for a in d.actions if a.job == "vision/actors"]
        mem = d.memory
    assert not actors and mem.groups["vision/rl"].attempts == 1
    queued = snap(cluster("a", *job_objects("vision", "learner", "v5p", phase="queued")))
    same = decide(p, queued, mem, knobs, at(31), jobs=before)
    assert [a.kind for a in same.actions if a.job == "vision/actors"] == []        # spent: waits for its group
    edited = decide(p, queued, mem, knobs, at(31), jobs=facts("duration_hours: 2\n"))
    assert [a.kind for a in edited.actions if a.job == "vision/actors"] == ["start"], edited.actions
