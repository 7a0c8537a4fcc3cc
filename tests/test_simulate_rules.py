"""Issue 22: a benchmark that can say who is better. The baselines obey the rules Fleet obeys (quotas with
cohort borrowing, priorities, budgets) and `violations` measures what any policy broke; `kueue` is Kueue
(ClusterQueues with the teams' borrowing and lending limits, preemption within the ClusterQueue, no
backoff after a preemption) and `kueue-multikueue` dispatches to any worker with quota; an interruption
costs a restart; the Alibaba importer skips pods that never ran and reads their GPU count."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from test_simulate import line, trace  # the same trace lines as the simulator's other tests

from reconciler.catalog import load_catalog
from reconciler.models import TeamsDoc
from reconciler.pipeline import check
from reconciler.plan.quota import QuotaLedger
from reconciler.simulate.alibaba import import_pods
from reconciler.simulate.engine import Engine
from reconciler.simulate.faults import FaultModel, Outage
from reconciler.simulate.policies import make
from reconciler.simulate.remedy import Remedy
from reconciler.simulate.results import result
from reconciler.simulate.rules import inverted, withheld
from reconciler.simulate.trace import Trace, load_trace

from builders import TEAMS, base_files

CATALOG = load_catalog()


def run(tr: Trace, policy: str, days: float, faults: FaultModel | None = None) -> tuple[Engine, dict[str, Any]]:
    sim = Engine(tr, faults or FaultModel.off(), 1, days, 60)
    sim.run(make(policy, sim))
    return sim, result(sim, policy, days, 1).doc


# --- quotas, budgets, violations ------------------------------------------------------------------------------

def test_fifo_and_cheapest_borrow_in_the_cohort_up_to_what_it_lends_and_no_further() -> None:
    """lang's H100 quota is 32, and vision (same cohort, idle) lends its 64: 96 GPUs, six 16-GPU jobs of the
    seven. The old baselines ignored quotas and ran all seven at once (the fleet had room: 160 GPUs)."""
    tr = trace(*(line(f"j{i}", 0, 5, team="lang", count=16, spot="allowed") for i in range(7)))
    for policy in ("fifo", "cheapest"):
        sim, doc = run(tr, policy, days=1)
        started = sorted(j.first_start_s for j in sim.jobs if j.first_start_s is not None)
        assert len(started) == 7 and sum(s < 4 * 3600 for s in started) == 6, (policy, started)
        assert doc["violations"] == {"quota_accelerator_hours": 0.0, "budget_hours": 0.0,
                                     "nominal_withheld_accelerator_hours": 0.0,   # vision wants nothing
                                     "priority_inverted_accelerator_hours": 0.0}  # one class
        assert doc["jobs"]["completed"] == 7


def test_baselines_keep_the_budget_and_violations_show_what_kueue_overspends() -> None:
    """vision may spend 1.5 owned nodes an hour ($60 of $40 nodes): one 8-GPU job at a time for `fifo` and
    `cheapest`; Kueue has no budgets, so it runs both and its `budget_hours` count the team-hours over."""
    files = base_files()
    budget = f"budget_monthly_usd: {730 * 60}"
    files["policies/teams.yaml"] = TEAMS.replace("budget_monthly_usd: 5000000", budget).encode()
    tr = trace(line("a", 0, 2), line("b", 0, 2), files=files)
    for policy in ("fifo", "cheapest"):
        sim, doc = run(tr, policy, days=0.5)
        a, b = sim.by_id["vision/a"], sim.by_id["vision/b"]
        assert a.finish_s is not None and b.first_start_s is not None and b.first_start_s >= a.finish_s, policy
        assert doc["violations"]["budget_hours"] == 0.0
    _, kueue = run(tr, "kueue", days=0.5)
    assert kueue["violations"]["budget_hours"] > 1.0


class Greedy:
    """A test policy that breaks the rules: every waiting job at the first pool with room, quota or not."""

    name = "greedy"

    def step(self, sim: Engine, now_s: int) -> None:
        for j in sim.waiting():
            for p in sim.pools.values():
                if sim.can_use(j, j.options[0], p):
                    n, per = sim.gang(j.options[0], p.rp, j.replicas)
                    units = sim.free_units(p, n, per)
                    if units is not None and sim.place(j, p, 0, units, per):
                        break


def test_violations_count_the_accelerator_hours_over_quota() -> None:
    """vision may hold 64 + lang's 32 = 96 H100s; 13 one-hour 8-GPU jobs placed in gke-usc1 hold 104 from
    their placement (10 minutes of provisioning, quota held as Kueue's QuotaReserved) to their end: 8 GPUs
    over for 70 minutes."""
    tr = trace(*(line(f"j{i:02}", 0, 1, spot="allowed") for i in range(13)))
    sim = Engine(tr, FaultModel.off(), 1, 0.5, 60)
    sim.run(Greedy())
    doc = result(sim, "greedy", 0.5, 1).doc
    assert all(j.cluster == "gke-usc1" for j in sim.jobs)
    assert doc["violations"]["quota_accelerator_hours"] == round(8 * 70 / 60, 2)
    assert doc["accelerator_hours_completed"] == 13 * 8.0
    assert doc["usd_per_kept_accelerator_hour"] == round(doc["cost_usd"] / sim.c.good_acc_h, 2)


def test_nominal_quota_lent_and_not_given_back_when_its_team_needs_it_is_a_violation() -> None:
    """lang borrows vision's idle 64 H100s (six 16-GPU jobs, 5 hours); an hour in, vision submits a 16-GPU job
    within its nominal quota. The policies state `reclaim_within_cohort: any`: vision's nominal is a guarantee.
    `fifo` and `cheapest` never preempt, so vision's job waits for lang's first job to end, 16 GPUs of vision's
    quota withheld for 4 hours; `fleet` reclaims them (a lang job stops at its checkpoint: 30 minutes) and
    `kueue` too (at once). With `reclaim_within_cohort: never` nothing was promised back: no violation."""
    lines = [*(line(f"j{i}", 0, 5, team="lang", count=16, spot="allowed") for i in range(6)),
             line("mine", 60, 1, count=16, spot="allowed")]
    withheld = {}
    for policy in ("fifo", "cheapest", "fleet", "kueue"):
        sim, doc = run(trace(*lines), policy, days=0.5)
        mine = sim.by_id["vision/mine"]
        assert mine.first_start_s is not None, policy
        withheld[policy] = doc["violations"]["nominal_withheld_accelerator_hours"]
        if policy in ("fifo", "cheapest"):
            assert mine.first_start_s >= 5 * 3600, policy
            assert withheld[policy] >= 16 * 4, (policy, withheld)
        else:
            assert mine.first_start_s <= 2 * 3600, policy
            assert withheld[policy] <= 16 * 0.75, (policy, withheld)
    files = base_files()
    files["policies/priorities.yaml"] = files["policies/priorities.yaml"].replace(
        b"reclaim_within_cohort: any", b"reclaim_within_cohort: never")
    _, doc = run(trace(*lines, files=files), "cheapest", days=0.5)
    assert doc["violations"]["nominal_withheld_accelerator_hours"] == 0.0


def test_what_is_withheld_counts_every_lender_that_wants_its_quota_back_at_once() -> None:
    """`c` (nominal 0) borrows 32 of the 64 H100s `a` and `b` lend. Either alone could take its 32 back (the other
    still lends 32): nothing withheld; both at once: 32. Borrowing over what the cohort lends before anyone wants
    it back is `over_quota`'s, not withheld."""
    teams = TeamsDoc.model_validate(yaml.safe_load("""
admins: ["@org/a"]
cohorts: [{name: org}]
teams:
  - {name: a, owners: ["@org/a"], cohort: org, quota: {nvidia-h100-80gb: {nominal: 32}}}
  - {name: b, owners: ["@org/b"], cohort: org, quota: {nvidia-h100-80gb: {nominal: 32}}}
  - {name: c, owners: ["@org/c"], cohort: org, quota: {nvidia-h100-80gb: {nominal: 0}}}
"""))
    h100 = "nvidia-h100-80gb"
    led = QuotaLedger(teams)
    led.add("c", h100, 32)

    def waiting(team: str, count: int = 32) -> Any:
        return SimpleNamespace(team=team, spot="", replicas=1,
                               options=(SimpleNamespace(accelerator=h100, count=count),))

    assert withheld(led, [waiting("a")]) == withheld(led, [waiting("b")]) == 0
    assert withheld(led, [waiting("a"), waiting("b")]) == 32
    assert withheld(led, [waiting("a"), waiting("b", 8)]) == 8
    assert withheld(led, [waiting("a", 40), waiting("c", 8)]) == 0    # over a's nominal; c has none
    led.add("c", h100, 40)          # 72 borrowed of 64 lent: 8 over quota already
    assert withheld(led, [waiting("a")]) == 32


def test_a_teams_lower_class_holding_the_quota_its_higher_class_waits_for_is_a_violation() -> None:
    """vision may use 64 H100s and borrow none. Four research jobs of 16 GPUs run 5 hours; an hour in, vision's
    production job of 16 arrives. The policies state `within_team: lower_priority` (Kueue's `withinClusterQueue:
    LowerPriority`): it preempts its own research work. `fifo` and `cheapest` never preempt, so it waits 4 hours
    with 16 GPUs of its team's quota held by lower work: a violation of the priority rule (64 accelerator-hours);
    `fleet` preempts one at its checkpoint (30 minutes) and `kueue` at once. With `within_team: never`
    nothing was promised: no violation."""
    files = base_files()
    files["policies/teams.yaml"] = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}",
                                                 "nvidia-h100-80gb: {nominal: 64, borrowing_limit: 0}").encode()
    lines = [*(line(f"low{i}", 0, 5, count=16, spot="allowed") for i in range(4)),
             line("prod", 60, 1, count=16, spot="allowed", priority="production")]
    got = {}
    for policy in ("fifo", "cheapest", "fleet", "kueue"):
        sim, doc = run(trace(*lines, files=files), policy, days=0.5)
        prod = sim.by_id["vision/prod"]
        assert prod.first_start_s is not None, policy
        got[policy] = doc["violations"]["priority_inverted_accelerator_hours"]
        if policy in ("fifo", "cheapest"):
            assert prod.first_start_s >= 5 * 3600 and got[policy] >= 16 * 3.9, (policy, got)
        else:
            assert prod.first_start_s <= 2 * 3600 and got[policy] <= 16 * 0.75, (policy, got)
    files["policies/priorities.yaml"] = files["policies/priorities.yaml"].replace(
        b"within_team: lower_priority", b"within_team: never")
    _, doc = run(trace(*lines, files=files), "cheapest", days=0.5)
    assert doc["violations"]["priority_inverted_accelerator_hours"] == 0.0


