"""Issue 22: a preemption must buy an earlier start worth more than it loses (plan/victims.py `cheaper_to_wait`).
Planned from what runs, a job that may preempt waits instead when its expected start as running work ends
(`reserve.credible_earliest`) comes so soon that preempting would start it earlier by less than the victims
lose: (start - when the victims stop) x its need, against their restart and work since their checkpoint, in
accelerator-minutes; a victim of the job's class or a higher one also costs its wait again, at least its restart
(`victims.waits_again`). A victim kept running until its checkpoint stops only then, so when work ends before
that, preempting starts the job no sooner at all."""

from __future__ import annotations

import pytest
from test_live import fleet, observed, snapshot, stamped

from reconciler.pipeline import plan
from reconciler.plan import improve
from reconciler.plan.types import Plan

from builders import GKE, PRIORITIES, TEAMS, job

NO_WINDOW = PRIORITIES.replace("preemption:\n", "preemption:\n  checkpoint_window_minutes: 0\n")
WINDOW = PRIORITIES.replace("preemption:\n", "preemption:\n  checkpoint_window_minutes: 15\n")
GPU = {"accel": "gpu", "per_pod": 8}


def _two_running(priorities: str, b_hours: float, need: int = 8) -> Plan:
    """vision's 16 H100s (no borrowing) held by two 8-GPU research jobs, each alone on a node of gke-usc1/h100,
    that ran 20 minutes of their 30-minute checkpoint interval: `a` (10 h) and `b` (`b_hours`). A production job
    needing `need` GPUs waits for vision's quota. Planned from what runs, at minute 60."""
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 16, borrowing_limit: 0}")
    ckpt = "checkpoint_minutes: 30\nspot: never\n"
    v = fleet({"policies/teams.yaml": teams, "policies/priorities.yaml": priorities, "jobs/vision/small.yaml": None,
               "jobs/vision/pretrain.yaml": None,
               "jobs/vision/a.yaml": job("a", count=8, body=ckpt + "duration_hours: 10\n"),
               "jobs/vision/b.yaml": job("b", count=8, body=ckpt + f"duration_hours: {b_hours}\n"),
               "jobs/vision/h.yaml": job("h", count=need, body="priority: production\nspot: never\n")})
    objs = [*stamped(v, "vision/a", "h100", "running", units=(0,), admitted=38, **GPU),     # ran 20 minutes
            *stamped(v, "vision/b", "h100", "running", units=(1,), admitted=38, **GPU)]
    return plan(v, observed=snapshot(60, observed("gke-usc1", objs)))


def _waits(p: Plan, who: str = "vision/h", *running: str) -> str:
    assert p.preemptions == (), p.preemptions
    assert p.placement_of(who) is None
    assert all(p.placement_of(r) is not None for r in running)
    (pending,) = p.pending
    assert pending.job == who
    (why,) = [r for r in pending.reasons if "waiting is cheaper" in r]
    return why


def test_a_job_whose_quota_frees_in_minutes_waits_rather_than_preempt_a_snug_victim() -> None:
    """`b` ends 10 minutes from now (30 of its 30 minutes of duration_hours). Preempting `a` or `b` now loses 8 x
    (20 + 10 restart) = 240 accelerator-minutes to start the job 10 minutes sooner (8 x 10 = 80): it waits, and
    says so. Before, only a victim more than twice the need was weighed against the wait: `a` was preempted
    (each victim restarts: 10,000 jobs over 30 days lose thousands of accelerator-hours to such restarts)."""
    why = _waits(_two_running(NO_WINDOW, 0.5))
    assert why == ("preemption: waiting is cheaper than preempting vision/a: it is expected to start in 0.17 h as "
                   "running work ends; preempting would start it 0.17 h sooner, 1.3 accelerator-hours, against 4.0 "
                   "accelerator-hours the preemption would lose"), why


def test_a_job_that_would_wait_for_its_victims_checkpoint_anyway_waits_for_work_that_ends_first() -> None:
    """With a 15-minute window, a victim 20 minutes into its 30-minute interval keeps running until its checkpoint
    in 10 minutes, and the job starts only then. `b` ends in 5: preempting would start it no sooner, yet `a` would
    restart (8 x 10 accelerator-minutes). Before, `a` was preempted at its checkpoint."""
    why = _waits(_two_running(WINDOW, 25 / 60))
    assert why == ("preemption: waiting is cheaper than preempting vision/a: it is expected to start in 0.083 h "
                   "as running work ends, before vision/a stops at its checkpoint in 10 min; preempting would start "
                   "it no sooner, and lose 1.3 accelerator-hours"), why


