"""Defects of the `kueue` and `kueue-multikueue` baselines against Kueue's real behaviour (kubernetes-sigs/kueue:
pkg/scheduler/scheduler.go's cycle, pkg/scheduler/preemption's classical algorithm, waitForPodsReady's requeuing):
each test fails on the model as it was before its fix, and each scenario is small enough to follow by hand."""

from __future__ import annotations

from typing import Any

from test_simulate import line, trace  # the same trace lines as the simulator's other tests

from reconciler.simulate.engine import READY_EV, Engine
from reconciler.simulate.faults import FaultModel
from reconciler.simulate.policies import make
from reconciler.simulate.results import result
from reconciler.simulate.trace import Trace

from builders import PRIORITIES, TEAMS, base_files

H100 = "nvidia-h100-80gb"


def run(tr: Trace, policy: str = "kueue", days: float = 1) -> tuple[Engine, dict[str, Any]]:
    sim = Engine(tr, FaultModel.off(), 1, days, 60)
    sim.run(make(policy, sim))
    return sim, result(sim, policy, days, 1).doc


def one_cluster(teams: str, priorities: str = PRIORITIES) -> dict[str, bytes]:
    """The test fleet without its on-prem cluster: gke-usc1 alone (8 H100 nodes on demand, 8 spot), so each
    team's ClusterQueue there holds the team's whole quota."""
    files = base_files()
    del files["fleet/clusters/onprem-sjc.yaml"]
    files["policies/teams.yaml"] = teams.encode()
    files["policies/priorities.yaml"] = priorities.encode()
    return files


def cohort_of(**nominal: int) -> str:
    """teams.yaml: one team per keyword, all in cohort `research`, each with that nominal H100 quota."""
    body = "".join(f"  - name: {t}\n    owners: ['@org/{t}']\n    cohort: research\n"
                   f"    quota:\n      {H100}: {{nominal: {n}}}\n" for t, n in nominal.items())
    head = "admins: ['@org/fleet-admins']\ncohorts:\n  - {name: org}\n  - {name: research, parent: org}\n"
    return head + "teams:\n" + body


# --- admission -------------------------------------------------------------------------------------------------

def test_a_scheduling_cycle_admits_the_heads_that_do_not_borrow_first() -> None:
    """Kueue's cycle takes the head of each ClusterQueue and admits those that fit within nominal quota before
    those that borrow (scheduler.go's entry ordering: borrowing last, then priority, then creation). vision's
    production job (56 GPUs, 5 borrowed from lang) and lang's research job (24, within its 26) arrive together:
    lang's goes first and vision's waits. The model took them by priority alone, admitted vision's borrowing
    job, then let lang's reclaim its quota by preempting it a moment after it started."""
    tr = trace(line("v", 0, 2, count=56, priority="production"),
               line("l", 0, 2, team="lang", count=24, spot="allowed"))
    sim, doc = run(tr)
    v, lang = sim.by_id["vision/v"], sim.by_id["lang/l"]
    assert doc["preemptions"] == 0 and v.interruptions == 0
    assert lang.first_start_s == 600                               # placed at once, 10 minutes to provision
    assert v.first_start_s is not None and lang.finish_s is not None and v.first_start_s >= lang.finish_s


# --- preemption ------------------------------------------------------------------------------------------------

def test_kueue_preempts_for_quota_never_for_nodes() -> None:
    """Kueue sees quota, not nodes. vision's research job (40 GPUs) and lang's (24) fill the 8 on-demand H100
    nodes of gke-usc1 within their quotas (51, 26); vision's production job (8, spot never) still fits vision's
    quota (48 of 51), so Kueue admits it without preemption and its pod waits for a node. The model preempted
    the 40-GPU research job to free a node, an eviction Kueue never makes."""
    tr = trace(line("research", 0, 6, count=40), line("l", 0, 6, team="lang", count=24),
               line("prod", 60, 1, priority="production"))
    sim, doc = run(tr)
    assert doc["preemptions"] == 0 and sim.by_id["vision/research"].interruptions == 0
    prod = sim.by_id["vision/prod"]
    assert prod.first_start_s is not None and prod.first_start_s >= 6 * 3600


def test_reclaim_skips_a_cohort_mate_once_it_no_longer_borrows() -> None:
    """x (nominal 16) runs X2 (16 GPUs) and X1 (8, borrowed); z (16) runs Z1 (24, 8 borrowed); a's 16 are all
    lent. a's production job (16) reclaims them: X1 goes first (lowest priority); x then borrows nothing, so
    Kueue skips X2 (its ClusterQueue is within nominal: the candidate iterator's `candidateIsValid`) and takes Z1.
    The model evicted X2, a job running within its team's nominal quota, and put X1 back."""
    files = one_cluster(cohort_of(a=16, x=16, z=16))
    tr = trace(line("z1", 0, 10, team="z", count=24, spot="allowed"),
               line("x2", 1, 10, team="x", count=16, spot="allowed"),
               line("x1", 2, 10, team="x", count=8, priority="opportunistic"),
               line("a", 60, 1, team="a", count=16, priority="production", spot="allowed"), files=files)
    sim, _ = run(tr)
    a = sim.by_id["a/a"]
    assert a.first_start_s is not None and a.first_start_s < 70 * 60
    assert sim.by_id["x/x2"].interruptions == 0
    assert sim.by_id["z/z1"].interruptions == 1