def test_what_is_inverted_counts_what_the_teams_own_lower_work_holds_of_a_higher_jobs_shortfall() -> None:
    """Team a may use 32 H100s and borrow none (its cohort-mate lends nothing). Its research work (value 100)
    holds 24 and its opportunistic work (10) 8. A waiting production job (1000) of 16 lacks 16: the lower work
    holds all of it, 16 inverted. A second production job of 16 lacks 16 too, but only 16 of lower work is left
    unclaimed: 32 in all; a third finds none left. A research job lacks 16 and only the opportunistic 8 is lower
    than it: nothing. Work that is not preemptible is not counted (`change` gets no value for it)."""
    teams = TeamsDoc.model_validate(yaml.safe_load("""
admins: ["@org/a"]
cohorts: [{name: org}]
teams:
  - {name: a, owners: ["@org/a"], cohort: org, quota: {nvidia-h100-80gb: {nominal: 32, borrowing_limit: 0}}}
  - {name: b, owners: ["@org/b"], cohort: org, quota: {nvidia-h100-80gb: {nominal: 0}}}
"""))
    h100 = "nvidia-h100-80gb"
    led = QuotaLedger(teams)
    led.add("a", h100, 32)
    low = {("a", h100): {100: 24, 10: 8}}

    def waiting(value: int, count: int = 16) -> Any:
        return SimpleNamespace(team="a", spot="", replicas=1, value=value,
                               options=(SimpleNamespace(accelerator=h100, count=count),))

    assert inverted(led, low, [waiting(1000)]) == 16
    assert inverted(led, low, [waiting(1000), waiting(1000)]) == 32
    assert inverted(led, low, [waiting(1000), waiting(1000), waiting(1000)]) == 32
    assert inverted(led, low, [waiting(100)]) == 0
    assert inverted(led, low, [waiting(100), waiting(1000)]) == 16          # higher classes first
    assert inverted(led, {("a", h100): {100: 8}}, [waiting(1000)]) == 0    # the lower work holds 8 of the 16



