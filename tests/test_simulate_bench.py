"""Issue 22's benchmark side: a spread service occupies every pool the plan gives it in the simulator, the fleet
sized to a trace (simulate/sizing.py), and bench_simulate.py's parallel runs giving the sequential figures."""

from __future__ import annotations

from test_simulate import line, run, trace

from reconciler.simulate.cluster import READY


def test_a_spread_service_runs_on_every_pool_the_plan_places_it_on() -> None:
    """A service of 2 replicas spreads over two clusters (plan/spread.py: one placement per pool group). The
    simulator placed the job on the last group only: the other group's units were opened by the plan's pool
    target, paid and left empty while the job ran on half its accelerators (seed 1 of the 2,000-job week: 14,101
    unit-cycles of running services' planned units empty past 40 minutes)."""
    tr = trace(line("serve", 0, 4.0, kind="inference", replicas=2, checkpoint_minutes=0, priority="production"))
    sim, doc = run(tr, "fleet", 0.25)
    j = sim.by_id["vision/serve"]
    assert j.state == "done" and doc["jobs"]["completed"] == 1
    assert doc["lost_accelerator_hours"] == 0
    assert round(sim.c.busy_acc_h, 2) == 16 * 4.0            # both replicas, 8 GPUs each, ran 4 hours
    assert round(sim.c.good_acc_h, 2) == 16 * 4.0
    # every paid unit outside the owned pool held the service while it ran: none opened and left empty
    cloud = sim.pools["gke-usc1/h100"]
    assert sum(1 for u in cloud.units if u.state == READY) == 0        # released once the service finished
