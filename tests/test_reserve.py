"""Reservations and backfill, and every pending job's expected start (issue 22 item 3; reconciler/plan/reserve.py).

The fleet: one pool of six 8-GPU H100 nodes. `a` (16 GPUs, 2 h) and `b` (16 GPUs, 6 h) run on nodes 0-3 (kept from
the base plan, or observed running); `big` (32 GPUs, same class) is blocked behind them: when `a` ends, nodes 0-1
and the two free nodes 4-5 hold it, so it reserves them from 2 h. Lower-class 8-GPU jobs: `short` (1 h) ends
before that and may backfill a reserved node; `long` (5 h) and `nodur` (no duration_hours) may not. They belong
to team `lang`, within its quota, so `big` cannot preempt them: only the reservation keeps its nodes for it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from reconciler.catalog import load_catalog
from reconciler.eta import expected_start
from reconciler.observe.model import Snapshot
from reconciler.pipeline import check
from reconciler.plan.explain import explain, explain_doc
from reconciler.plan.live import LiveInputs, Running
from reconciler.plan.planner import plan, plan_with_state
from reconciler.plan.types import HOURS_PER_MONTH, Plan, plan_from_dict
from reconciler.status import status
from reconciler.status.render import review_rows
from reconciler.validate import Validated

from builders import GKE, PRIORITIES, TEAMS, job, with_files

NOW = datetime(2026, 11, 23, 4, tzinfo=UTC)
PRIO = PRIORITIES.replace("  - {name: opportunistic, value: 10, spot: required}\n", "  - {name: low, value: 10}\n")
CLUSTER = GKE[:GKE.index("pools:\n")] + """\
pools:
  - name: h100
    accelerator: nvidia-h100-80gb
    max: NODES