def test_the_priority_row_counts_only_what_preempting_the_teams_lower_work_could_start() -> None:
    """vision may use 16 H100s and borrow none; the fleet is onprem-sjc's four 8-GPU nodes. Its three research
    jobs of 4 GPUs run on nodes 1-3, lang's 4-GPU jobs beside them; its production job of 8 (a whole node) waits:
    it lacks 4 of its quota and the research work holds 12, so the quota rule alone counts 4 (as before
    2026-12-06). But with lang's work on every node, stopping the research frees no whole node: preempting could not
    start it, and the row counts nothing. With lang on node 0 only it could (4). With the team's budget pace below
    the node's $40 an hour, even with the research's spend freed, it could not (0)."""
    def engine(lang_nodes: tuple[int, ...], budget: int = 5000000) -> tuple[Engine, Any]:
        files = base_files()
        files["policies/teams.yaml"] = TEAMS.replace(
            "nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 16, borrowing_limit: 0}").replace(
            "budget_monthly_usd: 5000000", f"budget_monthly_usd: {budget}").encode()
        del files["fleet/clusters/gke-usc1.yaml"]
        lines = [line("prod", 0, 5, count=8, priority="production"),
                 *(line(f"low{n}", 0, 5, count=4, priority="research") for n in (1, 2, 3)),
                 *(line(f"l{n}", 0, 5, team="lang", count=4, priority="research") for n in lang_nodes)]
        sim = Engine(trace(*lines, files=files), FaultModel.off(), 1, 0.5, 60)
        owned = next(p for c in sim.clusters.values() for p in c.pools if p.key == "onprem-sjc/h100-owned")
        for j in sim.jobs:
            j.state = "waiting"
            sim.active[j.id] = j
        for n in (1, 2, 3):
            assert sim.place(sim.by_id[f"vision/low{n}"], owned, 0, (n,), 4)
        for n in lang_nodes:
            assert sim.place(sim.by_id[f"lang/l{n}"], owned, 0, (n,), 4)
        return sim, sim.by_id["vision/prod"]

    for lang_nodes, budget, want in (((0, 1, 2, 3), 5000000, 0), ((0,), 5000000, 4), ((0,), 20000, 0)):
        sim, prod = engine(lang_nodes, budget)
        w = sim.watch
        assert inverted(w.ledger, w.low, [prod]) == 4                 # the quota rule alone
        assert inverted(w.ledger, w.low, [prod], Remedy(sim).could) == want, (lang_nodes, budget)