def test_a_job_whose_quota_frees_only_in_hours_still_preempts() -> None:
    """`b` ends in 4 h 40 min: preempting `a` (240 accelerator-minutes lost) starts the job 280 minutes sooner
    (8 x 280 = 2,240): it preempts, as before."""
    p = _two_running(NO_WINDOW, 5)
    assert [(x.job, x.by) for x in p.preemptions] == [("vision/a", "vision/h")]
    assert p.placement_of("vision/h") is not None


def test_a_victim_sharing_a_node_with_a_gang_as_large_stops_at_its_checkpoint_in_the_reckoning() -> None:
    """Two 4-GPU research jobs share one node; a 4-GPU production job needs vision's quota. `a` would keep
    running until its checkpoint in 10 minutes (hold_until_checkpoint: the job's gang is not smaller than a's),
    and `b` ends in 10: preempting starts the job no sooner, and `a` restarts. The reckoning took `a` as stopping
    now unless the job took whole units, so it weighed a gain of 10 minutes and preempted `a`."""
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 8, borrowing_limit: 0}")
    ckpt = "checkpoint_minutes: 30\nspot: never\n"
    v = fleet({"policies/teams.yaml": teams, "policies/priorities.yaml": WINDOW, "jobs/vision/small.yaml": None,
               "jobs/vision/pretrain.yaml": None,
               "jobs/vision/a.yaml": job("a", count=4, body=ckpt + "duration_hours: 10\n"),
               "jobs/vision/b.yaml": job("b", count=4, body=ckpt + "duration_hours: 0.5\n"),
               "jobs/vision/h.yaml": job("h", count=4, body="priority: production\nspot: never\n")})
    four = {"accel": "gpu", "per_pod": 4}
    objs = [*stamped(v, "vision/a", "h100", "running", units=(0,), admitted=38, **four),     # ran 20 minutes
            *stamped(v, "vision/b", "h100", "running", units=(0,), admitted=38, **four)]
    why = _waits(plan(v, observed=snapshot(60, observed("gke-usc1", objs))))
    assert why == ("preemption: waiting is cheaper than preempting vision/a: it is expected to start in 0.17 h as "
                   "running work ends, before vision/a stops at its checkpoint in 10 min; preempting would start "
                   "it no sooner, and lose 0.7 accelerator-hours"), why


def test_a_victim_a_smaller_job_shares_a_node_with_is_reckoned_to_lose_its_work_since_its_checkpoint() -> None:
    """With a 15-minute window `a` would keep running until its checkpoint in 10 minutes, unless the job shares its
    node taking fewer GPUs than `a` (`hold_until_checkpoint`). `b` ends in 30 minutes. A 4-GPU job takes half of
    `a`'s node: `a` stops at once (`take` stops it: it cannot be held to its
    checkpoint), losing 8 x (20 + 10 restart) = 240 accelerator-minutes, to start the job 30 minutes sooner
    (4 x 30 = 120): it waits. Before, `a`'s loss was reckoned as its restart alone (80), as if it stopped at its
    checkpoint, while it was reckoned to stop now: it was preempted and lost 4.0 accelerator-hours."""
    why = _waits(_two_running(WINDOW, 50 / 60, 4))
    assert why == ("preemption: waiting is cheaper than preempting vision/a: it is expected to start in 0.5 h as "
                   "running work ends; preempting would start it 0.5 h sooner, 2.0 accelerator-hours, against 4.0 "
                   "accelerator-hours the preemption would lose"), why


def test_a_victim_the_job_takes_whole_is_still_reckoned_to_stop_at_its_checkpoint() -> None:
    """An 8-GPU job takes all of `a`'s node: `a` keeps running until its checkpoint in 10 minutes and loses its
    restart (80 accelerator-minutes), against 8 x 20 = 160 bought (`b` ends in 30): it preempts, `a` stopping at
    its checkpoint."""
    p = _two_running(WINDOW, 50 / 60)
    assert [(x.job, x.by, x.after_minutes) for x in p.preemptions] == [("vision/a", "vision/h", 10)]