"""
RUNNING = {"a": (16, "duration_hours: 2\n"), "b": (16, "duration_hours: 6\n")}
QUEUE = {"big": (32, "duration_hours: 10\n"), "short": (8, "duration_hours: 1\npriority: low\n"),
         "long": (8, "duration_hours: 5\npriority: low\n"), "nodur": (8, "priority: low\n")}


def fleet(jobs: dict[str, tuple[int, str]], nodes: int = 6, team: str = "", teams: str | None = None) -> Validated:
    changes: dict[str, str | None] = {"policies/priorities.yaml": PRIO,
                                      "fleet/clusters/gke-usc1.yaml": CLUSTER.replace("NODES", str(nodes)),
                                      "fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/train.yaml": None}
    if teams is not None:
        changes["policies/teams.yaml"] = teams
    for name, (count, body) in jobs.items():
        owner = team or ("lang" if "priority: low" in body else "vision")   # lang's: never preempted for `big`
        changes[f"jobs/{owner}/{name}.yaml"] = job(name, team=owner, count=count, body=body)
    return check(with_files(changes), load_catalog())


def queued(nodes: int = 6) -> tuple[Validated, Plan]:
    """`a` and `b` running (kept from the base plan), the queue submitted since."""
    base = plan(fleet(RUNNING, nodes))
    assert [(p.job, p.units) for p in base.placements] == [("vision/a", (0, 1)), ("vision/b", (2, 3))]
    v = fleet({**RUNNING, **QUEUE}, nodes)
    return v, plan(v, base)


def placed(p: Plan) -> dict[str, tuple[int, ...]]:
    return {x.job: x.units for x in p.placements}


def pending(p: Plan) -> dict[str, dict[str, object]]:
    return {d["job"]: d for d in json.loads(p.to_json())["pending"]}


def test_a_large_job_blocked_behind_running_work_gets_a_reservation_and_its_expected_start() -> None:
    _, p = queued()
    big = pending(p)["vision/big"]
    assert big["expected_start"] == 2.0      # when `a` ends after its duration_hours
    assert big["reservation"] == {"cluster": "gke-usc1", "pool": "h100", "units": [0, 1, 4, 5]}


def test_a_short_lower_job_backfills_a_long_one_does_not() -> None:
    _, p = queued()
    assert placed(p) == {"vision/a": (0, 1), "vision/b": (2, 3), "lang/short": (4,)}   # ends at 1 h < 2 h
    waits = pending(p)
    assert set(waits) == {"vision/big", "lang/long", "lang/nodur"}
    assert waits["lang/long"]["expected_start"] == 6.0      # `b`'s nodes free at 6 h; not the reserved ones
    assert waits["lang/nodur"]["expected_start"] == 6.0
    why = waits["lang/nodur"]["reasons"]
    assert isinstance(why, list) and any("reserved for vision/big" in r and "has no duration_hours" in r for r in why)
    # the same job with a duration that ends by the reservation's start backfills
    v2 = fleet({**RUNNING, **QUEUE, "nodur": (8, "priority: low\nduration_hours: 2\n")})
    p2 = plan(v2, plan(fleet(RUNNING)))
    assert placed(p2)["lang/nodur"][0] in (4, 5) and "lang/nodur" not in pending(p2)


def test_a_reservation_leaves_no_capacity_idle_that_other_work_could_use() -> None:
    """A seventh node is outside the reservation: a long job takes it now; the reserved nodes stay for `big`. (The
    plan numbers a node group's used nodes 0..k-1: `long`, on the seventh node, is written as node 5, and the
    reserved node no job uses as node 6.)"""
    _, p = queued(nodes=7)
    assert placed(p) == {"vision/a": (0, 1), "vision/b": (2, 3), "lang/short": (4,), "lang/long": (5,)}
    assert pending(p)["vision/big"]["reservation"] == {"cluster": "gke-usc1", "pool": "h100", "units": [0, 1, 4, 6]}
    assert set(pending(p)) == {"vision/big", "lang/nodur"}


def test_the_reservation_does_not_starve_the_large_job() -> None:
    """The next cycles: `short` and then `a` finish; lower work never took the reserved nodes, so `big` starts."""
    _, p = queued()
    after_a = fleet({"b": RUNNING["b"], **{k: q for k, q in QUEUE.items() if k != "short"}})
    p2 = plan(after_a, p)
    assert placed(p2)["vision/big"] == (0, 1, 4, 5)
    assert {"lang/long", "lang/nodur"} <= set(pending(p2))


def test_observed_running_minutes_bring_the_expected_start_forward() -> None:
    """Planned from what runs: `a` has run 90 of its 120 minutes, so `big` expects to start in half an hour."""
    v = fleet({**RUNNING, **QUEUE})
    live = LiveInputs(NOW, running={"vision/a": Running("vision/a", "gke-usc1", "h100", (0, 1)),
                                    "vision/b": Running("vision/b", "gke-usc1", "h100", (2, 3))},
                      run_minutes={"vision/a": 90.0, "vision/b": 60.0})
    p = plan(v, None, live)
    assert pending(p)["vision/big"]["expected_start"] == 0.5
    assert pending(p)["lang/long"]["expected_start"] == 5.0     # `b` has 5 of its 6 hours left


def test_work_past_its_duration_hours_is_not_counted_as_ending_now() -> None:
    """Planned from what runs, `a` has run 150 of its 120 minutes: nothing says when it ends. Counted as ending
    now, `big` "fitted now", so it got no reservation and `nodur` (no duration_hours, never ending) took a node
    its gang needs; and the waiting jobs were told they start now, cycle after cycle. Now `big` reserves the nodes
    free when `b` ends (6 h): `long` and `short` end before then and backfill, `nodur` waits. With `b` past its
    duration instead, `big` still starts when `a` ends, and the low jobs behind it after `big` (12 h), not now."""
    v = fleet({**RUNNING, **QUEUE})
    base = plan(fleet(RUNNING))
    running = {"vision/a": Running("vision/a", "gke-usc1", "h100", (0, 1)),
               "vision/b": Running("vision/b", "gke-usc1", "h100", (2, 3))}
    p = plan(v, base, LiveInputs(NOW, running=running, run_minutes={"vision/a": 150.0}))
    waits = pending(p)
    assert waits["vision/big"]["expected_start"] == 6.0
    assert waits["vision/big"]["reservation"] == {"cluster": "gke-usc1", "pool": "h100", "units": [2, 3, 4, 5]}
    assert set(placed(p)) == {"vision/a", "vision/b", "lang/long", "lang/short"} and "lang/nodur" in waits
    p = plan(v, base, LiveInputs(NOW, running=running, run_minutes={"vision/b": 400.0}))
    waits = pending(p)
    assert waits["vision/big"]["expected_start"] == 2.0 and "reservation" in waits["vision/big"]
    assert waits["lang/long"]["expected_start"] == waits["lang/nodur"]["expected_start"] == 12.0


def test_each_job_the_reserved_units_hold_back_is_told_why_in_its_own_words() -> None:
    """`long` and `nodur` would fit now only on nodes reserved for `big`: each pending entry says so, with its own
    reason for not backfilling (starts._held_from finds the pool's answer once for jobs alike, not the words)."""
    _, p = queued()
    held = "units 0, 1, 4, 5 of gke-usc1/h100 are reserved for vision/big, expected to start in 2 h: "
    why = {q.job: q.reasons[-1] for q in p.pending}
    assert why["lang/long"] == held + "its duration_hours 5 end after that, so it cannot backfill them"
    assert why["lang/nodur"] == held + "it has no duration_hours, so it cannot backfill them"
    assert not any("reserved for" in r for r in pending(p)["vision/big"]["reasons"])
    # and the capacity reason counts the reserved node as not free: before, "needs 1 node, the 1 matching pool(s)
    # have at most 1 node free", of a job kept off that very node
    first = {q.job: q.reasons[0] for q in p.pending}
    assert first["lang/long"].startswith("not enough free 8x nvidia-h100-80gb capacity: needs 1 node, the 1 matching "
                                         "pool(s) have at most 0 nodes free (1 node more reserved for vision/big); "
                                         "held by "), first["lang/long"]
    assert "(1 node more reserved for vision/big)" in first["lang/nodur"]


def test_expected_start_in_the_plan_json_on_every_pending_job_and_read_back() -> None:
    _, p = queued()
    doc = json.loads(p.to_json())
    assert doc["pending"] and all("expected_start" in d for d in doc["pending"])
    back = plan_from_dict(doc)
    assert back.to_json() == p.to_json()
    # a job whose blockers never end (no duration_hours) cannot be told
    forever = {"a": (16, ""), "b": (16, "")}
    v = fleet({**forever, "big": (48, "duration_hours: 1\n")})
    assert pending(plan(v, plan(fleet(forever))))["vision/big"]["expected_start"] is None


def test_explain_shows_the_expected_start_and_the_reservation() -> None:
    v = fleet({**RUNNING, **QUEUE})
    p, st = plan_with_state(v, plan(fleet(RUNNING)))
    doc = explain_doc(p, st, "vision/big")
    assert doc["expected_start"] == 2.0 and doc["reservation"]["units"] == [0, 1, 4, 5]
    text = explain(p, st, "vision/big")
    assert "**expected start**: in 2 h" in text and "units 0, 1, 4, 5 of gke-usc1/h100 are reserved for it" in text
    assert "the free units are reserved for a blocked job" in explain(p, st, "lang/nodur")


def test_status_and_the_job_story_show_the_plans_expected_start() -> None:
    v, p = queued()
    report = status(v, Snapshot(observed_at=NOW, clusters=()), p)
    big = next(j for j in report.jobs if j.job == "vision/big")
    assert big.expected_start == NOW + timedelta(hours=2)
    row = next(r for r in review_rows(report)["waiting"] if r[1] == "vision/big")
    assert row[4] == "2026-11-23 06:00"
    eta = expected_start(v, p, "vision/big", NOW)
    assert eta.at == NOW + timedelta(hours=2) and "reserves units 0, 1, 4, 5 of gke-usc1/h100" in eta.text()


def test_a_job_blocked_by_its_teams_quota_holds_the_quota_a_short_job_still_backfills() -> None:
    """Quota, not room, blocks `big` (64 GPUs: vision's nominal 64 is in use, the cohort lends 32): when `a` ends at
    2 h it is admitted, so vision's lower work that would still run then waits; a 1-hour job does not."""
    running = {"a": (32, "duration_hours: 2\n"), "b": (32, "duration_hours: 6\n")}
    queue = {"big": (64, "duration_hours: 10\n"), "qshort": (8, "duration_hours: 1\npriority: low\n"),
             "qlong": (8, "duration_hours: 5\npriority: low\n")}
    base = plan(fleet(running, nodes=20, team="vision"))
    p = plan(fleet({**running, **queue}, nodes=20, team="vision"), base)
    assert set(placed(p)) == {"vision/a", "vision/b", "vision/qshort"}
    waits = pending(p)
    assert waits["vision/big"]["expected_start"] == 2.0
    held = waits["vision/big"]["reservation"]      # and the units it fits on then (the test below)
    assert isinstance(held, dict) and len(held["units"]) == 8, held
    assert waits["vision/qlong"]["expected_start"] == 12.0      # after `big` has run its 10 hours
    why = waits["vision/qlong"]["reasons"]
    assert isinstance(why, list) and any("quota is held for vision/big" in r for r in why)
    # the hold is what keeps it out (room and quota would admit it): until the forty-first session's review it
    # was also told "lower in the queue than jobs that took the remaining capacity", with 11 nodes free
    assert len(why) == 1, why


def test_a_job_its_teams_budget_blocks_is_expected_once_enough_of_the_teams_spend_has_ended() -> None:
    """vision's budget paces 1.5 times what `a` (16 GPUs, 2 hours) costs an hour: `c` (16 GPUs) waits on the budget
    until `a` ends. Its expected start is then, 2 hours on; before, the budget was not reckoned and it was 0 (now),
    while the plan's own reason said the budget blocks it."""
    run = {"a": (16, "duration_hours: 2\n")}
    base = plan(fleet(run, team="vision"))
    (a,) = base.placements
    budget = f"budget_monthly_usd: {1.5 * a.hourly_usd * HOURS_PER_MONTH:.0f}"
    v = fleet({**run, "c": (16, "duration_hours: 3\n")}, team="vision",
              teams=TEAMS.replace("budget_monthly_usd: 5000000", budget))
    p = plan(v, base)
    assert set(placed(p)) == {"vision/a"}
    c = pending(p)["vision/c"]
    assert any("budget" in r for r in c["reasons"]), c["reasons"]
    assert c["expected_start"] == 2.0


COHORT_TEAMS = TEAMS + """\
  - name: serve
    owners: ["@org/serve"]
    cohort: research
    quota:
      tpu-v5p: {nominal: 8}
"""


def cohort_fleet(jobs: dict[str, tuple[str, int, str]], teams: str = COHORT_TEAMS, nodes: int = 20) -> Validated:
    """One pool of `nodes` 8-GPU nodes; each job by name: its team, GPUs and further YAML."""
    changes: dict[str, str | None] = {"policies/priorities.yaml": PRIO, "policies/teams.yaml": teams,
                                      "fleet/clusters/gke-usc1.yaml": CLUSTER.replace("NODES", str(nodes)),
                                      "fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/train.yaml": None}
    for name, (team, count, body) in jobs.items():
        changes[f"jobs/{team}/{name}.yaml"] = job(name, team=team, count=count, body=body)
    return check(with_files(changes), load_catalog())


def test_a_job_that_needs_the_cohorts_lending_holds_it_against_other_teams_long_borrowing() -> None:
    """Quota blocks `serve/big` (64 H100s; team serve has no H100 quota of its own, so all of it is the cohort's
    lending): vision lends 48 of its 64 while `va` runs, lang borrows 32 of them for `lborrow`, so 16 are left.
    When both end at 2 h the cohort lends 80: `big` is expected then, and holds the cohort's lending. lang's
    lower-class `qlong` (16 GPUs, 5 h) would borrow the 16 now and still run at 2 h: it waits; `qshort` (1 h)
    ends before and borrows them. Before, `big` had no expected start (its team has no work of its own to
    end) and no hold, and `qlong`, first by id, took the 16."""
    running = {"va": ("vision", 16, "duration_hours: 2\n"), "lborrow": ("lang", 32, "duration_hours: 2\n")}
    queue = {"big": ("serve", 64, "duration_hours: 10\n"), "qlong": ("lang", 16, "duration_hours: 5\npriority: low\n"),
             "qshort": ("lang", 16, "duration_hours: 1\npriority: low\n")}
    base = plan(cohort_fleet(running))
    assert set(placed(base)) == {"vision/va", "lang/lborrow"}
    p = plan(cohort_fleet({**running, **queue}), base)
    assert set(placed(p)) == {"vision/va", "lang/lborrow", "lang/qshort"}
    waits = pending(p)
    assert waits["serve/big"]["expected_start"] == 2.0
    why = waits["lang/qlong"]["reasons"]
    assert isinstance(why, list) and any("the cohort's nvidia-h100-80gb lending is held for serve/big" in r
                                         for r in why), why
    assert waits["lang/qlong"]["expected_start"] == 12.0      # after `big` has run its 10 hours


def test_the_cohort_hold_does_not_hold_back_the_lenders_own_quota() -> None:
    """vision's own work within its nominal quota is guaranteed (Kueue's nominal quota): the hold for `serve/big`
    does not keep `vown` (16 H100s, 5 h, within vision's 64) out, though it lowers what vision lends."""
    running = {"va": ("vision", 16, "duration_hours: 2\n"), "lborrow": ("lang", 32, "duration_hours: 2\n")}
    queue = {"big": ("serve", 64, "duration_hours: 10\n"), "vown": ("vision", 16, "duration_hours: 5\n")}
    p = plan(cohort_fleet({**running, **queue}), plan(cohort_fleet(running)))
    assert set(placed(p)) == {"vision/va", "lang/lborrow", "vision/vown"}


def test_a_job_that_may_backfill_now_but_does_not_fit_now_is_not_expected_into_reserved_units() -> None:
    """`wide` (low, 1 h) would end before `big`'s reservation starts (2 h) if it started now, but it needs three
    nodes and two are free. At 2 h, when `a` ends, it no longer ends by that start: its expected start and its own
    reservation were 2 h on nodes 0, 1 and 4, the very nodes `big` holds from 2 h (two reservations of one node
    at one start). It starts when `big` ends (12 h), on nodes no reservation holds then."""
    base = plan(fleet(RUNNING))
    p = plan(fleet({**RUNNING, "big": QUEUE["big"], "wide": (24, "duration_hours: 1\npriority: low\n")}), base)
    waits = pending(p)
    assert waits["vision/big"]["expected_start"] == 2.0
    assert waits["vision/big"]["reservation"] == {"cluster": "gke-usc1", "pool": "h100", "units": [0, 1, 4, 5]}
    assert waits["lang/wide"]["expected_start"] == 12.0
    assert waits["lang/wide"]["reservation"] == {"cluster": "gke-usc1", "pool": "h100", "units": [0, 1, 2]}


def test_a_job_its_teams_quota_blocks_also_holds_the_units_it_will_start_on() -> None:
    """vision may use 40 H100s and borrow none: `a` (16, 2 h) and `b` (8, 6 h) leave 16, so quota blocks `big` (24)
    until `a` ends at 2 h, when nodes 0, 1, 3 and 4 are free for it. lang's `long` (16, 5 h, within lang's own quota)
    would take nodes 3 and 4 now and still run then: `big`'s start would slip to 5 h (on Alibaba's replay 8-GPU jobs
    whose quota freed found every node taken by week-long 1-GPU jobs of other teams, started while they waited on
    quota). Now the quota hold holds the units too: `long` waits, `short` (1 h) backfills them."""
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 40, borrowing_limit: 0}")
    running = {"a": (16, "duration_hours: 2\n"), "b": (8, "duration_hours: 6\n")}
    base = plan(fleet(running, nodes=5, teams=teams))
    assert placed(base) == {"vision/a": (0, 1), "vision/b": (2,)}
    queue = {"big": (24, "duration_hours: 10\n"), "long": (16, "duration_hours: 5\npriority: low\n")}
    p = plan(fleet({**running, **queue}, nodes=5, teams=teams), base)
    assert set(placed(p)) == {"vision/a", "vision/b"}
    waits = pending(p)
    assert any("quota" in r for r in waits["vision/big"]["reasons"])     # type: ignore[union-attr]
    assert waits["vision/big"]["expected_start"] == 2.0
    held = waits["vision/big"]["reservation"]
    assert isinstance(held, dict) and len(held["units"]) == 3 and 2 not in held["units"], held
    why = waits["lang/long"]["reasons"]
    assert isinstance(why, list) and any("reserved for vision/big" in r for r in why), why
    p = plan(fleet({**running, **queue, "short": (16, "duration_hours: 1\npriority: low\n")}, nodes=5, teams=teams),
             base)
    assert set(placed(p)) == {"vision/a", "vision/b", "lang/short"}
    assert pending(p)["vision/big"]["expected_start"] == 2.0


