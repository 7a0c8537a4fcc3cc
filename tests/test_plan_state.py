"""Unit tests of the planner's state types and steps (reconciler/plan/state.py and the step modules), built
with the small builders of tests/builders.py rather than only through whole-fleet YAML."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan import place, plan
from reconciler.plan.capacity import PoolState, gang_for
from reconciler.plan.explain import explain
from reconciler.plan.greedy import run
from reconciler.plan.improve import AsOf, kicks, plan_key
from reconciler.plan.moves import compact, compact_usd, eject_and_insert, relocate
from reconciler.plan.place import place_at, try_place
from reconciler.plan.planner import plan_with_state
from reconciler.plan.preempt import try_preempt
from reconciler.plan.quota import QuotaLedger
from reconciler.plan.state import JobInfo, PlanState, Strategy, split, work
from reconciler.plan.sticky import keep_base
from reconciler.plan.types import Plan, Reservation, nano

from builders import GKE, ONPREM, gpu_option, job, resolved_pool, teams_doc, with_files

CAT = load_catalog()


def state(jobs: dict[str, str], base: Plan | None = None, changes: dict[str, str | None] | None = None) -> PlanState:
    files: dict[str, str | bytes | None] = {"jobs/vision/train.yaml": None}
    files.update({f"jobs/{k}.yaml": v for k, v in jobs.items()})
    files.update(changes or {})
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    return PlanState(v, base)


def snapshot(st: PlanState) -> tuple[object, ...]:
    """Everything a step may change, in a comparable form (order of the live placements included)."""
    return (tuple((j, lv.pool.pool.key, lv.units, lv.kept, lv.reason) for j, lv in st.live.items()),
            tuple((k, ps.target, tuple(ps.free_acc), ps.whole_free, ps.max_free) for k, ps in sorted(st.pools.items())),
            tuple(sorted((k, n) for k, n in st.quota.usage.items() if n)),
            tuple(sorted((k, x) for k, x in st.team_hourly.items() if x)),
            tuple(sorted((k, tuple(sorted(x))) for k, x in st.kept_by_pool.items() if x)),
            tuple(sorted(st.no_room, key=repr)))


# -- PoolState ---------------------------------------------------------------------------------------------

def test_pool_state_opens_min_units_best_fit_and_release() -> None:
    ps = PoolState(resolved_pool(mn=2, mx=3), 80.0)
    assert (ps.target, ps.whole_free, ps.max_free) == (2, 2, 8)
    g6, g4 = gang_for(gpu_option(6), ps.pool), gang_for(gpu_option(4), ps.pool)
    assert ps.find(g6, 1, dry_run=False) == (0,)
    assert ps.find(g4, 1, dry_run=False) == (1,)           # 2 free on unit 0 is too little
    assert ps.find(gang_for(gpu_option(2), ps.pool), 1) == (0,)   # best fit: the unit with the least room
    assert (ps.whole_free, ps.max_free) == (0, 4)
    assert ps.find(g6, 2) is None                            # one more unit to open, two needed
    ps.release((0,), g6)
    assert (ps.whole_free, ps.max_free) == (1, 8)
    assert ps.final_target() == 2                            # min
    assert ps.find(g6, 2, dry_run=False) == (0, 2)
    assert ps.target == 3 and ps.is_full() is False and ps.used_units() == 3


def test_pool_state_take_refuses_used_or_missing_units_and_trim_undoes_opening() -> None:
    roomy: set[PoolState] = set()
    ps = PoolState(resolved_pool(mx=4), 80.0, roomy)
    whole = gang_for(gpu_option(16), ps.pool)
    assert whole.whole_units == 2
    assert ps.take((1, 2), whole) and ps.target == 3 and ps.free_acc == [8, 0, 0]
    assert not ps.take((2, 3), whole)                        # unit 2 is taken
    assert not ps.take((4,), whole)                          # beyond max
    assert ps in roomy                                       # unit 0 was opened on the way, and is free
    ps.release((1, 2), whole)
    ps.trim(0)
    assert ps.target == 0 and ps not in roomy
    ps.open_to(2)
    assert ps.target == 2 and ps.whole_free == 2


# -- QuotaLedger -------------------------------------------------------------------------------------------

LEDGER_TEAMS = teams_doc(
    [{"name": "a", "cohort": "leaf", "quota": {"gpu": {"nominal": 8, "borrowing_limit": 4}}},
     {"name": "b", "cohort": "root", "quota": {"gpu": {"nominal": 8, "lending_limit": 6}}},
     {"name": "solo", "quota": {"gpu": {"nominal": 8}}}],
    [{"name": "root"}, {"name": "leaf", "parent": "root"}])


def test_quota_ledger_domains_are_cohort_roots() -> None:
    assert LEDGER_TEAMS.domains() == {"a": "root", "b": "root", "solo": None}
    assert QuotaLedger(LEDGER_TEAMS).domain == LEDGER_TEAMS.domains()


def test_quota_ledger_borrowing_and_lending_limits() -> None:
    q = QuotaLedger(LEDGER_TEAMS)
    assert q.shortfall("a", "gpu", 8) == 0 and q.needs_borrow("a", "gpu", 9)
    assert q.shortfall("a", "gpu", 8 + 5) == 1               # borrowing limit 4
    assert q.shortfall("a", "gpu", 12, allow_borrow=False) == 4
    q.add("a", "gpu", 12)
    assert q.is_borrowing("a", "gpu") and q.borrowers("b", "gpu") == [("a", 4)]
    assert q.available_to_borrow("a", "gpu") == 2            # b lends at most 6
    # b's nominal use is refused where a borrows what b lends: 8 - 4 lent = 4 left without reclaim
    assert q.shortfall("b", "gpu", 4) == 0 and q.shortfall("b", "gpu", 6) == 2
    assert "lent to cohort-mates (a borrows 4)" in q.why_short("b", "gpu", 6)
    q.remove("a", "gpu", 12)
    assert q.shortfall("b", "gpu", 8) == 0 and q.usage[("a", "gpu")] == 0
    assert q.shortfall("solo", "gpu", 9) == 1 and "in no cohort" in q.why_short("solo", "gpu", 9)


# -- PlanState ---------------------------------------------------------------------------------------------

def test_commit_evict_and_put_back_keep_the_ledgers_together() -> None:
    st = state({"vision/a": job("a", body="priority: production\n"), "lang/b": job("b", team="lang")})
    before = snapshot(st)
    a, b = st.jobs["vision/a"], st.jobs["lang/b"]
    assert work(a) == 1
    assert try_place(st, a, allow_borrow=True) and try_place(st, b, allow_borrow=True)
    lv = st.live["vision/a"]
    assert st.quota.usage[("vision", "nvidia-h100-80gb")] == 1 and st.usage["vision"]["nvidia-h100-80gb"] == 1
    assert st.team_hourly["vision"] == nano(lv.hourly_usd) > 0     # whole nano-dollars (tests/test_budget_total.py)
    assert st.budget_room("vision") < st.budget_room("vision", lv.hourly_usd)
    out = st.evict("vision/a")
    assert st.quota.usage[("vision", "nvidia-h100-80gb")] == 0 and st.team_hourly["vision"] == 0
    st.put_back(out)
    assert st.live["vision/a"].units == out.units
    st.evict("vision/a")
    st.evict("lang/b")
    for ps in st.pools.values():
        ps.trim(0)
    assert snapshot(st)[1:4] == before[1:4]


def test_fork_is_independent() -> None:
    st = state({"vision/a": job("a")})
    run(st)
    copy = st.fork()
    copy.evict("vision/a")
    assert "vision/a" in st.live and st.quota.usage[("vision", "nvidia-h100-80gb")] == 1
    assert copy.fleet is st.fleet


def test_a_failed_search_is_remembered_until_something_is_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    # vision's 64 H100s of nominal quota are a's; b's 48 more would borrow 48 where lang lends 32: b waits on
    # quota. Placing nothing but taking room and quota, a second try needs no search; evicting a frees it.
    st = state({"vision/a": job("a", count=64), "vision/b": job("b", count=48)})
    a, b = st.jobs["vision/a"], st.jobs["vision/b"]
    assert try_place(st, a, allow_borrow=True)
    searches: list[str] = []
    search = place._search
    monkeypatch.setattr(place, "_search", lambda s, i, **kw: searches.append(i.id) or search(s, i, **kw))
    assert not try_place(st, b, allow_borrow=True) and not try_place(st, b, allow_borrow=True)
    assert searches == ["vision/b"]
    st.evict("vision/a")
    assert try_place(st, b, allow_borrow=True) and searches == ["vision/b", "vision/b"]


def test_a_search_a_reservation_failed_is_made_again_once_the_reserved_job_is_placed() -> None:
    # Every node of the one on-demand pool is reserved for `big` from 2 h: `long` (5 h, lower class) may not
    # take them. Once `big` is placed (on four of them), its reservation binds nobody and `long` fits.
    st = state({"vision/big": job("big", count=32, body="priority: production\nspot: never\n"),
                "vision/long": job("long", count=8, body="duration_hours: 5\nspot: never\n")},
               changes={"fleet/clusters/onprem-sjc.yaml": None})
    big, long = st.jobs["vision/big"], st.jobs["vision/long"]
    st.reserve(Reservation("vision/big", "gke-usc1", "h100", tuple(range(8)), 2.0, None, big.priority))
    assert not try_place(st, long, allow_borrow=True)
    assert place_at(st, big, 0, st.pools["gke-usc1/h100"], "")
    assert try_place(st, long, allow_borrow=True) and st.live["vision/long"].pool.pool.key == "gke-usc1/h100"


def test_a_spread_jobs_replicas_keep_every_field_of_its_info_but_what_split_sets() -> None:
    # split builds each replica's JobInfo field by field (faster than `replace`): a field added to JobInfo and
    # left out there would lose its value on every replica, and this fails.
    st = state({"vision/svc": job("svc", count=1, body="kind: inference\nport: 8000\nreplicas: 3\n"
                                                       "priority: production\nspot: never\n")},
               changes={"fleet/clusters/onprem-sjc.yaml": None})
    info = replace(st.jobs["vision/svc#0"], id="vision/svc", job=st.jobs["vision/svc#0"].job.model_copy(
        update={"replicas": 3}), spread="none", hard=False, siblings=(), pin="cluster:gke-usc1",
        order_work=7, spot_quota=frozenset({"x"}))
    replicas = split(info)
    assert [r.id for r in replicas] == ["vision/svc#0", "vision/svc#1", "vision/svc#2"]
    for r in replicas:
        assert r.job.replicas == 1 and r.spread == "zone" and not r.hard and r.siblings == tuple(x.id for x in replicas)
        for f in fields(JobInfo):
            if f.name not in ("job", "id", "spread", "hard", "siblings"):
                assert getattr(r, f.name) == getattr(info, f.name), f.name


# -- steps -------------------------------------------------------------------------------------------------

def test_keep_base_keeps_running_units() -> None:
    jobs = {"vision/a": job("a"), "vision/b": job("b", count=8)}
    base = plan(check(with_files({"jobs/vision/train.yaml": None, **{f"jobs/{k}.yaml": v for k, v in jobs.items()}}),
                      CAT))
    st = state(jobs, base)
    assert keep_base(st) == []
    assert {j: (lv.pool.pool.key, lv.units, lv.kept) for j, lv in st.live.items()} == {
        p.job: (p.pool_key, p.units, True) for p in base.placements}


def test_keep_base_forces_a_job_whose_cluster_is_down() -> None:
    jobs = {"vision/a": job("a")}
    v = check(with_files({"jobs/vision/train.yaml": None, "jobs/vision/a.yaml": jobs["vision/a"]}), CAT)
    base = plan(v)
    assert base.placement_of("vision/a").cluster == "onprem-sjc"
    down = ONPREM.replace("region: sjc", "region: sjc\nstatus: down")
    st = state(jobs, base, {"fleet/clusters/onprem-sjc.yaml": down})
    queue = keep_base(st)
    assert [i.id for i in queue] == ["vision/a"]
    assert st.outcome.forced == {"vision/a": "cluster onprem-sjc is down"}


def test_try_preempt_takes_the_teams_lower_priority_kept_work() -> None:
    low = job("low", count=32, body="checkpoint_minutes: 5\n")
    gke_off = {"fleet/clusters/gke-usc1.yaml": None}
    v = check(with_files({"jobs/vision/train.yaml": None, "jobs/vision/low.yaml": low, **gke_off}), CAT)
    base = plan(v)
    assert base.placement_of("vision/low") is not None
    high = job("high", count=8, body="priority: production\n")
    st = state({"vision/low": low, "vision/high": high}, base, gke_off)
    keep_base(st)
    assert st.live["vision/low"].kept and not try_place(st, st.jobs["vision/high"], allow_borrow=True)
    assert try_preempt(st, st.jobs["vision/high"])
    assert "vision/high" in st.live and "vision/low" not in st.live and "vision/low" in st.failed
    [p] = st.outcome.preemptions
    assert (p.job, p.by) == ("vision/low", "vision/high") and "lower priority in team vision" in p.reason


def test_eject_and_insert_restores_the_state_exactly_when_refused() -> None:
    st = state({"vision/a": job("a"), "vision/b": job("b"), "lang/c": job("c", team="lang")})
    run(st)
    before = snapshot(st)
    out = [st.live["vision/a"], st.live["vision/b"]]
    assert not eject_and_insert(st, None, out, keep={"vision/a", "vision/b"}, fill=False, accept=lambda _: False)
    after = snapshot(st)
    assert sorted(after[0]) == sorted(before[0]) and after[1:5] == before[1:5]
    assert eject_and_insert(st, None, [st.live["lang/c"]], keep={"lang/c"}, fill=False, accept=lambda _: True)
    assert "lang/c" in st.live


def test_explain_does_not_change_the_state_it_reads() -> None:
    v = check(with_files({"jobs/vision/a.yaml": job("a"), "jobs/vision/b.yaml": job("b")}), CAT)
    result, st = plan_with_state(v)
    before = snapshot(st)
    text = explain(result, st, "vision/a")
    assert "vision/a" in text and snapshot(st) == before


def test_compact_moves_the_top_unit_into_a_hole_and_closes_it() -> None:
    down = {"fleet/clusters/onprem-sjc.yaml": ONPREM + "status: down\n"}
    st = state({"vision/a": job("a", count=8, body="spot: never\n"),
                "vision/b": job("b", count=8, body="spot: never\n")}, changes=down)
    run(st)
    units = {j: st.live[j].units for j in ("vision/a", "vision/b")}
    assert sorted(units.values()) == [(0,), (1,)]
    bottom = next(j for j, u in units.items() if u == (0,))
    top = next(j for j in units if j != bottom)
    ps = st.live[top].pool
    st.evict(bottom)
    before = compact_usd(st, [ps])
    assert ps.final_target() == 1 and ps.final_target() * ps.unit_hourly_usd == before   # the hole is not paid
    assert compact(st, [ps])
    assert st.live[top].units == (0,) and ps.target == 1 and ps.final_target() * ps.unit_hourly_usd == before


def test_relocate_moves_a_job_to_a_cheaper_place_and_keeps_the_work() -> None:
    # Placed by hand on GKE although the owned nodes (already paid) have room: relocation moves it there.
    st = state({"vision/a": job("a", count=8, body="spot: never\n")})
    info = st.jobs["vision/a"]
    gke = st.pools["gke-usc1/h100"]
    assert place_at(st, info, 0, gke, "")
    assert relocate(st, 10)
    assert st.live["vision/a"].pool.pool.key == "onprem-sjc/h100-owned" and gke.final_target() == 0


# -- kicks (improve.kicks) ---------------------------------------------------------------------------------

def test_kicks_place_a_pending_job_first_and_keep_the_better_plan() -> None:
    # One 8-GPU node: a run that placed the 6-GPU job first leaves both 4-GPU jobs pending (work 6). Kicking
    # the first pending job in (placed first, then the queue) fits both 4-GPU jobs (work 8) and wins; the
    # kicked runs are whole greedy runs, so their plan keeps every rule. The poor plan is not finished
    # (no eject-and-insert), so only the kicks can improve it.
    one_node = GKE.replace("  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 8",
                           "  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 1")
    st = state({"vision/big": job("big", count=6), "vision/a": job("a", count=4), "vision/b": job("b", count=4)},
               changes={"fleet/clusters/onprem-sjc.yaml": None, "fleet/clusters/gke-usc1.yaml": one_node})
    poor_state = PlanState(st.fleet, None, Strategy(name="poor", lead=("vision/big",)))
    poor = run(poor_state)
    assert [p.job for p in poor.placements] == ["vision/big"]
    poor_ranked = (plan_key(poor_state, poor, 3), poor, poor_state)
    key, lazy, winner = kicks(st.fleet, None, poor_ranked, 4)
    assert isinstance(lazy, AsOf)             # a run is judged by its key; only the kept plan is frozen (polish)
    better = lazy.freeze(winner)
    assert key == plan_key(winner, better, key[-1])   # type: ignore[arg-type]
    assert sorted(p.job for p in better.placements) == ["vision/a", "vision/b"]
    assert key < poor_ranked[0] and winner.strategy.name == "kick:vision/a"
    # from the better plan, kicking the 6-GPU job in places less work: the plan stays
    assert kicks(st.fleet, None, (key, better, winner), 4)[1] is better