def test_reclaim_with_the_preemptor_s_own_lower_priority_work_when_it_then_fits_its_nominal() -> None:
    """a (nominal 16) runs a research job of 8; x (16) borrows 8 of a's with X1 (24). a's production job (16)
    does not fit a's nominal on top of its research job, but a is under nominal: Kueue's first attempt (no
    borrowing) evicts X1 (reclaim) and a's research job (lower priority, same ClusterQueue), and the job runs
    within a's nominal. The model offered cohort-mates as candidates only when the preemptor fit its nominal
    before any eviction, so the production job waited out X1's 10 hours."""
    files = one_cluster(cohort_of(a=16, x=16))
    tr = trace(line("x1", 0, 10, team="x", count=24, spot="allowed"),
               line("low", 1, 10, team="a", count=8, spot="allowed"),
               line("high", 60, 1, team="a", count=16, priority="production", spot="allowed"), files=files)
    sim, _ = run(tr)
    high = sim.by_id["a/high"]
    assert high.first_start_s is not None and high.first_start_s < 70 * 60
    assert sim.by_id["x/x1"].interruptions == 1 and sim.by_id["a/low"].interruptions == 1


def test_borrow_within_cohort_lets_a_borrowing_preemptor_take_lower_priority_borrowed_work() -> None:
    """`borrow_within_cohort: {policy: lower_priority, max_priority_threshold: 100}` (Kueue's borrowWithinCohort):
    a (16) runs a production job of 8, x (16) borrows 8 with a research job (24, priority 100). a's second
    production job (16) would borrow 8 of x's quota once x's job is gone, and x's job is at or below the
    threshold: Kueue preempts it. The model ignored the setting and the job waited; with `policy: never` it
    still waits (the same scenario, the other branch)."""
    teams = cohort_of(a=16, x=16)
    bwc = PRIORITIES.replace("policy: never", "policy: lower_priority")
    lines = (line("x1", 0, 10, team="x", count=24, spot="allowed"),
             line("first", 1, 10, team="a", count=8, priority="production", spot="allowed"),
             line("second", 60, 1, team="a", count=16, priority="production", spot="allowed"))
    sim, _ = run(trace(*lines, files=one_cluster(teams, bwc)))
    second = sim.by_id["a/second"]
    assert second.first_start_s is not None and second.first_start_s < 70 * 60
    assert sim.by_id["x/x1"].interruptions == 1 and sim.by_id["a/first"].interruptions == 0
    sim, doc = run(trace(*lines, files=one_cluster(teams)))
    assert doc["preemptions"] == 0 and sim.by_id["a/second"].first_start_s >= 10 * 3600


# --- quota -----------------------------------------------------------------------------------------------------

def test_spot_only_work_is_charged_to_the_cluster_queue_s_spot_quota() -> None:
    """With `spot: 16` in vision's H100 quota, gke-usc1's ClusterQueue holds 16 spot GPUs for vision's spot-only
    work apart from its nominal 51 (render's flavors; `QuotaLedger.charged`). vision's research job takes 48 of
    the 51 and lang's job all its 26: the opportunistic job (spot required, 16) still runs, on the spot quota.
    The model charged it to the nominal quota (64 of 51, nothing left to borrow), so it waited."""
    files = base_files()
    files["policies/teams.yaml"] = TEAMS.replace(f"{H100}: {{nominal: 64}}", f"{H100}: {{nominal: 64, spot: 16}}"
                                                 ).encode()
    tr = trace(line("research", 0, 5, count=48), line("l", 1, 5, team="lang", count=24, spot="allowed"),
               line("opp", 10, 1, count=16, priority="opportunistic"), files=files)
    for policy in ("kueue", "kueue-multikueue"):
        sim, doc = run(tr, policy)
        opp = sim.by_id["vision/opp"]
        assert opp.first_start_s is not None and opp.first_start_s <= 25 * 60, policy     # 10 min to provision
        assert doc["violations"]["quota_accelerator_hours"] == 0.0


# --- requeuing -------------------------------------------------------------------------------------------------

def test_the_pods_ready_backoff_counts_pods_ready_evictions_not_preemptions() -> None:
    """Kueue's requeuing backoff (waitForPodsReady.requeuingStrategy: 60 s doubling) grows with the Workload's
    `requeueState.count`, the evictions for PodsReady timeouts; a preemption does not add to it. A job preempted
    three times whose node then fails waits 60 s, not 8 minutes."""
    tr = trace(line("a", 0, 10))
    sim = Engine(tr, FaultModel.off(), 1, 1, 60)
    j = sim.jobs[0]
    j.state, sim.active[j.id] = "waiting", j
    pool = sim.pools["gke-usc1/h100"]
    sim.provision(pool, 0)
    sim.now = pool.provision_s
    sim._handle(READY_EV, 0, (pool.key, pool.units[0].version))          # the node is up
    for why in ("preempt", "preempt", "preempt", "fault"):
        sim.now += 600
        assert sim.place(j, pool, 0, (0,), 8) and j.state == "running"
        sim.now += 600
        sim.stop(j, why)
    assert j.interruptions == 4
    assert j.requeue_at_s == sim.now + 60
    sim.now += 600
    assert sim.place(j, pool, 0, (0,), 8)
    sim.now += 600
    sim.stop(j, "spot")
    assert j.requeue_at_s == sim.now + 120                         # the second PodsReady eviction