def test_the_priority_row_frees_for_a_job_only_the_spend_of_work_the_rules_would_stop_for_it() -> None:
    """As above with lang on node 0 only, and vision's research also running a v5p slice in gke-usc1 (its H100
    pools removed). The production job lacks 4 H100s of quota and a node; stopping the H100 research gives it
    both and frees $60 an hour. No rule stops the v5p slice for it: it frees neither the H100 quota nor room on
    the node (a budget never evicts). With the team's pace $20 an hour above the slice's price, the node ($40)
    is paid only if the slice's spend is freed too: the row counts nothing (it counted 4 before). $60 above, it
    is paid with the H100 research's spend alone: 4."""
    files = base_files()
    files["policies/teams.yaml"] = TEAMS.replace(
        "nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 16, borrowing_limit: 0}").encode()
    gke = yaml.safe_load(files["fleet/clusters/gke-usc1.yaml"])
    gke["pools"] = [p for p in gke["pools"] if p["accelerator"] == "tpu-v5p"]
    files["fleet/clusters/gke-usc1.yaml"] = yaml.safe_dump(gke).encode()
    tpu = {"options": [{"accelerator": "tpu-v5p", "topology": "4x4x4"}], "priority": "research"}
    lines = [line("prod", 0, 5, count=8, priority="production"), line("lang0", 0, 5, team="lang", count=4),
             *(line(f"low{n}", 0, 5, count=4, priority="research") for n in (1, 2, 3)), line("slice", 0, 5, **tpu)]
    for above, want in ((20.0, 0), (60.0, 4)):
        sim = Engine(trace(*lines, files=files), FaultModel.off(), 1, 0.5, 60)
        pools = {p.key: p for c in sim.clusters.values() for p in c.pools}
        owned, v5p = pools["onprem-sjc/h100-owned"], pools["gke-usc1/v5p-4x4x4"]
        for j in sim.jobs:
            j.state = "waiting"
            sim.active[j.id] = j
        assert sim.place(sim.by_id["lang/lang0"], owned, 0, (0,), 4)
        for n in (1, 2, 3):
            assert sim.place(sim.by_id[f"vision/low{n}"], owned, 0, (n,), 4)
        before = sim.watch.spend["vision"]
        assert sim.place(sim.by_id["vision/slice"], v5p, 0, (0,), v5p.rp.unit_accelerators)
        slice_usd = sim.watch.spend["vision"] - before
        assert before == 60.0 and slice_usd > 0
        sim.watch.budget["vision"] = slice_usd + above       # the team's hourly pace
        w, prod = sim.watch, sim.by_id["vision/prod"]
        assert inverted(w.ledger, w.low, [prod]) == 4
        assert inverted(w.ledger, w.low, [prod], Remedy(sim).could) == want, above


# --- Kueue -------------------------------------------------------------------------------------------------------

def test_kueue_borrows_in_its_cluster_cohort_so_a_job_over_its_cluster_nominal_runs() -> None:
    """vision's ClusterQueue in gke-usc1 has 51 of its 64 H100s, lang's 26; a 56-GPU job borrows 5 of lang's
    (vision's borrowing limit: 16). The old model rendered borrowing_limit 0 (what an empty plan borrows):
    the job never ran."""
    files = base_files()
    files["policies/teams.yaml"] = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}",
                                                 "nvidia-h100-80gb: {nominal: 64, borrowing_limit: 16}").encode()
    _, doc = run(trace(line("big", 0, 2, count=56), files=files), "kueue", days=0.5)
    assert doc["jobs"]["completed"] == 1


def test_kueue_preempts_lower_priority_work_of_the_clusterqueue_and_requeues_it_without_backoff() -> None:
    tr = trace(line("low", 0, 10, count=48, priority="research"), line("high", 60, 1, count=48, priority="production"))
    sim, doc = run(tr, "kueue", days=1)
    low, high = sim.by_id["vision/low"], sim.by_id["vision/high"]
    assert doc["preemptions"] == 1 and low.interruptions == 1
    assert high.first_start_s is not None and high.first_start_s < 2 * 3600
    assert low.requeue_at_s == 0                   # Kueue's backoff is for PodsReady timeouts, not preemption
    assert low.state == "done"


