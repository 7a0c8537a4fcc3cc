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

from builders import PRIORITIES, base_files

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
