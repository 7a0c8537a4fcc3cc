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

from builders import job, with_files


def _plan(need: int) -> tuple[dict[str, tuple[int, ...]], list[tuple[str, str, str]]]:
    running = {"l1": (32, "duration_hours: 20\n"), "l2": (32, "duration_hours: 20\n")}
    base = plan(fleet(running, nodes=8, team="lang"))
    v = check(with_files({"policies/priorities.yaml": PRIO,
                          "fleet/clusters/gke-usc1.yaml": CLUSTER.replace("NODES", "8"),
                          "fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/train.yaml": None,
                          **{f"jobs/lang/{n}.yaml": job(n, team="lang", count=32, body="duration_hours: 20\n")
                             for n in ("l1", "l2")},
                          "jobs/vision/h.yaml": job("h", team="vision", count=need, body="duration_hours: 5\n")}),
              load_catalog())
    assert v.ok, v.errors
    p = plan(v, base)
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