def _two_holders(big: int) -> dict[str, str]:
    """Nine nodes: vision's `a` (2 h) and `b` (6 h) and evals's `c` (3 h) run on six, all production (no one is
    preempted). evals's production `y` (8 GPUs) waits on its team's quota until `c` ends and holds one free node;
    vision's research `x` (`big` GPUs) waits for room and reserves `a`'s nodes and what is left of the free ones;
    lang's `z` (16 GPUs, 20 h, low) fits now on the three free nodes, bound by both. What its pending entry says
    keeps it out."""
    teams = TEAMS + ("  - name: evals\n    owners: [\"@org/evals\"]\n    cohort: research\n    quota:\n"
                     "      nvidia-h100-80gb: {nominal: 16, borrowing_limit: 0}\n")
    prod = "priority: production\n"
    running = {"a": ("vision", 16, "duration_hours: 2\n" + prod), "b": ("vision", 16, "duration_hours: 6\n" + prod),
               "c": ("evals", 16, "duration_hours: 3\n" + prod)}
    queue = {"x": ("vision", big, "duration_hours: 10\n"), "y": ("evals", 8, "duration_hours: 10\n" + prod),
             "z": ("lang", 16, "duration_hours: 20\npriority: low\n")}

    base = plan(cohort_fleet(running, teams, 9))
    assert placed(base) == {"evals/c": (0, 1), "vision/a": (2, 3), "vision/b": (4, 5)}
    p = plan(cohort_fleet({**running, **queue}, teams, 9), base)
    assert set(placed(p)) == set(placed(base))
    waits = pending(p)
    assert [waits[j]["reservation"]["units"] for j in ("evals/y", "vision/x")] == \
        [[6], [2, 3, 7, 8] if big == 32 else [2, 3, 7]]     # type: ignore[index]
    return {q.job: q.reasons[-1] for q in p.pending}


