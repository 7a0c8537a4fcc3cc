"""Defects found by a planner hunt: each test fails before its fix."""

from __future__ import annotations

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan import plan
from reconciler.plan.capacity import gang_for
from reconciler.plan.explain import explain
from reconciler.plan.planner import plan_with_state
from reconciler.plan.types import Plan

from builders import GKE, PRIORITIES, TEAMS, with_files

CAT = load_catalog()

ONE_NODE = GKE[:GKE.index("  - name: v5p-4x4x4")] + "  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 1\n"


def gpu_job(name: str, team: str, count: int, **extra: object) -> str:
    lines = [f"name: {name}", f"team: {team}", "options:", f"  - {{accelerator: nvidia-h100-80gb, count: {count}}}",
             "image: img:1"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def run(jobs, changes=None, base=None):
    files = {f"jobs/{k}.yaml": v for k, v in jobs.items()}
    files["jobs/vision/train.yaml"] = None
    files["fleet/clusters/onprem-sjc.yaml"] = None
    files["fleet/clusters/gke-usc1.yaml"] = ONE_NODE
    files.update(changes or {})
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    return plan(v, base)


BORROW_LOWER = PRIORITIES.replace("borrow_within_cohort: {policy: never, max_priority_threshold: 100}",
                                  "borrow_within_cohort: {policy: lower_priority, max_priority_threshold: 100}")


def test_borrow_within_cohort_never_preempts_a_cohort_mate_within_its_nominal_quota() -> None:
    # Kueue (findCandidates): a ClusterQueue never preempts workloads of a cohort-mate that is not borrowing,
    # whatever borrowWithinCohort says ("Can't reclaim quota from itself or ClusterQueues that are not
    # borrowing"). lang runs 8 H100s of its own nominal 32: it borrows nothing.
    changes = {"policies/priorities.yaml": BORROW_LOWER}
    low = {"lang/low": gpu_job("low", "lang", 8, priority="research", checkpoint_minutes=5)}
    base = run(low, changes)
    assert base.placement_of("lang/low") is not None
    head = run({**low, "vision/urgent": gpu_job("urgent", "vision", 8, priority="production")}, changes, base)
    assert [(x.job, x.by, x.reason) for x in head.preemptions] == []


AUDIO = ("  - name: audio\n    owners: [\"@org/audio\"]\n    cohort: research\n    quota:\n"
         "      tpu-v5p: {nominal: 64}\n")


def test_reclaim_within_cohort_reaches_a_borrower_with_no_quota_of_its_own() -> None:
    # audio has no H100 quota: its 8 H100s are all borrowed from vision and lang. vision's production job fits
    # vision's nominal 64 and the only node is audio's: with `reclaim_within_cohort: any`, Kueue reclaims it
    # (audio's ClusterQueue borrows). Before, only teams with a quota entry of the accelerator were looked at.
    from builders import TEAMS
    changes = {"policies/teams.yaml": TEAMS + AUDIO}
    low = {"audio/low": gpu_job("low", "audio", 8, priority="research", checkpoint_minutes=5)}
    base = run(low, changes)
    assert base.placement_of("audio/low") is not None
    head = run({**low, "vision/urgent": gpu_job("urgent", "vision", 8, priority="production")}, changes, base)
    assert [(x.job, x.by) for x in head.preemptions] == [("audio/low", "vision/urgent")], head.pending


def test_a_job_its_budget_blocks_holds_no_reservation_of_free_units() -> None:
    # docs/concepts.md: the first job of each class that waits for room holds a reservation, "a job its budget
    # blocks does not count". vision ($100,000/month: $137/h) runs `low` ($88.49/h, 10 h); `b` ($88.49/h) is
    # blocked by the budget alone (two of the four nodes are free), yet it was given a reservation of free node 2
    # (reserve.hold and _room_blocked ask only that the budget has something left, not enough for the job).
    from builders import TEAMS
    pool = ONE_NODE.replace("    max: 1\n", "    max: 4\n")
    changes = {"policies/teams.yaml": TEAMS.replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 100000"),
               "fleet/clusters/gke-usc1.yaml": pool}
    low = {"vision/low": gpu_job("low", "vision", 8, priority="production", duration_hours=10)}
    base = run(low, changes)
    head = run({**low, "vision/b": gpu_job("b", "vision", 8, priority="research", duration_hours=5),
                "vision/c": gpu_job("c", "vision", 4, priority="research", duration_hours=50)}, changes, base)
    (b,) = [x for x in head.pending if x.job == "vision/b"]
    assert any("monthly budget" in r for r in b.reasons)
    assert b.expected_start == 10.0
    assert b.reservation is None, b.reservation


def test_a_job_moved_off_a_draining_cluster_is_not_left_pending_by_a_move() -> None:
    # vision/low runs on gke-old's only node; gke-old drains, so it moves to gke-usc1's only node. vision/urgent
    # (critical, same team, `within_team: never`: it may not preempt low) found no room; the improvement phase's
    # eject_pairs then took low out for it and left it pending: running work stopped by no preemption, with no
    # "was running" reason (moves.sticky guarded only jobs forced off the base and preemptors).
    old = ONE_NODE.replace("name: gke-usc1", "name: gke-old").replace("ml-usc1", "ml-old")
    draining = old.replace("kubernetes:", "status: draining\nkubernetes:")
    never = {"policies/priorities.yaml": PRIORITIES.replace("within_team: lower_priority", "within_team: never")}
    low = {"vision/low": gpu_job("low", "vision", 8, priority="production", duration_hours=10)}
    base = run(low, {**never, "fleet/clusters/gke-usc1.yaml": None, "fleet/clusters/gke-old.yaml": old})
    assert base.placement_of("vision/low") is not None
    head = run({**low, "vision/urgent": gpu_job("urgent", "vision", 8, priority="critical", duration_hours=10)},
               {**never, "fleet/clusters/gke-old.yaml": draining}, base)
    moved = head.placement_of("vision/low")
    assert moved is not None and moved.status == "moved", head.pending
    assert [(x.job, x.by) for x in head.preemptions] == []
    assert [x.job for x in head.pending] == ["vision/urgent"]


SPOT_POOLS = """\
name: gke0
provider: gcp
region: us-central1
zone: us-central1-a
kubernetes: {cluster: k0}
pools:
  - {name: v6e, accelerator: tpu-v6e, topology: 4x4, capacity: spot, max: 2}
  - {name: h100, accelerator: nvidia-h100-80gb, capacity: spot, max: 1}
"""
TWO_TEAMS = """\
admins: ["@org/admins"]
teams:
  - {name: vision, owners: ["@org/vision"], quota: {tpu-v6e: {nominal: 64}, nvidia-h100-80gb: {nominal: 64}}}
  - {name: lang, owners: ["@org/lang"], quota: {nvidia-h100-80gb: {nominal: 0}}}
"""


def spot_job(name: str, team: str, priority: str, *options: str) -> str:
    return "\n".join([f"name: {name}", f"team: {team}", f"priority: {priority}", "options:",
                      *(f"  - {{{o}}}" for o in options), "spot: allowed", "duration_hours: 24", "image: img:1"]) + "\n"


def test_a_job_that_fits_the_room_a_cost_move_freed_is_placed() -> None:
    # The greedy: vision/big takes both v6e slices (option 0), so vision/flex takes the only H100 node (2 of
    # its 8 GPUs) and vision/small (8 GPUs) finds no room. The improvement phase's relocation then runs big on
    # one slice (option 1, half the cost) and flex on the freed slice, closing the node: small fitted it, yet
    # waited "lower in the queue than jobs that took the remaining capacity", with a reservation of that very
    # node in 24 h (no step after the cost moves placed pending jobs). lang's three production jobs, blocked by
    # its zero quota, take the three kicks that would otherwise have found the plan another way.
    v6e, h100 = "accelerator: tpu-v6e, topology: 4x4", "accelerator: nvidia-h100-80gb, count"
    files = {"policies/teams.yaml": TWO_TEAMS, "policies/priorities.yaml": PRIORITIES,
             "fleet/clusters/gke0.yaml": SPOT_POOLS,
             "jobs/vision/big.yaml": spot_job("big", "vision", "research", f"{v6e}, slices: 2",
                                              f"{v6e}, relative_speed: 0.5"),
             "jobs/vision/flex.yaml": spot_job("flex", "vision", "opportunistic", v6e, f"{h100}: 2"),
             "jobs/vision/small.yaml": spot_job("small", "vision", "opportunistic", f"{h100}: 8")}
    for i in range(3):
        files[f"jobs/lang/q{i}.yaml"] = spot_job(f"q{i}", "lang", "production", f"{h100}: 8")
    v = check({k: x.encode() for k, x in files.items()}, CAT)
    assert v.ok, v.errors
    p = plan(v)
    small = p.placement_of("vision/small")
    assert small is not None and (small.pool, small.units) == ("h100", (0,)), p.pending
    assert [x.job for x in p.pending] == ["lang/q0", "lang/q1", "lang/q2"]


def test_a_replica_kept_off_its_siblings_node_says_so_and_starts_when_that_replica_ends() -> None:
    # svc's two replicas take a node each; the pool's only node holds replica 0 and has 7 GPUs free. Replica 1
    # waited "lower in the queue than jobs that took the remaining capacity", expected to start now (0.0 h): the
    # reason and the start measured room without the rule that a replica takes units of its own.
    svc = {"vision/svc": gpu_job("svc", "vision", 1, kind="inference", replicas=2, duration_hours=10)}
    head = run(svc)
    (p,) = head.pending
    assert not any("lower in the queue" in r for r in p.reasons), p.reasons
    assert any("the room left is on nodes the job's other replicas run on" in r for r in p.reasons), p.reasons
    assert p.expected_start == 10.0   # when replica 0 ends


def test_a_forced_move_that_waits_is_not_expected_into_a_higher_jobs_reservation() -> None:
    # vision/a (research, 5 h) ran on gke-usc1, whose file is removed: it must move, and the only other node runs
    # vision/run until 10 h. vision/big (critical) holds that node from 10 h. A forced move may take reserved
    # units now (it is running work), but it waits: by 10 h it is a waiting job as any, and big comes first. Its
    # expected start and its own reservation were 10 h on big's node (two reservations of one node at one start).
    old = ONE_NODE.replace("name: gke-usc1", "name: gke-old").replace("ml-usc1", "ml-old")
    never = {"policies/priorities.yaml": PRIORITIES.replace("within_team: lower_priority", "within_team: never"),
             "fleet/clusters/gke-old.yaml": old}
    jobs = {"vision/run": gpu_job("run", "vision", 8, priority="production", duration_hours=10),
            "vision/a": gpu_job("a", "vision", 8, priority="research", duration_hours=5)}
    base = run(jobs, never)
    assert (base.placement_of("vision/a").cluster, base.placement_of("vision/run").cluster) == ("gke-usc1", "gke-old")
    jobs["vision/big"] = gpu_job("big", "vision", 8, priority="critical", duration_hours=10)
    jobs["vision/b"] = gpu_job("b", "vision", 8, priority="research", duration_hours=5)
    head = run(jobs, {**never, "fleet/clusters/gke-usc1.yaml": None}, base)
    waits = {x.job: x for x in head.pending}
    assert any("was running, but pool gke-usc1/h100 no longer exists" in r for r in waits["vision/a"].reasons)
    assert (waits["vision/big"].expected_start, waits["vision/big"].reservation) == (10.0, ("gke-old", "h100", (0,)))
    assert (waits["vision/a"].expected_start, waits["vision/a"].reservation) == (20.0, ("gke-old", "h100", (0,)))
    assert waits["vision/b"].expected_start == 25.0


def options_job(name: str, *options: str) -> str:
    """A lang job with these options (each the inside of a flow mapping) in this order."""
    return "\n".join([f"name: {name}", "team: lang", "options:", *(f"  - {{{o}}}" for o in options),
                      "image: img:1"]) + "\n"


H100 = "accelerator: nvidia-h100-80gb"
# a3-highgpu-8g: 208 cpus a node. `a-big` (kept first: its id sorts first) holds 150 of them beside `x`.
BIG = {"lang/a-big": options_job("a-big", f"{H100}, count: 1, cpus: 150")}


def test_a_running_job_whose_options_swap_keeps_the_gang_it_runs() -> None:
    # lang/x runs 8 GPUs (its option 0). A commit swaps its options: the gang that runs is now option 1. Before,
    # the option at its index (4 GPUs) was taken for its gang: "the job's shape changed", and the running job
    # was re-created on the very node it ran on.
    eight, four = f"{H100}, count: 8", f"{H100}, count: 4, relative_speed: 0.3"
    base = run({"lang/x": options_job("x", eight, four)})
    assert base.placement_of("lang/x").option == 0   # type: ignore[union-attr]
    head = run({"lang/x": options_job("x", four, eight)}, None, base)
    x = head.placement_of("lang/x")
    assert x is not None
    assert (x.option, x.units, x.accelerators_per_unit, x.status, x.reason) == (1, (0,), 8, "kept", "")


def test_a_running_job_whose_options_swap_keeps_the_cpus_it_runs_with() -> None:
    # The hunt's lang/j7: two options of one GPU, 8 and 200 cpus; x runs the 8-cpu one beside a-big (150 cpus).
    # Swapped, the option at its index asks 200 cpus, more than the node has beside a-big: before, x was
    # re-placed with the untrue reason "its units on gke-usc1/h100 are gone (the pool's max is now 1)".
    small, large = f"{H100}, count: 1, cpus: 8", f"{H100}, count: 1, cpus: 200"
    base = run({**BIG, "lang/x": options_job("x", small, large)})
    head = run({**BIG, "lang/x": options_job("x", large, small)}, None, base)
    x = head.placement_of("lang/x")
    assert x is not None
    assert (x.option, x.units, x.status, x.reason) == (1, (0,), "kept", "")
    assert head.placement_of("lang/a-big").status == "kept"   # type: ignore[union-attr]


def test_a_running_job_whose_option_grew_past_its_node_is_kept_as_it_runs() -> None:
    # The option x runs now asks 200 cpus; its node has 58 beside a-big. Running work is not stopped for a
    # request it did not start with: x is kept (the loop never re-creates a kept job, so it runs as it started),
    # and the plan says why its node lacks what its file asks. Before, x moved ("its units ... are gone").
    base = run({**BIG, "lang/x": options_job("x", f"{H100}, count: 1, cpus: 8")})
    head = run({**BIG, "lang/x": options_job("x", f"{H100}, count: 1, cpus: 200")}, None, base)
    x = head.placement_of("lang/x")
    assert x is not None
    assert (x.option, x.units, x.status) == (0, (0,), "kept")
    assert x.reason == ("its option 0 asks 200 cpus per node, more than its units on gke-usc1/h100 have free beside "
                        "lang/a-big (58): it is kept as it runs, holding the 58 cpus they have left (what it runs with "
                        "is not known: planned from git alone), and runs what its option asks when it starts again")
    # the node's cpus are all held: a job that asks cpus there waits (the pool has one node)
    more = run({**BIG, "lang/x": options_job("x", f"{H100}, count: 1, cpus: 200"),
                "lang/y": options_job("y", f"{H100}, count: 1, cpus: 1")}, None, base)
    assert more.placement_of("lang/y") is None
    assert more.placement_of("lang/x").status == "kept"   # type: ignore[union-attr]


def test_a_running_job_kept_as_it_runs_holds_what_its_pods_request() -> None:
    # From what runs: x's pods request 8 cpus (its JobSet), beside a-big's 150 on the 208-cpu node; its file now
    # asks 200. Kept as it runs, x held all 58 cpus the node had left, so y (1 GPU, 1 cpu) waited beside 50 cpus
    # that no pod requests. It holds the 8 its pods request, says so, and y starts beside it.
    from test_live import observed, snapshot, stamped

    from reconciler.pipeline import plan as pipeline_plan

    files = {"jobs/lang/a-big.yaml": BIG["lang/a-big"], "jobs/vision/train.yaml": None,
             "jobs/lang/x.yaml": options_job("x", f"{H100}, count: 1, cpus: 200"),
             "jobs/lang/y.yaml": options_job("y", f"{H100}, count: 1, cpus: 1"),
             "fleet/clusters/onprem-sjc.yaml": None, "fleet/clusters/gke-usc1.yaml": ONE_NODE}
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    objs = []
    for job, cpus in (("lang/a-big", "150"), ("lang/x", "8")):
        js, wl = stamped(v, job, "h100", "running", units=(0,), digest="started-before", accel="gpu", per_pod=1)
        pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        pod["containers"][0]["resources"]["requests"] = {"cpu": cpus, "memory": "64Gi"}
        objs += [js, wl]
    kept_at_its_pods_8_cpus(pipeline_plan(v, observed=snapshot(60, observed("gke-usc1", objs))), "lang/x")


def kept_at_its_pods_8_cpus(p: Plan, job: str) -> None:
    """`job` (its file asks 200 cpus a node, its pods 8) is kept as it runs on node 0 of gke-usc1/h100 beside
    lang/a-big, holding the 8 cpus, and lang/y starts beside it."""
    x, y = p.placement_of(job), p.placement_of("lang/y")
    assert x is not None and (x.units, x.status) == ((0,), "kept"), x
    assert x.reason == ("its option 0 asks 200 cpus per node, more than its units on gke-usc1/h100 have free beside "
                        "lang/a-big (58): it is kept as it runs, holding the 8 cpus its pods request, and runs what "
                        "its option asks when it starts again"), x
    assert y is not None and y.units == (0,), p.pending


def test_a_job_of_an_unreachable_cluster_runs_with_what_its_pods_requested_when_last_read() -> None:
    """The JobSet carried over from the last read keeps its pods' requests (last_running): what the job runs with
    is known there too. Before, it was dropped, so a job kept as it runs held everything its node had left, and
    its reason said that its object states no request, untrue."""
    from test_live import fleet, observed, snapshot, stamped

    from reconciler.observe.model import ClusterObservation, carry_over
    from reconciler.pipeline import live_inputs

    v = fleet()
    objs = stamped(v, "vision/small", "h100-owned", "running", units=(2,), accel="gpu", per_pod=8)
    pod = objs[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["resources"]["requests"] = {"cpu": "12", "memory": "100Gi"}
    first = snapshot(0, observed("onprem-sjc", objs))
    down = ClusterObservation(name="onprem-sjc", status="unreachable")
    ran = live_inputs(v, carry_over(carry_over(first, snapshot(1, down)), snapshot(5, down))).running["vision/small"]
    assert (ran.cluster, ran.units, ran.cpus, ran.memory_gib) == ("onprem-sjc", (2,), 12, 100)


def test_a_running_job_whose_requests_fleet_does_not_read_is_not_said_to_state_none() -> None:
    # x runs as a RayJob whose pod templates state no cpu request: what it runs with is not known, so it holds
    # what the node has left. Its reason said "its object states no request", untrue of a RayJob that states them
    # (its Ray cluster's templates are read since: tests/test_ray_service_asks.py).
    from test_live import observed, snapshot, stamped

    from reconciler.observe.model import ClusterObservation
    from reconciler.observe.ray import _with
    from reconciler.pipeline import plan as pipeline_plan

    files = {"jobs/lang/a-big.yaml": BIG["lang/a-big"], "jobs/vision/train.yaml": None,
             "jobs/lang/x.yaml": options_job("x", f"{H100}, count: 1, cpus: 200"),
             "fleet/clusters/onprem-sjc.yaml": None, "fleet/clusters/gke-usc1.yaml": ONE_NODE}
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    objs = [o for job in ("lang/a-big", "lang/x") for o in stamped(v, job, "h100", "running", units=(0,),
                                                                       digest="started-before", accel="gpu", per_pod=1)]
    seen = observed("gke-usc1", objs)
    rows = tuple(_with(js, kind="RayJob") if js.job == "x" else js for js in seen.jobsets)
    assert [(js.kind, js.pod_cpus) for js in rows if js.job == "x"] == [("RayJob", None)]
    p = pipeline_plan(v, observed=snapshot(60, ClusterObservation.model_construct(**{**seen.__dict__,
                                                                                      "jobsets": rows})))
    x = p.placement_of("lang/x")
    assert x is not None and x.status == "kept", x
    assert "its object states no request" not in x.reason, x.reason
    assert "(what it runs with is not known: the pod templates of what runs it state no such request, or none " \
           "Fleet can read)" in x.reason, x.reason


def test_a_running_job_whose_option_grew_in_a_draining_cluster_stays_unless_it_moves() -> None:
    # The hunt's case: its cluster drains and no other pool takes the job: it stays, kept, with the reason of the
    # drain. Before, it was stopped ("its units on gke-usc1/h100 are gone"), untrue, with nowhere to go.
    base = run({**BIG, "lang/x": options_job("x", f"{H100}, count: 1, cpus: 8")})
    draining = {"fleet/clusters/gke-usc1.yaml": ONE_NODE.replace("pools:", "status: draining\npools:")}
    head = run({**BIG, "lang/x": options_job("x", f"{H100}, count: 1, cpus: 200")}, draining, base)
    x = head.placement_of("lang/x")
    assert x is not None
    assert (x.units, x.status) == ((0,), "kept") and x.reason.startswith("cluster gke-usc1 is draining"), x
    assert x.reason.endswith("; its option 0 asks 200 cpus per node, more than its units on gke-usc1/h100 have "
                             "free beside lang/a-big (58): it is kept as it runs, holding the 58 cpus they have left "
                             "(what it runs with is not known: planned from git alone), and runs what its option asks "
                             "when it starts again"), x


def test_a_running_job_whose_units_are_really_gone_says_so() -> None:
    # The pool's max shrank from 2 nodes to 1: the job on node 1 must be placed again, and says why.
    two = {"fleet/clusters/gke-usc1.yaml": ONE_NODE.replace("    max: 1\n", "    max: 2\n")}
    jobs = {"lang/a": gpu_job("a", "lang", 8), "lang/b": gpu_job("b", "lang", 8)}
    base = run(jobs, two)
    assert base.placement_of("lang/b").units == (1,)   # type: ignore[union-attr]
    head = run(jobs, None, base)
    (b,) = [x for x in head.pending if x.job == "lang/b"]
    assert "was running, but its units on gke-usc1/h100 are gone (the pool's max is now 1)" in b.reasons


def test_a_running_job_whose_units_another_holds_does_not_say_they_are_gone() -> None:
    # A base that put two jobs on slice 0 of a 4-slice TPU pool (as a stale base can): the second kept finds its
    # slice held, not gone. Before: "its units on gke-usc1/v5p-4x4x4 are gone (the pool's max is now 4)", untrue.
    from dataclasses import replace
    tpu = "options:\n  - {accelerator: tpu-v5p, topology: 4x4x4}\nimage: img:1\n"
    jobs = {"vision/a": f"name: a\nteam: vision\n{tpu}", "vision/b": f"name: b\nteam: vision\n{tpu}"}
    gke = {"fleet/clusters/gke-usc1.yaml": GKE}
    base = run(jobs, gke)
    stale = replace(base, placements=tuple(replace(p, units=(0,)) for p in base.placements))
    b = run(jobs, gke, stale).placement_of("vision/b")
    assert b is not None
    assert (b.status, b.reason) == ("moved", "its units on gke-usc1/v5p-4x4x4 are held by other running work")


def _h100_fleet(nodes: int, jobs: dict[str, str], teams: str | None = None, tpu: bool = False):
    pools = ("  - name: v5p-4x4x4\n    accelerator: tpu-v5p\n    topology: 4x4x4\n    max: 1\n" if tpu else "") + \
        f"  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: {nodes}\n"
    files = {f"jobs/{k}.yaml": v for k, v in jobs.items()}
    files.update({"jobs/vision/train.yaml": None, "fleet/clusters/onprem-sjc.yaml": None,
                  "fleet/clusters/gke-usc1.yaml": GKE[:GKE.index("  - name: v5p-4x4x4")] + pools})
    if teams is not None:
        files["policies/teams.yaml"] = teams
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    return v


def _job(name: str, team: str, prio: str, option: str, hours: float) -> str:
    return (f"name: {name}\nteam: {team}\npriority: {prio}\noptions:\n  - {{{option}}}\nimage: img:1\n"
            f"duration_hours: {hours}\n")


GPUS = "accelerator: nvidia-h100-80gb, count: {}"


def test_a_lower_jobs_expected_start_does_not_take_a_higher_twins_answer() -> None:
    # One node runs two critical 4-GPU jobs (ending at 1 h and 5 h); research `w` holds the whole node from 5 h.
    # research b-low (4.5 h) may backfill now but fits only at 1 h, when it would no longer end by 5 h: it starts
    # at 15 h. production a-high, same shape and duration, is not bound by w's reservation: 1 h. The expected-start
    # cache keyed both alike (the reservations they may not use *now*), so b-low took a-high's 1 h when a-high
    # was reckoned first (production's own reservation goes to the TPU job h0, so a-high holds none).
    tpu = "accelerator: tpu-v5p, topology: 4x4x4"
    running = {"vision/r1": _job("r1", "vision", "critical", GPUS.format(4), 1),
               "vision/r2": _job("r2", "vision", "critical", GPUS.format(4), 5),
               "vision/rt": _job("rt", "vision", "critical", tpu, 10)}
    base = plan(_h100_fleet(1, running, tpu=True))
    queue = {"vision/h0": _job("h0", "vision", "production", tpu, 10),
             "vision/w": _job("w", "vision", "research", GPUS.format(8), 10),
             "vision/b-low": _job("b-low", "vision", "research", GPUS.format(4), 4.5),
             "vision/a-high": _job("a-high", "vision", "production", GPUS.format(4), 4.5)}
    head = plan(_h100_fleet(1, {**running, **queue}, tpu=True), base)
    waits = {p.job: p for p in head.pending}
    assert waits["vision/w"].reservation == ("gke-usc1", "h100", (0,)) and waits["vision/w"].expected_start == 5.0
    assert (waits["vision/a-high"].expected_start, waits["vision/b-low"].expected_start) == (1.0, 15.0)


def test_backfill_is_judged_at_the_start_its_quota_allows() -> None:
    # lang is out of H100 quota until lang/q ends at 3 h (vision lends nothing). vision/w (48 GPUs) holds all six
    # nodes from 5 h. lang/l (8 GPUs, 4.5 h) fits a free node now, so it "may backfill", and its quota frees at
    # 3 h: it was expected at 3 h on node 5, which it would hold until 7.5 h, past w's start. It starts when w ends.
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 64, lending_limit: 0}")
    running = {"lang/q": _job("q", "lang", "research", GPUS.format(32), 3),
               "vision/r": _job("r", "vision", "critical", GPUS.format(8), 5)}
    base = plan(_h100_fleet(6, running, teams))
    head = plan(_h100_fleet(6, {**running, "vision/w": _job("w", "vision", "research", GPUS.format(48), 10),
                                "lang/l": _job("l", "lang", "research", GPUS.format(8), 4.5)}, teams), base)
    waits = {p.job: p for p in head.pending}
    assert waits["vision/w"].expected_start == 5.0 and waits["vision/w"].reservation[2] == (0, 1, 2, 3, 4, 5)
    assert waits["lang/l"].expected_start == 15.0


def test_a_neighbour_whose_option_grew_does_not_make_an_unchanged_job_say_its_request_changed() -> None:
    # a-big (150 cpus) and x (50) share one 208-cpu node; a commit raises a-big to 200. Kept first (by id), a-big
    # took the node's cpus at its new request, and x, whose file did not change, was kept with "its option 0 now
    # asks 50 cpus": untrue. Which of them grew is not known (a placement records no cpus); the reason now says
    # what x asks and what the job kept beside it leaves.
    base = run({"lang/a-big": options_job("a-big", f"{H100}, count: 1, cpus: 150"),
                "lang/x": options_job("x", f"{H100}, count: 1, cpus: 50")})
    head = run({"lang/a-big": options_job("a-big", f"{H100}, count: 1, cpus: 200"),
                "lang/x": options_job("x", f"{H100}, count: 1, cpus: 50")}, None, base)
    x = head.placement_of("lang/x")
    assert x is not None and x.status == "kept" and "now asks" not in x.reason, x
    assert x.reason == ("its option 0 asks 50 cpus per node, more than its units on gke-usc1/h100 have free beside "
                        "lang/a-big (8): it is kept as it runs, holding the 8 cpus they have left (what it runs with "
                        "is not known: planned from git alone), and runs what its option asks when it starts again")


def test_a_job_short_of_cpus_beside_free_gpus_is_told_so_not_that_gpus_are_short() -> None:
    # a-big takes 1 GPU and 200 of the node's 208 cpus; y asks 1 GPU and 16 cpus. Before, y's reason said only
    # "0 nodes free; held by lang/a-big (1 GPUs)", as if GPUs were short, on a node with 7 GPUs free.
    p = run({"lang/a-big": options_job("a-big", f"{H100}, count: 1, cpus: 200"),
             "lang/y": options_job("y", f"{H100}, count: 1, cpus: 16")})
    (y,) = [w for w in p.pending if w.job == "lang/y"]
    assert y.reasons[0].endswith("; held by lang/a-big (1 GPUs); on 1 node the 1 GPUs it needs are free but not "
                                 "the 16 cpus (at most 8 free there) it asks"), y
    files = {"jobs/lang/a-big.yaml": options_job("a-big", f"{H100}, count: 1, cpus: 200"),
             "jobs/lang/y.yaml": options_job("y", f"{H100}, count: 1, cpus: 16"), "jobs/vision/train.yaml": None,
             "fleet/clusters/onprem-sjc.yaml": None, "fleet/clusters/gke-usc1.yaml": ONE_NODE}
    result, state = plan_with_state(check(with_files(files), CAT), None)
    assert ("- option 0 (1x nvidia-h100-80gb) on gke-usc1/h100 ($11.06/h): no free capacity: on 1 node the 1 GPUs it "
            "needs are free but not the 16 cpus (at most 8 free there) it asks") in explain(result, state, "lang/y")
    p = run({"lang/a-big": options_job("a-big", f"{H100}, count: 7, cpus: 100"),
             "lang/y": options_job("y", f"{H100}, count: 2, cpus: 16")})
    (y,) = [w for w in p.pending if w.job == "lang/y"]
    assert "it needs are free" not in y.reasons[0], y          # GPUs are what is short: said as before


def test_a_job_that_states_no_cpus_holds_the_cpus_its_pod_requests_beside_one_that_does() -> None:
    # a-big asks 200 of the node's 208 cpus; x states none, and its pod requests render's default (half of its share
    # of the node: 13 cpus). Before, the planner counted x as 0 cpus and put it on the same node, where its pod
    # could never be scheduled (13 > 8 free), while the plan said it runs.
    p = run({"lang/a-big": options_job("a-big", f"{H100}, count: 1, cpus: 200"),
             "lang/x": options_job("x", f"{H100}, count: 1")})
    assert p.placement_of("lang/a-big") is not None
    (x,) = [w for w in p.pending if w.job == "lang/x"]
    assert x.reasons[0].endswith("on 1 node the 1 GPUs it needs are free but not the 13 cpus (at most 8 free there) "
                                 "it asks"), x
    alone = run({"lang/x": options_job("x", f"{H100}, count: 1")})
    assert alone.placement_of("lang/x") is not None     # what render asks of an empty node fits it


SLURM_H100 = ('name: hpc\nprovider: slurm\nregion: onprem-lab\nslurm: {rest_url: "http://slurm-lab:6820", '
              'api_version: v0.0.38, token_env: SLURM_JWT}\npools:\n  - {name: h100, accelerator: nvidia-h100-80gb, '
              "capacity: owned, min: 1, max: 1, partition: gpu,\n     node: {accelerators: 8, cpus: 208, "
              "memory_gib: 1872}, hourly_usd: 20.0}\n")


def test_a_gang_is_reckoned_per_pool_kind_a_slurm_pool_beside_a_kubernetes_one_with_the_same_nodes() -> None:
    # The planner's gang cache was keyed by the node's size alone: a Slurm partition's gang (what the file states:
    # slurm/submit.py asks no cpus) and a Kubernetes pool's with the same nodes (render's pod requests) were one,
    # whichever was reckoned first, so a job was placed beside another on a node their pods do not fit.
    files = {"jobs/lang/x.yaml": options_job("x", f"{H100}, count: 1"), "jobs/vision/train.yaml": None,
             "fleet/clusters/onprem-sjc.yaml": None, "fleet/clusters/gke-usc1.yaml": ONE_NODE,
             "fleet/clusters/hpc.yaml": SLURM_H100}
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    _, st = plan_with_state(v, None)
    opt = st.jobs["lang/x"].options[0]
    k8s, slurm = st.pools["gke-usc1/h100"], st.pools["hpc/h100"]
    assert (k8s.pool.node_cpus, k8s.pool.node_memory_gib) == (slurm.pool.node_cpus, slurm.pool.node_memory_gib)
    for ps in (slurm, k8s, slurm):
        assert st.gang(opt, ps) == gang_for(opt, ps.pool)
    assert st.gang(opt, k8s).cpus == 13 and st.gang(opt, slurm).cpus == 0