def test_multikueue_dispatches_to_a_worker_with_quota_where_kueue_waits_on_its_cluster() -> None:
    """X1 and X2 take 72 of the 77 H100s vision may use in gke-usc1; Y (16) is created there under `kueue`
    and waits for them (the spot pool has the nodes, the ClusterQueue not the quota); MultiKueue's manager
    has quota (88 of 96) and onprem-sjc's worker admits it (13 + 6 lent)."""
    tr = trace(line("x1", 0, 5, count=56), line("x2", 0, 5, count=16, spot="required"),
               line("y", 30, 1, count=16, spot="allowed"))
    k, _ = run(tr, "kueue", days=1)
    m, _ = run(tr, "kueue-multikueue", days=1)
    assert k.by_id["vision/y"].first_start_s is not None and k.by_id["vision/y"].first_start_s > 5 * 3600
    y = m.by_id["vision/y"]
    assert y.first_start_s == 30 * 60 and y.cluster == "onprem-sjc"


def test_kueue_spreads_workloads_over_the_clusters_by_the_teams_quota_there_and_multikueue_races_its_workers() -> None:
    """Twelve 8-GPU jobs of vision, which has H100 quota in gke-usc1 (51) and onprem-sjc (13). `kueue` creates
    each in a cluster drawn by that quota; before the forty-second session every one went to the cluster with
    the most (gke-usc1), and onprem-sjc's owned nodes idled. MultiKueue's workers race for each copy; before,
    gke-usc1 won every race by name. Both reproducible from the seed (review finding)."""
    tr = trace(*(line(f"j{i:02d}", 0, 1, count=8) for i in range(12)))
    for policy in ("kueue", "kueue-multikueue"):
        sim, doc = run(tr, policy, days=0.5)
        where = [sim.by_id[f"vision/j{i:02d}"].cluster for i in range(12)]
        assert doc["jobs"]["completed"] == 12 and set(where) == {"gke-usc1", "onprem-sjc"}, (policy, where)
        again, _ = run(tr, policy, days=0.5)
        assert [again.by_id[f"vision/j{i:02d}"].cluster for i in range(12)] == where


# --- restart cost ------------------------------------------------------------------------------------------------

def test_a_job_s_own_restart_minutes_are_counted_as_lost_work_after_each_interruption() -> None:
    tr = trace(line("a", 0, 2, restart_minutes=30))
    sim, doc = run(tr, "cheapest", days=1, faults=FaultModel.off((Outage("onprem-sjc", 0.75, 1.0),)))
    assert sim.c.lost_by == {"outage": 2.0, "restart": 8 * 30 / 60}
    assert doc["lost_accelerator_hours"] == 2.0 + 4.0
    j = sim.jobs[0]
    assert j.finish_s is not None and j.finish_s - j.first_start_s >= (2 + 0.25 + 0.5) * 3600   # redone + restart
    bad = load_trace("t.jsonl", (line("a", 0, 2, restart_minutes=-1) + "\n").encode(), base_files(), CATALOG)
    assert isinstance(bad, list) and bad[0].line == 1 and bad[0].field == "restart_minutes"


def test_a_restarted_job_checkpoints_on_its_runs_clock_as_the_planner_reckons_warm_up_included() -> None:
    """`checkpoint_minutes: 30` counts running time from the start of the run (checkpoint.py, what the planner
    and the reconcile loop reckon a victim's next checkpoint by). A run after an interruption spends its
    10-minute restart first; stopped 61 minutes into that run it loses 1 minute of work since its checkpoint
    at 60, not 21 (the simulator counted checkpoints from the end of the warm-up, so a victim the loop stopped
    at what it saw as a checkpoint lost 20 minutes)."""
    tr = trace(line("a", 0, 3, restart_minutes=10))
    first = Outage("onprem-sjc", 0.75, 1.0)
    sim, _ = run(tr, "cheapest", days=1, faults=FaultModel.off((first,)))
    j = sim.jobs[0]
    assert j.interruptions == 1 and sim.c.lost_by["outage"] == 8 * 15 / 60
    second = Outage(j.cluster, (j.run_start_s + 61 * 60) / 3600, 0.5)     # 61 minutes into the restarted run
    sim, _ = run(tr, "cheapest", days=1, faults=FaultModel.off((first, second)))
    assert sim.jobs[0].interruptions == 2
    assert abs(sim.c.lost_by["outage"] - 8 * (15 + 1) / 60) < 1e-9, sim.c.lost_by
    assert sim.c.lost_by["restart"] == 2 * 8 * 10 / 60     # each restarted run's warm-up


# --- the Alibaba importer ----------------------------------------------------------------------------------------