def test_a_job_two_reservations_bind_is_told_of_the_one_that_keeps_it_out() -> None:
    """`x` (32 GPUs) holds free nodes 7 and 8, `y` node 6: without `y`'s node `z` would still fit on 7 and 8, so it
    is `x`'s reservation that keeps it out. It was told of `y`'s, the first on the pool that binds it."""
    assert _two_holders(32)["lang/z"] == ("units 2, 3, 7, 8 of gke-usc1/h100 are reserved for vision/x, expected to "
                                          "start in 2 h: its duration_hours 20 end after that, so it cannot "
                                          "backfill them")


def test_a_job_two_reservations_keep_out_only_together_is_told_of_both() -> None:
    """`x` (24 GPUs) holds free node 7, `y` node 6: `z` would fit without either's node, not without both."""
    why = _two_holders(24)
    assert why["lang/z"] == ("unit 6 of gke-usc1/h100 is reserved for evals/y, expected to start in 3 h; units 2, 3, "
                             "7 of gke-usc1/h100 are reserved for vision/x, expected to start in 2 h: its "
                             "duration_hours 20 end after that, so it cannot backfill them")
    assert why["vision/x"] == ("unit 6 of gke-usc1/h100 is reserved for evals/y, expected to start in 3 h: its "
                               "duration_hours 10 end after that, so it cannot backfill it")


