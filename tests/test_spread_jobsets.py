"""A spread service seen as JobSets, one per group with one name (as `fleet simulate` shows a service): every group
that runs is kept where it runs (`LiveInputs.groups`, plan/live.py `live_base`). Before the fortieth session
(2026-12-07) `LiveInputs.running` held one group per job (the last read), and where the base lacked that group
(a plan that had stopped it while it ran on), it replaced every group of the base: the service's other groups,
running, were planned as new and re-created. On generated seed 2 the simulator moved `rl/serve-07249` and
`rl/serve-07901` back and forth so, and a job of team `rl` started on the spend of a group that still ran
(docs/benchmarks.md, fortieth session)."""

from __future__ import annotations

from dataclasses import replace

from test_live import fleet, observed, snapshot, stamped

from reconciler.pipeline import live_inputs, plan

WEB = "name: web\nteam: vision\nkind: inference\nreplicas: 2\nport: 8080\n" \
      "options:\n  - {accelerator: nvidia-h100-80gb, count: 8}\nimage: img:1\n"


def test_every_group_a_spread_service_runs_is_kept_though_the_base_lacks_one() -> None:
    v = fleet({"jobs/vision/web.yaml": WEB, "jobs/vision/pretrain.yaml": None, "jobs/vision/small.yaml": None})
    first = plan(v)
    groups = sorted((p.cluster, p.pool, p.units) for p in first.placements if p.job == "vision/web")
    assert groups == [("gke-usc1", "h100", (0,)), ("onprem-sjc", "h100-owned", (0,))]
    # the base stopped the onprem-sjc group, which still runs; both groups are seen running
    base = replace(first, placements=tuple(p for p in first.placements
                                           if (p.job, p.cluster) != ("vision/web", "onprem-sjc")))
    snap = snapshot(60, *(observed(c, stamped(v, "vision/web", pool, "running", units=u, accel="gpu", per_pod=8))
                          for c, pool, u in groups))
    live = live_inputs(v, snap)
    assert [(r.cluster, r.pool) for r in live.groups["vision/web"]] == [(c, pool) for c, pool, _ in groups]
    p = plan(v, base=base, observed=snap)
    assert sorted((x.cluster, x.pool, x.units, x.status) for x in p.placements if x.job == "vision/web") == [
        ("gke-usc1", "h100", (0,), "kept"), ("onprem-sjc", "h100-owned", (0,), "kept")]
    assert p.pending == () and p.preemptions == ()
    # seen in one group only (the other stopped), it is planned from that one, as before
    one = plan(v, base=base, observed=snapshot(60, observed("onprem-sjc", stamped(
        v, "vision/web", "h100-owned", "running", units=(0,), accel="gpu", per_pod=8))))
    assert "vision/web" not in live_inputs(v, snapshot(60)).groups
    assert ("onprem-sjc", "h100-owned", (0,), "kept") in [(x.cluster, x.pool, x.units, x.status)
                                                          for x in one.placements if x.job == "vision/web"]