# the header and rows as cluster-trace-gpu-v2023/csv/openb_pod_list_default.csv has them (rows 0017, 0061,
# 0128 verbatim; two multi-GPU rows shaped like them)
POD_LIST = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0017,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497
openb-pod-0061,11908,47104,1,1000,,BE,Pending,10001278,10001403,
openb-pod-0128,88000,327680,8,1000,,Burstable,Failed,10034615,10035454,10034615
openb-pod-9001,24000,65536,2,1000,,Burstable,Succeeded,10040000,10047200,10040100
openb-pod-9002,48000,131072,4,1000,,Burstable,Running,10050000,10053600,10050000
"""


def test_alibaba_skips_pods_that_never_ran_and_reads_each_pod_s_gpu_count() -> None:
    got = import_pods("openb_pod_list_default.csv", POD_LIST, check(base_files(), CATALOG))
    assert got.problems == [] and got.skipped["never_ran"] == 1
    docs = [json.loads(x) for x in got.lines]
    assert [(d["name"], d["options"][0]["count"]) for d in docs] == [
        ("openb-pod-0017", 8), ("openb-pod-0128", 8), ("openb-pod-9001", 2), ("openb-pod-9002", 4)]
    assert docs[2]["actual_hours"] == round((10047200 - 10040100) / 3600, 4)      # from scheduling, not creation


def test_the_command_line_takes_restart_minutes_and_lists_kueue_multikueue(tmp_path: Path) -> None:
    from reconciler.simulate.run import cli_run

    (tmp_path / "t.jsonl").write_text(line("a", 0, 2) + "\n")

    def once(restart: float | None, policies: str = "cheapest") -> Any:
        return json.loads(cli_run(base_files(), CATALOG, trace_file=tmp_path / "t.jsonl", days=1, policies=policies,
                                  seed=1, fmt="json", out=None, outages=("onprem-sjc@0.75+1",), no_faults=True,
                                  spot_reclaims_per_hour=None, interval_seconds=60, generate_n=None, load=0.9,
                                  alibaba=None, write=lambda p, t: None, warn=lambda m: None,
                                  restart_minutes=restart))

    assert once(0)["lost_accelerator_hours"] == 2.0
    assert once(None)["lost_accelerator_hours"] == round(2.0 + 8 * 10 / 60, 2)
    assert once(60)["lost_accelerator_hours"] == 2.0 + 8.0
    assert [d["policy"] for d in once(None, "kueue,kueue-multikueue")] == ["kueue", "kueue-multikueue"]


def test_kueue_s_cluster_queues_hold_a_spot_quota_in_the_clusters_with_spot_pools() -> None:
    """The `kueue` baseline's ClusterQueues are render's: with `spot: 16` in vision's H100 quota, gke-usc1 (the one
    cluster with an H100 spot pool) holds all 16 for vision's spot-only work, apart from nominal, and the
    on-prem cluster none; the nominal parts still add up to 64."""
    from reconciler.simulate.kueue import cluster_teams

    files = base_files()
    files["policies/teams.yaml"] = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}",
                                                 "nvidia-h100-80gb: {nominal: 64, spot: 16}").encode()
    v = check(files, CATALOG)
    per = cluster_teams(v)
    vision = {c: next(t for t in doc.teams if t.name == "vision").quota["nvidia-h100-80gb"] for c, doc in per.items()}
    assert {c: q.spot for c, q in vision.items()} == {"gke-usc1": 16, "onprem-sjc": 0}
    assert sum(q.nominal for q in vision.values()) == 64
    lang = next(t for t in per["gke-usc1"].teams if t.name == "lang").quota["nvidia-h100-80gb"]
    assert lang.spot is None


# --- the simulated clusters: the same scale-down for every policy --------------------------------------------

def _tpu(name: str, hours: float) -> str:
    return json.dumps({"name": name, "team": "vision", "options": [{"accelerator": "tpu-v5p", "topology": "4x4x4"}],
                       "duration_hours": hours, "checkpoint_minutes": 30, "image": "img:1", "submit_at_minutes": 0})


def _releases(policy: str, tr: Trace, pool_key: str, days: float) -> tuple[Engine, list[tuple[int, float]]]:
    """The run, and each unit of the pool released (not taken by a fault or reclaim): (unit, minutes idle)."""
    sim = Engine(tr, FaultModel.off(), 1, days, 60)
    pool = sim.pools[pool_key]
    released: list[tuple[int, float]] = []
    set_state = sim._set

    def watch(p: Any, i: int, state: str, until_s: int = 0) -> None:
        if p is pool and state == "absent":
            released.append((i, (sim.now - p.units[i].idle_since_s) / 60))
        set_state(p, i, state, until_s)

    sim._set = watch                                      # type: ignore[method-assign]
    sim.run(make(policy, sim))
    return sim, released


def test_every_policy_releases_a_unit_only_after_it_was_idle_for_the_scale_down_window() -> None:
    """Two on-demand slices, freed 24 minutes apart. `fleet`'s loop asks for one unit fewer once the first has
    been idle 30 minutes (reconcile.scale_down_after_minutes), and the simulated actuator released the idle
    unit of highest index instead, the one freed 6 minutes before: `fleet`'s pools shrank sooner than the
    baselines' (whose engine releases a unit only after its 30 idle minutes), and a unit it needed again was
    gone. Each unit is now released after its window, as the decision reckons, under every policy."""
    tr = trace(_tpu("a", 1), _tpu("b", 1.4))
    for policy in ("cheapest", "fleet"):
        sim, released = _releases(policy, tr, "gke-usc1/v5p-4x4x4", 0.5)
        assert [j.state for j in sim.jobs] == ["done", "done"], policy
        assert len(released) == 2 and all(idle >= 30 for _, idle in released), (policy, released)


def test_fleets_resize_provisions_the_units_its_plan_places_the_job_on() -> None:
    """The plan puts `a` on slice 2 of an empty pool (0 and 1 absent too) and the loop asks for one slice: the
    simulated actuator provisioned slice 0, the lowest absent, so `a` could not start where the plan put it
    and slice 0 idled until it was released again. On a real pool any new node serves the job; here the one the
    plan names. (The benchmark's traces are unchanged by it: there the plan names the lowest absent units.)"""
    from reconciler.plan.types import Placement, Plan
    from reconciler.reconcile.model import Action
    from reconciler.simulate.cluster import ABSENT
    from reconciler.simulate.loop import SimActuator

    sim = Engine(trace(_tpu("a", 1)), FaultModel.off(), 1, 0.5, 60)
    pool = sim.pools["gke-usc1/v5p-4x4x4"]
    assert all(u.state == ABSENT for u in pool.units)
    plan = Plan((Placement("vision/a", "gke-usc1", "v5p-4x4x4", 0, (2,), 64, "new", 1.0),), (), (), (), (), None)
    grow = Action(kind="resize", cluster="gke-usc1", pool="v5p-4x4x4", reason="a", target=1, current=0)
    assert SimActuator(sim, plan).resize("gke-usc1", [grow]).ok
    assert [i for i, u in enumerate(pool.units) if u.state != ABSENT] == [2]
    grow = Action(kind="resize", cluster="gke-usc1", pool="v5p-4x4x4", reason="a", target=2, current=1)
    assert SimActuator(sim, plan).resize("gke-usc1", [grow]).ok     # then the lowest absent
    assert [i for i, u in enumerate(pool.units) if u.state != ABSENT] == [0, 2]


def _ready_sim(*lines: str) -> Engine:
    """An engine whose pools hold their `min` units, ready, and whose jobs wait (as at their arrival)."""
    sim = Engine(trace(*lines), FaultModel.off(), 1, 0.5, 60)
    for p in sim.pools.values():
        for i in range(p.rp.min):
            sim._provision(p, i, instant=True)
    for j in sim.jobs:
        j.state = "waiting"
    return sim


def test_a_gpu_start_on_a_node_the_plan_thinks_free_binds_to_another_node_with_room() -> None:
    """The plan's GPU unit numbers are bookkeeping (it renumbers the used nodes), and the render selects a pool's
    nodes, never one node. The simulated actuator failed a start whose named node had no room ("failed or
    taken"), and with it every later action on the cluster that cycle, each cycle while the numbers disagreed
    (seed 3 of the generated benchmark: 15 hours from hour 384.7, two clusters held back). The kube-scheduler
    binds the pods to nodes with room: the fullest that fits first, the named node where it fits. A TPU
    slice is a place: a taken one still fails."""
    from reconciler.plan.types import Placement, Plan
    from reconciler.reconcile.model import Action
    from reconciler.simulate.loop import SimActuator

    sim = _ready_sim(line("a", 0, 1, count=4), line("b", 0, 1, count=8), line("c", 0, 1, count=4),
                     line("d", 0, 1, count=2), _tpu("t", 1), _tpu("u", 1))
    pool, by = sim.pools["onprem-sjc/h100-owned"], sim.by_id
    assert sim.place(by["vision/a"], pool, 0, (0,), 4)                  # node 0: 4 of 8 GPUs taken

    def start(job: str, key: str, units: tuple[int, ...], per_unit: int) -> bool:
        cluster, name = key.split("/")
        plan = Plan((Placement(job, cluster, name, 0, units, per_unit, "new", 1.0),), (), (), (), (), None)
        return SimActuator(sim, plan).start(Action(kind="start", cluster=cluster, pool=name, job=job, reason="r",
                                                   units=units)).ok

    assert start("vision/b", pool.key, (0,), 8)         # node 0 has 4 free: b takes a whole node that is free
    assert by["vision/b"].units == (1,) and pool.units[0].used == 4
    assert start("vision/c", pool.key, (1,), 4)         # node 1 is b's: c shares node 0 with a, the fullest
    assert by["vision/c"].units == (0,) and pool.units[0].used == 8
    assert start("vision/d", pool.key, (3,), 2)         # the named node has room: it stays the plan's
    assert by["vision/d"].units == (3,)
    tpu = sim.pools["gke-usc1/v5p-4x4x4"]
    assert start("vision/t", tpu.key, (0,), 64)
    assert not start("vision/u", tpu.key, (0,), 64)     # slice 0 is t's: a slice is a place
    assert by["vision/u"].state == "waiting"


def test_a_service_whose_replicas_share_a_node_in_the_plan_and_not_in_the_simulation_is_not_relabelled() -> None:
    """A service's replicas bound to nodes 0 and 1 (its named node 0 had room for one), while the plan keeps both
    on node 0: the node relabelling paired the nodes one for one and raised (zip of unequal lengths). Replicas
    sharing a node on either side are not relabelled: the service stays where it runs."""
    from reconciler.plan.types import Placement, Plan
    from reconciler.simulate.loop import SimActuator

    sim = _ready_sim(line("a", 0, 1, count=4),
                     line("s", 0, 4, count=4, kind="inference", replicas=2, checkpoint_minutes=0))
    pool, by = sim.pools["onprem-sjc/h100-owned"], sim.by_id
    assert sim.place(by["vision/a"], pool, 0, (0,), 4) and sim.place(by["vision/s"], pool, 0, (0, 1), 4)
    plan = Plan((Placement("vision/s", "onprem-sjc", "h100-owned", 0, (0, 0), 4, "kept", 1.0),), (), (), (), (), None)
    SimActuator(sim, plan)
    assert by["vision/s"].units == (0, 1) and [u.used for u in pool.units[:2]] == [8, 4]


def test_a_stop_of_one_group_of_a_spread_service_leaves_it_serving_on_the_plans_other_groups() -> None:
    """A service spread over gke-usc1/h100 and onprem-sjc/h100-owned; the plan keeps it on gke-usc1 only and the
    loop stops its onprem-sjc group. The simulated actuator stopped a job only where its first group ran, so
    this stop did nothing and said done: the plan counted the group's 4 GPUs of quota free while they ran,
    and a start took the cohort over quota (generated seed 2, hour 681). It now serves on the plan's groups."""
    from reconciler.plan.types import Placement, Plan
    from reconciler.reconcile.model import Action
    from reconciler.simulate.loop import SimActuator
    from reconciler.simulate.state import Group

    sim = _ready_sim(line("s", 0, 4, count=4, kind="inference", replicas=1, checkpoint_minutes=0))
    gke, onprem, s = sim.pools["gke-usc1/h100"], sim.pools["onprem-sjc/h100-owned"], sim.by_id["vision/s"]
    sim._provision(gke, 0, instant=True)
    assert sim.place(s, gke, 0, (0,), 4, (Group(onprem, (0,), 4, "nvidia-h100-80gb"),))
    usage = sim.watch.ledger.usage
    assert usage[("vision", "nvidia-h100-80gb")] == 8
    plan = Plan((Placement("vision/s", "gke-usc1", "h100", 0, (0,), 4, "kept", 1.0),), (), (), (), (), None)
    stop = Action(kind="stop", cluster="onprem-sjc", job="vision/s", service=True, from_cluster="onprem-sjc",
                  from_pool="h100-owned", reason="its replicas leave onprem-sjc/h100-owned")
    assert SimActuator(sim, plan).stop(stop).ok
    assert [(g.pool.key, g.units) for g in s.groups()] == [("gke-usc1/h100", (0,))]
    assert onprem.units[0].used == 0 and usage[("vision", "nvidia-h100-80gb")] == 4


def test_kueue_orders_a_workload_requeued_after_a_pods_ready_eviction_by_the_eviction_s_time() -> None:
    """vision alone on gke-usc1 with 16 H100s of quota: `c` and `a` run, `b` (created after `a`) waits; `a`'s node
    fails at 1,810 s. Kueue orders a workload evicted for its PodsReady timeout by that eviction's time
    (`GetQueueOrderTimestamp`, requeuingStrategy.timestamp: Eviction, the default): `b` is admitted first. Before
    the forty-second session `a` kept its creation time and went first, and `b` waited for `c` (review finding)."""
    files = base_files()
    files["policies/teams.yaml"] = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}",
                                                 "nvidia-h100-80gb: {nominal: 16, borrowing_limit: 0}").encode()
    del files["fleet/clusters/onprem-sjc.yaml"]
    tr = trace(*(line(n, i, 6, count=8, spot="never") for i, n in enumerate(("c", "a", "b"))), files=files)
    sim = Engine(tr, FaultModel.off(), 1, 1, 300)
    policy = make("kueue", sim)
    a, b, step = sim.by_id["vision/a"], sim.by_id["vision/b"], policy.step

    def fail_a(s: Engine, now_s: int) -> None:
        step(s, now_s)
        if now_s == 300 and a.pool is not None:
            s.schedule_fault(1810, a.pool.key, a.units[0])

    policy.step = fail_a    # type: ignore[method-assign]
    sim.run(policy)
    assert a.interruptions == 1 and b.first_start_s is not None and a.finish_s is not None
    assert b.first_start_s < 3600 < a.finish_s - 6 * 3600, (b.first_start_s, a.finish_s)