def test_a_waiting_jobs_reasons_never_name_a_job_the_plan_preempts_as_holding_its_units() -> None:
    """`j1` (16 GPUs) cannot use `v`'s node alone and waits; `j2` (8 GPUs), decided after it, preempts `v` (a lower
    class) and takes that node. `j1`'s reasons, recorded when it was decided, named `v` as a holder; now they are
    measured again once a later preemption took what they named: whether `j2` is of `j1`'s class or lower (then
    `w`, critical, keeps `j1` off), from git and from what runs (`v` running on to its checkpoint)."""
    for j1, w in (("", ""), ("priority: production\n", "priority: critical\n")):
        run = {"w": (8, "duration_hours: 6\n" + w),
               "v": (8, "duration_hours: 6\npriority: low\ncheckpoint_minutes: 30\n")}
        queue = {"j1": (16, "duration_hours: 3\n" + j1), "j2": (8, "duration_hours: 3\n")}
        base = plan(fleet(run, nodes=2, team="vision"))
        assert placed(base) == {"vision/w": (0,), "vision/v": (1,)}
        v = fleet({**run, **queue}, nodes=2, team="vision")
        live = LiveInputs(NOW, {x.job: Running(x.job, x.cluster, x.pool, x.units) for x in base.placements},
                          run_minutes={"vision/w": 50.0, "vision/v": 50.0})
        for p in (plan(v, base), plan(v, None, live)):
            assert placed(p) == {"vision/w": (0,), "vision/j2": (1,)}
            assert [(x.job, x.by) for x in p.preemptions] == [("vision/v", "vision/j2")]
            assert pending(p)["vision/j1"]["reasons"] == [
                "not enough free 16x nvidia-h100-80gb capacity: needs 2 nodes, the 1 matching pool(s) have at most 0 "
                "nodes free; held by vision/j2 (8 GPUs), vision/w (8 GPUs)"], j1