def _burst(jobs: int) -> Plan:
    """vision's owned pool (4 nodes of 8 H100s; gke-usc1's H100 pools removed) is full: research jobs `a`, `c`
    and `d` (10 h), each on a node 20 minutes past its checkpoint (each loses 8 x (20 + 10 restart) = 240
    accelerator-minutes if preempted), and `b`, ending 5 minutes from now, 27 minutes past its checkpoint.
    `jobs` production jobs alike `h0`, `h1`, ... (8 GPUs, 2 h) wait for a node. Planned from what runs, no
    checkpoint window."""
    gke = GKE[:GKE.index("  - name: h100\n")]
    ckpt = "checkpoint_minutes: 30\nspot: never\n"
    files: dict[str, str | None] = {"policies/priorities.yaml": NO_WINDOW, "jobs/vision/small.yaml": None,
                                    "jobs/vision/pretrain.yaml": None, "fleet/clusters/gke-usc1.yaml": gke}
    for name, hours in (("a", 10), ("b", 0.5), ("c", 10), ("d", 10)):
        files[f"jobs/vision/{name}.yaml"] = job(name, count=8, body=ckpt + f"duration_hours: {hours}\n")
    for i in range(jobs):
        files[f"jobs/vision/h{i}.yaml"] = job(f"h{i}", count=8, body="priority: production\nspot: never\n"
                                                                      "duration_hours: 2\n")
    v = fleet(files)
    objs = [o for unit, name in enumerate("abcd")     # `b` ran 27 minutes: it would lose 8 x (27 + 10) = 296
            for o in stamped(v, f"vision/{name}", "h100-owned", "running", units=(unit,),
                             admitted=33 if name == "b" else 38, **GPU)]
    return plan(v, observed=snapshot(60, observed("onprem-sjc", objs)))


