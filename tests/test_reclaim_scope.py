"""Reclaim takes back what a cohort-mate borrows, and no more: a victim of another team is preempted only while
its team still borrows the accelerator once the victims before it stop, as Kueue's `minimalPreemptions` checks
each candidate (`cqIsBorrowing`). Found by a review of the forty-first session (2026-12-07): lang (nominal 32
H100s) ran l1 and l2 (32 each, so it borrowed 32), vision's `h` needed all 64 GPUs of the pool, and the plan
preempted both, "reclaiming ... quota that team lang borrowed", though l2 ran within lang's own quota once l1
stopped."""

from __future__ import annotations

from test_reserve import CLUSTER, PRIO, fleet, placed, plan

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.validate import Validated

from builders import job, with_files


def _repo(jobs: dict[str, int], files: dict[str, str] | None = None) -> Validated:
    """gke-usc1 with 8 H100 nodes alone; `jobs` (team/name -> GPUs) run 20 hours; `files` replace others."""
    gke = CLUSTER.replace("NODES", "8")
    v = check(with_files({"policies/priorities.yaml": PRIO, "fleet/clusters/gke-usc1.yaml": gke,
                          "fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/train.yaml": None,
                          **{f"jobs/{j}.yaml": job(j.split("/")[1], team=j.split("/")[0], count=n,
                                                   body="duration_hours: 20\n") for j, n in jobs.items()},
                          **(files or {})}), load_catalog())
    assert v.ok, v.errors
    return v


def _plan(need: int) -> tuple[dict[str, tuple[int, ...]], list[tuple[str, str, str]]]:
    running = {"l1": (32, "duration_hours: 20\n"), "l2": (32, "duration_hours: 20\n")}
    base = plan(fleet(running, nodes=8, team="lang"))
    p = plan(_repo({"lang/l1": 32, "lang/l2": 32, "vision/h": need}), base)
    return placed(p), [(x.job, x.by, x.reason) for x in p.preemptions]


def test_a_cohort_mate_within_its_own_quota_is_not_preempted_to_make_room() -> None:
    where, preempted = _plan(64)
    assert preempted == [] and "vision/h" not in where and set(where) == {"lang/l1", "lang/l2"}


def test_what_a_cohort_mate_borrows_is_still_reclaimed() -> None:
    where, preempted = _plan(32)
    assert len(preempted) == 1 and preempted[0][1:] == (
        "vision/h", "preempted by vision/h (priority 100): reclaiming nvidia-h100-80gb quota that team lang "
                    "borrowed"), preempted
    assert "vision/h" in where


def test_a_quota_reason_names_a_cohort_mate_that_borrows_an_accelerator_it_has_no_quota_of() -> None:
    """lang has no H100 quota and runs l1 (32 GPUs, all borrowed from vision's nominal 64); vision runs `a` (32) and
    asks 32 more for `h`, with reclaim off. Before the forty-first session's review, the reason said vision's
    quota was "lent to cohort-mates ()" and named only `a` as holding it: `borrowers` listed only teams with a
    quota of the accelerator. It also said "reclaiming them needs preemption", with reclaim off."""
    from builders import TEAMS

    teams = TEAMS.replace("      tpu-v5p: {nominal: 128}\n      nvidia-h100-80gb: {nominal: 32}\n",
                          "      tpu-v5p: {nominal: 128}\n")
    assert teams != TEAMS

    never = PRIO.replace("reclaim_within_cohort: any", "reclaim_within_cohort: never")
    mine = {"lang/l1": 32, "vision/a": 32}
    files = {"policies/teams.yaml": teams, "policies/priorities.yaml": never}
    base = plan(_repo(mine, files))
    p = plan(_repo({**mine, "vision/h": 32}, files), base)
    (why,) = [r for q in p.pending if q.job == "vision/h" for r in q.reasons if "quota" in r]
    assert "are lent to cohort-mates (lang borrows 32)" in why and "held by lang/l1 (32 GPUs), vision/a" in why, why
    # and with reclaim off, the reason does not send the reader to preemption (it said "reclaiming them needs
    # preemption", which the policy rules out)
    assert "policies/priorities.yaml does not reclaim them (reclaim_within_cohort: never)" in why, why


def test_a_cohort_mate_borrowing_only_by_work_this_plan_starts_is_not_preempted() -> None:
    """lang runs `p` (32 GPUs: its nominal quota), vision `k` (24) and `m` (2): the 8 nodes are used. lang's new
    `s` (2 GPUs, research as `p`) is placed beside `m`, so lang borrows 2; vision's new low-priority `n` (8 GPUs;
    reclaim is `any`) lacks room, not quota. Before the forty-second session the plan preempted `p` "reclaiming
    ... quota that team lang borrowed": lang borrowed only by `s`, which Kueue, its candidate before `p` (of no
    higher priority, admitted later), evicts first, and then finds lang borrowing nothing (review finding)."""
    low = {"jobs/vision/n.yaml": job("n", team="vision", count=8, body="duration_hours: 20\npriority: low\n")}
    running = {"lang/p": 32, "vision/k": 24, "vision/m": 2}
    base = plan(_repo(running))
    assert sorted(x.job for x in base.placements) == ["lang/p", "vision/k", "vision/m"]
    p = plan(_repo({**running, "lang/s": 2, "vision/n": 8}, low), base)
    assert [(x.job, x.by) for x in p.preemptions] == []
    assert set(placed(p)) == {"lang/p", "vision/k", "vision/m", "lang/s"}