def test_a_spared_preemption_that_names_a_job_preempted_since_is_not_told() -> None:
    """`j1` would preempt `u` and `v` but waiting is cheaper (`v` is 10 hours past a checkpoint it never makes);
    `j2` then preempts `u` alone. "waiting is cheaper than preempting vision/u, vision/v" no longer holds: `u` is
    preempted. `j1` is told what holds its nodes now."""
    run = {"u": (8, "duration_hours: 2\npriority: low\ncheckpoint_minutes: 30\n"),
           "v": (8, "duration_hours: 11\npriority: low\n")}
    queue = {"j1": (16, "duration_hours: 3\n"), "j2": (8, "duration_hours: 3\n")}
    base = plan(fleet(run, nodes=2, team="vision"))
    v = fleet({**run, **queue}, nodes=2, team="vision")
    live = LiveInputs(NOW, {x.job: Running(x.job, x.cluster, x.pool, x.units) for x in base.placements},
                      run_minutes={"vision/u": 60.0, "vision/v": 600.0})
    p = plan(v, None, live)
    assert [(x.job, x.by) for x in p.preemptions] == [("vision/u", "vision/j2")]
    assert pending(p)["vision/j1"]["reasons"] == [
        "not enough free 16x nvidia-h100-80gb capacity: needs 2 nodes, the 1 matching pool(s) have at most 0 "
        "nodes free; held by vision/j2 (8 GPUs), vision/v (8 GPUs)"]