def test_jobs_alike_in_a_burst_each_reckon_past_what_those_before_them_wait_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the default run plans (a fleet past `improve.MAX_PAIRS`; the other runs hold the default run's
    reservation of the class's first blocked job, which need not be one of these). `h0` waits for `b`'s node
    (0.08 h: preempting would start it 5 minutes sooner for 240 lost) and claims it (claims.py); `h1` and `h2`
    then reckon past it: their next node frees when `h0` ends, in 2.08 h, so each preempts one of `a`, `c`,
    `d`. Before, each reckoned `b`'s end as its own and waited, told 2.08 h (after `h0`'s end) while it
    decided on 0.08: a burst of 1-GPU pods of the Alibaba trace waited so, cycle after cycle, up to 2 hours
    (docs/benchmarks.md, thirtieth session)."""
    monkeypatch.setattr(improve, "MAX_PAIRS", 0)
    p = _burst(3)
    assert sorted((x.by, x.job) for x in p.preemptions) == [("vision/h1", "vision/a"), ("vision/h2", "vision/c")]
    (h0,) = [x for x in p.pending if x.job.startswith("vision/h")]
    assert (h0.job, h0.expected_start, h0.reservation) == ("vision/h0", 0.08, ("onprem-sjc", "h100-owned", (1,)))



def _reclaim(b_minutes: int, h_priority: str = "research") -> Plan:
    """The fleet's only on-demand H100s are gke-usc1's two nodes, where lang's research jobs `a` (10 h) and `b`
    (ending `b_minutes` from now) run, each alone on a node, 20 minutes past their 30-minute checkpoint, on H100
    quota lang borrows of vision's (lang's nominal is 0). vision's `h` (8 GPUs, `h_priority`) fits vision's
    nominal and may reclaim (`reclaim_within_cohort: any`); it lacks a node. Planned from what runs, no
    checkpoint window: a victim loses 8 x (20 + 10 restart) = 240 accelerator-minutes."""
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 32}", "nvidia-h100-80gb: {nominal: 0, borrowing_limit: 16}")
    gke = GKE.replace("accelerator: nvidia-h100-80gb\n    max: 8\n", "accelerator: nvidia-h100-80gb\n    max: 2\n", 1)
    assert gke != GKE
    ckpt = "checkpoint_minutes: 30\nspot: never\n"
    v = fleet({"policies/teams.yaml": teams, "policies/priorities.yaml": NO_WINDOW, "jobs/vision/small.yaml": None,
               "jobs/vision/pretrain.yaml": None, "fleet/clusters/gke-usc1.yaml": gke,
               "fleet/clusters/onprem-sjc.yaml": None,
               "jobs/lang/a.yaml": job("a", team="lang", count=8, body=ckpt + "duration_hours: 10\n"),
               "jobs/lang/b.yaml": job("b", team="lang", count=8,
                                       body=ckpt + f"duration_hours: {(20 + b_minutes) / 60}\n"),
               "jobs/vision/h.yaml": job("h", count=8, body=f"priority: {h_priority}\nspot: never\n")})
    objs = [*stamped(v, "lang/a", "h100", "running", units=(0,), admitted=38, **GPU),     # ran 20 minutes
            *stamped(v, "lang/b", "h100", "running", units=(1,), admitted=38, **GPU)]
    return plan(v, observed=snapshot(60, observed("gke-usc1", objs)))


def test_a_victim_of_the_preemptors_class_is_charged_its_wait_again_so_a_swap_within_a_class_must_buy_more() -> None:
    """`b` ends in 35 minutes: reclaiming `a` now starts `h` 35 minutes sooner (8 x 35 = 280 accelerator-minutes)
    and loses 240. Both are research: the preemption only swaps which research job waits, and `a` waits again at
    least its 10 restart minutes (8 x 10 = 80; `victims.waits_again`): 280 < 320, `h` waits, and says so. Before,
    280 >= 240: `a` was stopped, and went back to the queue behind the room `h` would have had (Alibaba trace,
    seed 1: 40 of 60 victims of their class or a higher one waited again at least their restart, the median 15
    minutes: `bench/preempt_victims.py`)."""
    why = _waits(_reclaim(35), "vision/h", "lang/a")
    assert why == ("preemption: waiting is cheaper than preempting lang/a: it is expected to start in 0.58 h as "
                   "running work ends; preempting would start it 0.58 h sooner, 4.7 accelerator-hours, against 4.0 "
                   "accelerator-hours the preemption would lose, and 1.3 accelerator-hours its victims of its class or "
                   "a higher one would wait again, at least"), why


def test_a_higher_class_still_preempts_a_lower_one_when_the_start_it_buys_beats_what_the_victim_loses() -> None:
    """The same with `h` production: `a` is of a lower class, whose wait the priorities put after `h`'s; 280 >= 240,
    `a` is reclaimed as before. And with `b` ending in 45 minutes, research `h` buys 360 >= 320: it reclaims too."""
    for prio, minutes in (("production", 35), ("research", 45)):
        p = _reclaim(minutes, prio)
        assert [(x.job, x.by) for x in p.preemptions] == [("lang/a", "vision/h")], (prio, minutes)
        assert p.placement_of("vision/h") is not None


def test_a_claimed_start_that_a_later_preemption_took_is_told_as_the_final_plan_has_it() -> None:
    """vision's 8 nodes are full: `r` ends in half an hour, r2-r8 run 19 hours more. Production `w1` and `w2` need a
    node for 5 hours; lang's `z` (64 GPUs) holds the class's reservation. `w1` finds waiting for `r` cheaper than
    preempting it and claims its node at 0.5 h; `w2` then preempts `r` and takes that node for 5 hours. Before the
    forty-first session's review `w1` was still told 0.5 h (its claim); the final plan gives 5 h."""
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 64, borrowing_limit: 0}") \
        .replace("max_priority: research", "max_priority: production")
    body = "checkpoint_minutes: 45\nspot: never\nduration_hours: "
    files = {"policies/teams.yaml": teams, "policies/priorities.yaml": NO_WINDOW, "jobs/vision/small.yaml": None,
             "jobs/vision/pretrain.yaml": None, "fleet/clusters/onprem-sjc.yaml": None,
             "jobs/vision/r.yaml": job("r", count=8, body=body + "1\n"),
             **{f"jobs/vision/r{i}.yaml": job(f"r{i}", count=8, body=body + "20\n") for i in range(2, 9)},
             **{f"jobs/vision/{n}.yaml": job(n, count=8, body="priority: production\nspot: never\nduration_hours: 5\n")
                for n in ("w1", "w2")},
             "jobs/lang/z.yaml": job("z", team="lang", count=64,
                                     body="priority: production\nspot: never\nduration_hours: 5\n")}
    v = fleet(files)
    objs = stamped(v, "vision/r", "h100", "running", units=(0,), admitted=28, **GPU)      # ran 30 minutes
    for i in range(2, 9):
        objs += stamped(v, f"vision/r{i}", "h100", "running", units=(i - 1,), admitted=18, **GPU)
    p = plan(v, observed=snapshot(60, observed("gke-usc1", objs)))
    assert [(x.job, x.by) for x in p.preemptions] == [("vision/r", "vision/w2")]
    assert p.placement_of("vision/w2") is not None
    assert {q.job: q.expected_start for q in p.pending}["vision/w1"] == 5.0


def test_hours_in_a_wait_reason_read_as_hours() -> None:
    """A start 123 hours away was written `1.2e+02 h` (`.2g`) until the forty-first session's review."""
    from reconciler.plan.victims import _hours

    assert [_hours(h) for h in (0.0833, 0.5, 2.5, 9.94, 12.1, 123.4, 1234.5)] == [
        "0.083", "0.5", "2.5", "9.9", "12", "123", "1,234"]
