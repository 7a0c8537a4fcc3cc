"""FleetMetrics: the `fleet_` metrics from a snapshot, the plan and the loop's events, read back through
prometheus-client's own text parser (what Prometheus scrapes), on a registry of its own; served over HTTP;
and `fleet status --format prometheus`."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kube_objects import T0, job_objects, node
from prometheus_client.parser import text_string_to_metric_families

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.observability import names
from reconciler.observability.metrics import FleetMetrics
from reconciler.observability.slos import SlosDoc
from reconciler.observe.model import ClusterObservation, Snapshot
from reconciler.observe.parse import parse_jobset, parse_node, parse_workload
from reconciler.pipeline import check, plan
from reconciler.plan.types import Plan
from reconciler.validate import Validated

from builders import job, with_files

ROOT = Path(__file__).resolve().parents[1]
START = T0.replace(tzinfo=UTC)
NOW = START + timedelta(hours=4)
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def fleet() -> tuple[Validated, Plan]:
    """The builders' fleet plus a queued-to-be research job and a critical one: the plan puts all three
    on onprem-sjc/h100-owned (4 nodes of 8 H100s)."""
    v = check(with_files({"jobs/lang/small.yaml": job("small", "lang"),
                          "jobs/vision/crit.yaml": job("crit", "vision", "priority: critical\n", count=8)}),
              load_catalog())
    assert v.ok, v.problems
    return v, plan(v)


def cluster(objects: Iterable[dict[str, Any]], name: str = "onprem-sjc", status: str = "ok") -> ClusterObservation:
    objs = list(objects)
    return ClusterObservation(
        name=name, status=status,  # type: ignore[arg-type]
        workloads=tuple(parse_workload(o) for o in objs if o["kind"] == "Workload"),
        jobsets=tuple(parse_jobset(o) for o in objs if o["kind"] == "JobSet"),
        nodes=tuple(parse_node(o) for o in objs if o["kind"] == "Node"))


def snapshot(*clusters: ClusterObservation, at: datetime = NOW) -> Snapshot:
    return Snapshot(observed_at=at, clusters=clusters)


def live(admitted: float = 10, ghost: bool = True) -> ClusterObservation:
    """vision/train running (16 GPUs on two nodes, created at T0, admitted `admitted` minutes later), lang/small
    queued since T0, vision/crit absent, an unplanned `vision/ghost` running; 4 nodes, one NotReady."""
    objs = [*job_objects("vision", "train", "h100-owned", "running", accel="gpu", per_pod=8, replicas=2,
                         admitted=admitted),
            *job_objects("lang", "small", "h100-owned", "queued", accel="gpu", per_pod=1)]
    if ghost:
        objs += job_objects("vision", "ghost", "h100-owned", "running", accel="gpu", per_pod=1)
    objs += [node(f"sjc-{i}", pool="h100-owned", accel="gpu", ready=i != 3) for i in range(4)]
    return cluster(objs)


def samples(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(got: Samples, name: str, **labels: str) -> float:
    return got[(name, tuple(sorted(labels.items())))]


def updated(fleet: tuple[Validated, Plan], snap: Snapshot | None, slos: SlosDoc | None = None) -> FleetMetrics:
    v, p = fleet
    m = FleetMetrics(slos)
    m.update(v, snap, p, snap.observed_at if snap else NOW)
    return m


def test_every_name_is_fleets_and_parses_back(fleet: tuple[Validated, Plan]) -> None:
    got = updated(fleet, snapshot(live())).exposition()
    families = {f.name for f in text_string_to_metric_families(got)}
    declared = {getattr(names, k) for k in dir(names) if k.isupper() and isinstance(getattr(names, k), str)
                and getattr(names, k).startswith("fleet_") and k != "PREFIX"}
    created = {f for f in families if f.endswith("_created")}     # prometheus-client's creation timestamps
    assert families - created == declared
    assert created <= {f"{c}_created" for c in (*names.COUNTERS, names.QUEUE_WAIT, names.CYCLE_DURATION)}


def test_jobs_by_phase_and_priority_class(fleet: tuple[Validated, Plan]) -> None:
    got = samples(updated(fleet, snapshot(live())).exposition())
    jobs = {(dict(k[1])["phase"], dict(k[1])["priority_class"]): v for k, v in got.items() if k[0] == "fleet_jobs"}
    assert jobs[("running", "production")] == 1          # vision/train
    assert jobs[("queued", "research")] == 1             # lang/small (the default class)
    assert jobs[("running", "research")] == 1            # vision/ghost: not in jobs/, class from Kueue's priority
    assert jobs[("unknown", "critical")] == 1            # vision/crit: in git, on no cluster
    assert sum(jobs.values()) == 4
    assert jobs[("failed", "opportunistic")] == 0        # every phase x class is there, zeros included
    plan_jobs = samples(updated(fleet, None).exposition())
    assert value(plan_jobs, "fleet_plan_jobs", state="placed", priority_class="critical") == 1
    assert value(plan_jobs, "fleet_plan_jobs", state="pending", priority_class="production") == 0


def test_queue_wait_is_observed_once_per_admission(fleet: tuple[Validated, Plan]) -> None:
    v, p = fleet
    m = FleetMetrics()
    m.update(v, snapshot(live(admitted=10)), p, NOW)
    m.update(v, snapshot(live(admitted=10)), p, NOW + timedelta(minutes=1))    # the same admission again
    got = samples(m.exposition())
    assert value(got, "fleet_queue_wait_seconds_count", priority_class="production") == 1
    assert value(got, "fleet_queue_wait_seconds_sum", priority_class="production") == 600
    assert value(got, "fleet_queue_wait_seconds_bucket", priority_class="production", le="320.0") == 0
    assert value(got, "fleet_queue_wait_seconds_bucket", priority_class="production", le="600.0") == 1
    m.update(v, snapshot(cluster([], status="unreachable")), p, NOW + timedelta(minutes=2))
    m.update(v, snapshot(live(admitted=10)), p, NOW + timedelta(minutes=3))    # back: nothing new admitted
    assert value(samples(m.exposition()), "fleet_queue_wait_seconds_count", priority_class="production") == 1
    m.update(v, snapshot(live(admitted=50)), p, NOW + timedelta(minutes=4))    # admitted again (re-admission)
    got = samples(m.exposition())
    assert value(got, "fleet_queue_wait_seconds_count", priority_class="production") == 2
    assert value(got, "fleet_queue_wait_seconds_bucket", priority_class="production", le="1800.0") == 1
    assert value(got, "fleet_queue_wait_seconds_bucket", priority_class="production", le="5120.0") == 2
    # lang/small has waited since T0, four hours before NOW
    assert value(got, "fleet_queue_oldest_wait_seconds", priority_class="research") == 4 * 3600 + 240


def test_buckets_hold_kueues_edges_and_the_slo_thresholds(fleet: tuple[Validated, Plan]) -> None:
    slos = SlosDoc.model_validate({"objectives": [{"name": "w", "priority_class": "research",
                                                   "queue_wait": {"percentile": 99, "under_minutes": 45}}]})
    got = samples(updated(fleet, snapshot(live()), slos).exposition())
    edges = {float(dict(k[1])["le"]) for k in got if k[0] == "fleet_queue_wait_seconds_bucket"}
    assert set(names.KUEUE_WAIT_BUCKETS_S) <= edges
    assert {1.0, 2.5, 10240.0, 1800.0, 2700.0, float("inf")} <= edges
    assert 2700.0 not in {float(dict(k[1])["le"]) for k in samples(updated(fleet, snapshot(live())).exposition())
                          if k[0] == "fleet_queue_wait_seconds_bucket"}


def test_pools_accelerators_and_drift(fleet: tuple[Validated, Plan]) -> None:
    got = samples(updated(fleet, snapshot(live())).exposition())
    pool = {"cluster": "onprem-sjc", "pool": "h100-owned"}
    assert [value(got, "fleet_pool_units", **pool, state=s) for s in ("planned", "ready", "unhealthy", "occupied")] \
        == [4, 3, 1, 2]     # occupied: train's 2 nodes (ghost is not in jobs/: its size is unknown)
    acc = {**pool, "accelerator": "nvidia-h100-80gb"}
    assert [value(got, "fleet_accelerators", **acc, state=s) for s in ("planned", "ready", "allocated")] == [32, 24, 16]
    assert value(got, "fleet_drift_jobs", cluster="onprem-sjc", kind="missing") == 2       # crit, small (queued)
    assert value(got, "fleet_drift_jobs", cluster="onprem-sjc", kind="unexpected") == 1    # ghost
    assert value(got, "fleet_drift_jobs", cluster="onprem-sjc", kind="misplaced") == 0
    assert value(got, "fleet_drift_pool_units", **pool) == 0
    assert ("fleet_pool_units", (("cluster", "gke-usc1"), ("pool", "h100"), ("state", "ready"))) not in got


def test_cost_against_plan_and_budget(fleet: tuple[Validated, Plan]) -> None:
    got = samples(updated(fleet, snapshot(live())).exposition())
    assert value(got, "fleet_cost_hourly_usd", team="vision", cluster="onprem-sjc", source="planned") == 120
    assert value(got, "fleet_cost_hourly_usd", team="lang", cluster="onprem-sjc", source="planned") == 5
    assert value(got, "fleet_cost_hourly_usd", team="vision", cluster="onprem-sjc", source="running") == 80
    assert value(got, "fleet_idle_cost_hourly_usd", cluster="onprem-sjc") == 35
    assert value(got, "fleet_team_budget_monthly_usd", team="vision") == 5_000_000
    assert value(got, "fleet_cluster_reachable", cluster="onprem-sjc") == 1


def test_a_lost_cluster_and_what_goes_away(fleet: tuple[Validated, Plan]) -> None:
    v, p = fleet
    m = FleetMetrics()
    m.update(v, snapshot(live()), p, NOW)
    m.update(v, snapshot(cluster([], status="unreachable")), p, NOW + timedelta(minutes=1))
    got = samples(m.exposition())
    assert value(got, "fleet_cluster_reachable", cluster="onprem-sjc") == 0
    assert not [k for k in got if k[0] == "fleet_cost_hourly_usd" and ("source", "running") in k[1]]
    assert not [k for k in got if k[0] == "fleet_pool_units" and ("state", "ready") in k[1]]   # not observed
    assert value(got, "fleet_drift_jobs", cluster="onprem-sjc", kind="missing") == 3


def test_loop_events_and_accelerator_hours(fleet: tuple[Validated, Plan]) -> None:
    v, p = fleet
    m = FleetMetrics(started=START)
    assert value(samples(m.exposition()), names.LAST_SUCCESS) == START.timestamp()
    m.update(v, snapshot(live(ghost=False)), p, NOW)
    m.update(v, snapshot(live(ghost=False)), p, NOW + timedelta(minutes=30))   # 16 GPUs held for half an hour
    m.cycle(2.0, True, {"start": 2, "resize": 1}, now=NOW)
    m.cycle(700.0, False, ["start"], now=NOW + timedelta(minutes=5))
    m.failover("gke-usc1")
    m.preemption("research", 3)
    m.migration("production")
    m.lost_work("production", 12.5)
    got = samples(m.exposition())
    assert value(got, "fleet_job_accelerator_hours_total", priority_class="production") == 8
    assert value(got, "fleet_job_accelerator_hours_total", priority_class="critical") == 0
    assert value(got, "fleet_lost_accelerator_hours_total", priority_class="production") == 12.5
    assert value(got, "fleet_reconcile_cycles_total", result="ok") == 1
    assert value(got, "fleet_reconcile_cycles_total", result="error") == 1
    assert value(got, "fleet_reconcile_actions_total", action="start") == 3
    assert value(got, "fleet_reconcile_actions_total", action="resize") == 1
    assert value(got, names.LAST_SUCCESS) == NOW.timestamp()                 # the failed cycle did not move it
    assert value(got, "fleet_reconcile_cycle_duration_seconds_bucket", le="2.5") == 1
    assert value(got, "fleet_reconcile_cycle_duration_seconds_count") == 2
    assert value(got, "fleet_failovers_total", cluster="gke-usc1") == 1
    assert value(got, "fleet_preemptions_total", priority_class="research") == 3
    assert value(got, "fleet_migrations_total", priority_class="production") == 1


def test_each_instance_has_its_own_registry(fleet: tuple[Validated, Plan]) -> None:
    a, b = FleetMetrics(), FleetMetrics()
    a.failover("gke-usc1")
    assert ("fleet_failovers_total", (("cluster", "gke-usc1"),)) not in samples(b.exposition())


def test_serve_answers_a_scrape(fleet: tuple[Validated, Plan]) -> None:
    m = updated(fleet, snapshot(live()))
    server, thread = m.serve(0, addr="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as r:
            body = r.read().decode()
    finally:
        server.shutdown()
        thread.join(timeout=10)
    assert value(samples(body), "fleet_jobs", phase="running", priority_class="production") == 1


def test_status_prints_the_exposition(tmp_path: Path) -> None:
    """`fleet status --observed FILE --format prometheus` on the example: the same text FleetMetrics gives."""
    pl = next(p for p in plan(check(_example(), load_catalog())).placements if p.cluster == "onprem-sjc")
    team, name = pl.job.split("/")
    snap = snapshot(cluster(job_objects(team, name, pl.pool, "running", accel="gpu", per_pod=1)))
    path = tmp_path / "snap.json"
    path.write_text(snap.to_json())
    r = CliRunner().invoke(cli, ["status", "--repo", str(ROOT), "--observed", str(path), "--format", "prometheus"])
    assert r.exit_code == 0, r.output
    got = samples(r.output)
    assert sum(v for k, v in got.items() if k[0] == "fleet_jobs" and ("phase", "running") in k[1]) == 1
    assert value(got, "fleet_cluster_reachable", cluster="onprem-sjc") == 1
    assert value(got, names.SNAPSHOT_TIME) == NOW.timestamp()
    edges = {dict(k[1])["le"] for k in got if k[0] == "fleet_queue_wait_seconds_bucket"}
    assert {"600.0", "1800.0", "14400.0"} <= edges                   # the example's SLO thresholds


def _example() -> dict[str, bytes]:
    from reconciler.sources import read_worktree

    return read_worktree(ROOT)