def test_jobs_alike_queued_behind_a_reservation_are_told_starts_one_after_another() -> None:
    """`a` holds both nodes for 2 hours; three alike 16-GPU jobs wait. The first holds the class's reservation (2 h);
    the others are reckoned in queue order, each after the claims of those before it (starts._queued): 3 h and
    4 h. Before, each was reckoned apart and both told 3 h, though one node pair runs one job at a time."""
    run = {"a": (16, "duration_hours: 2\n")}
    base = plan(fleet(run, nodes=2, team="vision"))
    queue = {f"q{i}": (16, "duration_hours: 1\n") for i in (1, 2, 3)}
    p = plan(fleet({**run, **queue}, nodes=2, team="vision"), base)
    assert {x.job: x.expected_start for x in p.pending} == {"vision/q1": 2.0, "vision/q2": 3.0, "vision/q3": 4.0}


def test_a_job_that_can_start_only_later_is_held_by_a_quota_hold_it_would_then_run_into() -> None:
    """vision may use 16 H100s: a1 (2 h) and a2 (10 h) take them; q (16 GPUs, 5 h, research) holds the quota
    from 10 h; l (low, 9 h) could start at 2 h, when a1 ends, but would then run to 11 h, into q's start. It
    is told 15 h, when q ends. Before the forty-second session's review the hold was judged as if l started
    now (9 h ends before 10 h), and l was told 2 h and given a unit; planned again at 2 h it was refused for
    q's hold."""
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 16, borrowing_limit: 0}")
    v = fleet({"a1": (8, "duration_hours: 2\npriority: production\n"),
               "a2": (8, "duration_hours: 10\npriority: production\n"),
               "q": (16, "duration_hours: 5\n"), "l": (8, "duration_hours: 9\npriority: low\n")},
              team="vision", teams=teams)
    waits = pending(plan(v))
    assert (waits["vision/q"]["expected_start"], waits["vision/l"]["expected_start"]) == (10.0, 15.0)


def test_a_reason_naming_a_holder_a_later_move_took_out_is_measured_again() -> None:
    """lang may use 24 H100s; its `x` (24 GPUs, 10 h) is placed first and its low `l` (16) told that `x` holds
    lang's quota. A later move (moves.eject_pairs) puts vision's `y` (32 GPUs, of x's class, the larger) in
    `x`'s place, so `x` waits. Before the forty-second session's review `l` was still told "team lang uses 24
    of its nominal 24 ... held by lang/x (24 GPUs)", with `x` placed nowhere and lang using nothing: what keeps
    it out is `y`'s room."""
    p = plan(_swapped({"jobs/lang/l.yaml": job("l", team="lang", count=16, body="priority: low\n")}))
    assert list(placed(p)) == ["vision/y"], placed(p)
    (why,) = pending(p)["lang/l"]["reasons"]
    assert "held by vision/y (32 GPUs)" in why and "lang/x" not in why, why


def _swapped(files: dict[str, str]) -> Validated:
    """gke-usc1 with 5 H100 nodes; lang (24 H100s, no borrowing) has `x` (24 GPUs, 10 h), vision `y` (32 GPUs,
    no end), both research: `x` is placed first and a later move puts `y` in its place; `files` add jobs."""
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 32}", "nvidia-h100-80gb: {nominal: 24, borrowing_limit: 0}")
    return check(with_files({"policies/priorities.yaml": PRIO, "policies/teams.yaml": teams,
                             "fleet/clusters/gke-usc1.yaml": CLUSTER.replace("NODES", "5"),
                             "fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/train.yaml": None,
                             "jobs/lang/x.yaml": job("x", team="lang", count=24, body="duration_hours: 10\n"),
                             "jobs/vision/y.yaml": job("y", team="vision", count=32), **files}), load_catalog())


def test_a_reserved_job_that_can_start_sooner_on_the_final_plan_is_told_so() -> None:
    """As above, with vision's `s` (2 GPUs, 5 h) and lang's low `z` (8 GPUs, 8 h): `z` reserved a node from 10 h,
    when `x` was to end; the move put `y`, which has no end, on that node, and `s` ends at 5 h on another. Before
    the forty-second session's review `z` was told 10 h on a node `y` holds for ever; it starts at 5 h."""
    p = plan(_swapped({"jobs/vision/s.yaml": job("s", team="vision", count=2, body="duration_hours: 5\n"),
                       "jobs/lang/z.yaml": job("z", team="lang", count=8, body="duration_hours: 8\npriority: low\n")}))
    assert sorted(placed(p)) == ["vision/s", "vision/y"], placed(p)
    assert pending(p)["lang/z"]["expected_start"] == 5.0


def test_a_reason_measured_again_after_a_preemption_keeps_why_the_job_did_not_preempt() -> None:
    """lang's `j1` would preempt lang's low `v` but waiting is cheaper; vision's `j2` then preempts vision's low
    `x`, which `j1`'s recorded reason named as a holder, so the reason is measured again on the final plan. It
    keeps "preemption: waiting is cheaper than preempting lang/v ...": a review of the forty-second session's
    first form of the re-measure (for holders a later move took out) found it dropped there."""
    def repo(jobs: dict[str, tuple[str, int, str]]) -> Validated:
        return check(with_files({"policies/priorities.yaml": PRIO, "fleet/clusters/gke-usc1.yaml":
                                 CLUSTER.replace("NODES", "3"), "fleet/clusters/onprem-sjc.yaml": None,
                                 "jobs/vision/train.yaml": None,
                                 **{f"jobs/{t}/{n}.yaml": job(n, team=t, count=c, body=b)
                                    for n, (t, c, b) in jobs.items()}}), load_catalog())

    running = {"v": ("lang", 8, "duration_hours: 11\npriority: low\n"),
               "x": ("vision", 8, "duration_hours: 6\npriority: low\ncheckpoint_minutes: 30\n"),
               "w": ("vision", 8, "duration_hours: 6\n")}
    base = plan(repo(running))
    live = LiveInputs(NOW, {x.job: Running(x.job, x.cluster, x.pool, x.units) for x in base.placements},
                      run_minutes={"lang/v": 600.0, "vision/x": 60.0, "vision/w": 60.0})
    p = plan(repo({**running, "j1": ("lang", 8, "duration_hours: 3\n"), "j2": ("vision", 8, "duration_hours: 3\n")}),
             None, live)
    assert [(x.job, x.by) for x in p.preemptions] == [("vision/x", "vision/j2")]
    (j1,) = [x.reasons for x in p.pending if x.job == "lang/j1"]
    assert any(r.startswith("preemption: waiting is cheaper than preempting lang/v") for r in j1), j1
    assert any("held by lang/v (8 GPUs), vision/j2 (8 GPUs)" in r for r in j1), j1


def test_a_job_that_room_starts_later_is_held_by_a_quota_hold_it_would_then_run_into() -> None:
    """vision may use 16 H100s: a2 (8, 10 h) runs; q (16, 5 h) holds vision's quota from 10 h; l (low, 8 GPUs,
    9 h, spot only) has quota now, but the one spot node is lang's `x`'s until 5 h. Started at 5 h, l would run
    into q's start: it is told 15 h and why. Before the forty-second session's second review the hold was judged
    at l's quota start (now), and l was told 5 h."""
    gke = GKE.replace("  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 8\n",
                      "  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 3\n") \
        .replace("    capacity: spot\n    max: 8\n", "    capacity: spot\n    max: 1\n")
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 16, borrowing_limit: 0}")
    assert gke.count("max: 3") == 1 and gke.count("max: 1\n") == 1

    def repo(jobs: dict[str, tuple[str, int, str]]) -> Validated:
        return check(with_files({"policies/priorities.yaml": PRIO, "policies/teams.yaml": teams,
                                 "fleet/clusters/gke-usc1.yaml": gke, "fleet/clusters/onprem-sjc.yaml": None,
                                 "jobs/vision/train.yaml": None,
                                 **{f"jobs/{t}/{n}.yaml": job(n, team=t, count=c, body=b)
                                    for n, (t, c, b) in jobs.items()}}), load_catalog())

    running = {"a2": ("vision", 8, "duration_hours: 10\npriority: production\nspot: never\n"),
               "x": ("lang", 8, "duration_hours: 5\nspot: required\n")}
    p = plan(repo({**running, "q": ("vision", 16, "duration_hours: 5\nspot: never\n"),
                   "l": ("vision", 8, "duration_hours: 9\npriority: low\nspot: required\n")}), plan(repo(running)))
    waits = pending(p)
    assert (waits["vision/q"]["expected_start"], waits["vision/l"]["expected_start"]) == (10.0, 15.0)
    assert "team vision's nvidia-h100-80gb quota is held for vision/q: it starts only in 15 h" in \
        waits["vision/l"]["reasons"][-1], waits["vision/l"]["reasons"]
