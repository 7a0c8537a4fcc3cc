"""`FleetMetrics`: Fleet's Prometheus metrics, on a registry of its own.  EFFECT (network: `serve` only).

Everything but `serve` is pure bookkeeping: the reconcile loop (or `fleet status --format prometheus`) passes
its inputs in, and the registry holds the numbers; nothing reads a clock, the environment or a global
registry (two `FleetMetrics` never share a series, so tests and the loop can each have one).

    m = FleetMetrics(slos)                       # slos: the queue-wait thresholds become bucket edges
    m.update(validated, snapshot, plan, now)     # each cycle: jobs, pools, cost, drift, queue waits
    m.cycle(duration_s, ok=True, actions={"start": 2}, now=now)
    m.failover("gke-use5"); m.preemption("research"); m.migration("production"); m.lost_work("production", 96.0)
    m.serve(9090)                                # loopback, bounded; or m.exposition() for the text

What `update` sets, from the snapshot and the plan (names in `names.py`; the README lists them):
- gauges of the present, rewritten whole each update so a job, pool or team that is gone leaves no stale
  series: jobs by phase and priority class (every phase x class, zeros included, so alerts see 0, not
  nothing); the plan's placed/pending/preempted jobs; the longest wait still queued; pool units planned,
  ready, unhealthy and occupied; accelerators planned, ready and allocated; cost per hour by team and
  cluster (planned, and what runs), idle cost, budgets; drift; which clusters could be read; impostors
  (objects with Fleet's labels outside their team's namespace, per cluster: never acted on).
- the queue-wait histogram: one observation per admission, the first time an update sees it (a Workload's
  Admitted transition, keyed by cluster, namespace, name and transition time, so a re-admission after an
  eviction counts again and a snapshot read twice, or a cluster read again after it was unreachable, does
  not); the wait runs from creation, or from Kueue's `Requeued` transition when that is later, to
  admission, as Kueue's own histogram measures it.
- accelerator-hours held per class: the accelerators of admitted and running jobs x the hours since the last
  update (the denominator of goodput; `lost_work` is the numerator of its complement).
"""

from __future__ import annotations

import socket
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ..observe.model import Phase, Snapshot, Workload
from ..plan.types import Plan
from ..status import ACTIVE, StatusReport, status
from ..validate import Validated
from . import names as n
from .robot_metrics import RobotMetrics, wave_deadlines
from .slos import SlosDoc

PHASES: tuple[Phase, ...] = ("queued", "admitted", "running", "succeeded", "failed", "evicted", "unknown")
CYCLE_BUCKETS_S = (0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)
"""Reconcile cycle durations: a cycle observes every cluster (about 10 s for 240,000 objects, see
bench_observe), plans and acts; past 10 minutes the loop is not keeping up."""
UNKNOWN_CLASS = "unknown"


LOOPBACK = "127.0.0.1"
MAX_CONNECTIONS = 16
"""Scrapes served at once: Prometheus scrapes one at a time per target; a few more for people and probes."""
CONNECTION_TIMEOUT_S = 10.0
"""Longest wait for a client's next bytes (or for it to take ours): a scrape's request arrives at once."""


class FleetMetrics:
    """Fleet's metrics on their own `CollectorRegistry` (`self.registry`)."""

    def __init__(self, slos: SlosDoc | None = None, *, started: datetime | None = None) -> None:
        """`slos`: its queue-wait thresholds become bucket edges. `started`: when the loop started; until a
        cycle succeeds it stands as the last success, so `FleetReconcilerNotCycling` counts from the start
        (without it the gauge is 0, as `fleet status --format prometheus` leaves it: no loop runs)."""
        self.registry = CollectorRegistry()
        self._seen: set[tuple[str, str, str, datetime]] = set()
        self._last: datetime | None = None
        self.wait_buckets_s = n.wait_buckets(slos.wait_thresholds_s() if slos else ())
        g = self._gauge
        self.jobs = g(n.JOBS, "Jobs Fleet observes, by Kueue phase and priority class", "phase", "priority_class")
        self.plan_jobs = g(n.PLAN_JOBS, "Jobs of the plan: placed, pending or preempted", "state", "priority_class")
        self.queue_wait = Histogram(n.QUEUE_WAIT, "Wait from creation (or requeue) to admission, per admission",
                                    ["priority_class"], buckets=self.wait_buckets_s, registry=self.registry)
        self.queue_oldest = g(n.QUEUE_OLDEST, "Longest wait of a job still queued or evicted", "priority_class")
        self.pool_units = g(n.POOL_UNITS, "Units (TPU slices or nodes) of a pool: planned (the plan's target), "
                            "ready, unhealthy, occupied by admitted jobs", "cluster", "pool", "state")
        self.accelerators = g(n.ACCELERATORS, "Accelerators of a pool: planned, ready, allocated to admitted jobs",
                              "cluster", "pool", "accelerator", "state")
        self.cost = g(n.COST, "Cost per hour of the jobs a team has on a cluster: planned, or running (observed)",
                      "team", "cluster", "source")
        self.idle_cost = g(n.IDLE_COST, "Cost per hour of planned capacity no job occupies", "cluster")
        self.budget = g(n.BUDGET, "A team's budget_monthly_usd (policies/teams.yaml)", "team")
        self.drift_jobs = g(n.DRIFT_JOBS, "Jobs where what runs differs from the plan: missing (planned, not "
                            "running), unexpected (running, not planned), misplaced (running elsewhere)",
                            "cluster", "kind")
        self.drift_units = g(n.DRIFT_UNITS, "A pool's planned units minus the units observed", "cluster", "pool")
        self.reachable = g(n.CLUSTER_REACHABLE, "1 when the cluster could be read (ok or degraded), 0 when not",
                           "cluster")
        self.impostors = g(n.IMPOSTORS, "Objects with Fleet's labels outside the namespace of the team they name "
                           "(observe/owners.py): ignored, never acted on", "cluster")
        self.snapshot_time = g(n.SNAPSHOT_TIME, "When the last snapshot was observed (Unix seconds)")
        c = self._counter
        self.accelerator_hours = c(n.ACCELERATOR_HOURS, "Accelerator-hours held by admitted jobs", "priority_class")
        self.lost_hours = c(n.LOST_HOURS, "Accelerator-hours of work lost to disruptions (since the last "
                            "checkpoint of each job stopped, preempted or moved)", "priority_class")
        self.failovers = c(n.FAILOVERS, "Times a lost cluster's jobs were placed elsewhere", "cluster")
        self.preemptions = c(n.PREEMPTIONS, "Jobs Fleet's plans preempted", "priority_class")
        self.migrations = c(n.MIGRATIONS, "Jobs Fleet's plans moved to another pool or cluster", "priority_class")
        self.cycles = c(n.CYCLES, "Reconcile cycles, by result", "result")
        self.actions = c(n.ACTIONS, "Actions the reconcile loop took, by kind", "action")
        self.cycle_duration = Histogram(n.CYCLE_DURATION, "Duration of a reconcile cycle", buckets=CYCLE_BUCKETS_S,
                                        registry=self.registry)
        self.last_success = g(n.LAST_SUCCESS, "When the last reconcile cycle succeeded (Unix seconds)")
        for result in ("ok", "error"):
            self.cycles.labels(result)
        if started is not None:
            self.last_success.set(started.timestamp())
        self.robots = RobotMetrics(self.registry)      # fleet_rollout_*, fleet_robot_* (robot_metrics.py)

    def _gauge(self, name: str, doc: str, *labels: str) -> Gauge:
        return Gauge(name, doc, labels, registry=self.registry)

    def _counter(self, name: str, doc: str, *labels: str) -> Counter:
        return Counter(name, doc, labels, registry=self.registry)

    # --- the loop's events ---------------------------------------------------------------------------------

    def cycle(self, duration_s: float, ok: bool, actions: Mapping[str, int] | Iterable[str] = (), *,
              now: datetime) -> None:
        """One reconcile cycle ended: its duration, result, the actions it took (kind -> count, or one kind
        per action) and, when it succeeded, `now` as the last successful cycle."""
        self.cycle_duration.observe(max(0.0, duration_s))
        self.cycles.labels("ok" if ok else "error").inc()
        counts = actions if isinstance(actions, Mapping) else _tally(actions)
        for kind, count in sorted(counts.items()):
            self.actions.labels(kind).inc(count)
        if ok:
            self.last_success.set(now.timestamp())

    def failover(self, cluster: str, count: int = 1) -> None:
        self.failovers.labels(cluster).inc(count)

    def preemption(self, priority_class: str, count: int = 1) -> None:
        self.preemptions.labels(priority_class).inc(count)

    def migration(self, priority_class: str, count: int = 1) -> None:
        self.migrations.labels(priority_class).inc(count)

    def lost_work(self, priority_class: str, accelerator_hours: float) -> None:
        """Work a disruption destroyed: accelerators x hours since the job's last checkpoint."""
        self.lost_hours.labels(priority_class).inc(max(0.0, accelerator_hours))

    # --- state ---------------------------------------------------------------------------------------------

    def update(self, v: Validated, snapshot: Snapshot | None, plan: Plan, now: datetime) -> None:
        """Set every gauge from the repository, the plan and (when there is one) the snapshot at `now`.
        1. the plan's jobs, pools and cost  2. budgets  3. with a snapshot: what runs, drift, queue waits
        4. accelerator-hours held since the last update."""
        classes = _classes(v)
        for gauge in (self.jobs, self.plan_jobs, self.queue_oldest, self.pool_units, self.accelerators, self.cost,
                      self.idle_cost, self.budget, self.drift_jobs, self.drift_units, self.reachable, self.impostors):
            gauge.clear()
        for cls in classes:
            self.accelerator_hours.labels(cls)
            self.lost_hours.labels(cls)
            self.queue_wait.labels(cls)
        self._plan(v, plan, classes)
        teams = v.loaded.teams.teams if v.loaded.teams is not None else ()
        for t in sorted(teams, key=lambda t: t.name):
            if t.budget_monthly_usd is not None:
                self.budget.labels(t.name).set(t.budget_monthly_usd)
        if snapshot is not None:
            self.robots.update(snapshot.robots, wave_deadlines(v.loaded), now)
            report = status(v, snapshot, plan)
            self._observed(v, snapshot, report, plan, classes, now)
        self._last = now

    def _plan(self, v: Validated, plan: Plan, classes: tuple[str, ...]) -> None:
        of = _class_of(v)
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for state, jobs in (("placed", {p.job for p in plan.placements}), ("pending", {p.job for p in plan.pending}),
                            ("preempted", {p.job for p in plan.preemptions})):   # jobs, as `Plan.counts`
            for cls in classes:
                counts[(state, cls)] += 0
            for job in jobs:
                counts[(state, of.get(job, UNKNOWN_CLASS))] += 1
        for (state, cls), count in sorted(counts.items()):
            self.plan_jobs.labels(state, cls).set(count)
        acc = {p.key: p.accelerator for p in v.pools}
        for p in plan.pools:
            self.pool_units.labels(p.cluster, p.pool, "planned").set(p.target)
            self.accelerators.labels(p.cluster, p.pool, acc.get(f"{p.cluster}/{p.pool}", ""), "planned").set(
                p.target * p.unit_accelerators)
        cost: dict[tuple[str, str], float] = defaultdict(float)
        for pl in plan.placements:
            cost[(pl.job.split("/")[0], pl.cluster)] += pl.hourly_usd
        for (team, cluster), usd in sorted(cost.items()):
            self.cost.labels(team, cluster, "planned").set(round(usd, 6))
        paid: dict[str, float] = defaultdict(float)
        for p in plan.pools:
            paid[p.cluster] += p.hourly_usd
        for cluster, usd in sorted(paid.items()):
            used = sum(u for (_, c), u in cost.items() if c == cluster)
            self.idle_cost.labels(cluster).set(round(max(0.0, usd - used), 6))

    def _observed(self, v: Validated, snap: Snapshot, report: StatusReport, plan: Plan, classes: tuple[str, ...],
                  now: datetime) -> None:
        of = {**_observed_classes(snap, _class_by_value(v)), **_class_of(v)}
        self.snapshot_time.set(snap.observed_at.timestamp())
        for c in snap.clusters:
            self.reachable.labels(c.name).set(0 if c.status == "unreachable" else 1)
        for cs in report.clusters:
            self.impostors.labels(cs.cluster).set(len(cs.impostors))
        counts: dict[tuple[str, str], int] = {(ph, cls): 0 for ph in PHASES for cls in classes}
        held: dict[str, float] = defaultdict(float)
        allocated: dict[tuple[str, str], int] = defaultdict(int)
        running: dict[tuple[str, str], float] = defaultdict(float)
        active: dict[str, tuple[str, str]] = {}
        for j in report.jobs:
            cls = of.get(j.job, UNKNOWN_CLASS)
            counts[(j.phase, cls)] = counts.get((j.phase, cls), 0) + 1
            if j.phase in ACTIVE and j.cluster is not None:
                active[j.job] = (j.cluster, j.pool or "")
                held[cls] += j.accelerators or 0
                allocated[(j.cluster, j.pool or "")] += j.accelerators or 0
                running[(j.job.split("/")[0], j.cluster)] += j.hourly_usd or 0.0
        for (phase, cls), count in sorted(counts.items()):
            self.jobs.labels(phase, cls).set(count)
        for (team, cluster), usd in sorted(running.items()):
            self.cost.labels(team, cluster, "running").set(round(usd, 6))
        pools = {p.key: p for p in v.pools}
        planned_units = {(p.cluster, p.pool): p.target for p in plan.pools}
        for ps in report.pools:
            if not ps.observed:
                continue
            rp = pools[f"{ps.cluster}/{ps.pool}"]
            for state, units in (("ready", ps.ready), ("unhealthy", ps.unhealthy), ("occupied", ps.used)):
                self.pool_units.labels(ps.cluster, ps.pool, state).set(units)
            self.accelerators.labels(ps.cluster, ps.pool, rp.accelerator, "ready").set(ps.ready * rp.unit_accelerators)
            self.accelerators.labels(ps.cluster, ps.pool, rp.accelerator, "allocated").set(
                allocated[(ps.cluster, ps.pool)])
            self.drift_units.labels(ps.cluster, ps.pool).set(planned_units.get((ps.cluster, ps.pool), 0) - ps.units)
        self._drift(plan, active, [c.name for c in snap.clusters])
        self._queue(snap, of, classes, now)
        if self._last is not None and now > self._last:
            hours = (now - self._last).total_seconds() / 3600
            for cls, accelerators in sorted(held.items()):
                self.accelerator_hours.labels(cls).inc(accelerators * hours)

    def _drift(self, plan: Plan, active: Mapping[str, tuple[str, str]], clusters: list[str]) -> None:
        drift = {(c, kind): 0 for c in clusters for kind in ("missing", "unexpected", "misplaced")}
        planned = {p.job: (p.cluster, p.pool) for p in plan.placements}
        for job, (cluster, _pool) in planned.items():
            if job not in active:
                drift[(cluster, "missing")] = drift.get((cluster, "missing"), 0) + 1
        for job, (cluster, pool) in active.items():
            kind = "unexpected" if job not in planned else "misplaced" if planned[job] != (cluster, pool) else ""
            if kind:
                drift[(cluster, kind)] = drift.get((cluster, kind), 0) + 1
        for (cluster, kind), count in sorted(drift.items()):
            self.drift_jobs.labels(cluster, kind).set(count)

    def _queue(self, snap: Snapshot, of: Mapping[str, str], classes: tuple[str, ...], now: datetime) -> None:
        oldest = dict.fromkeys(classes, 0.0)
        seen: set[tuple[str, str, str, datetime]] = set()
        for c in snap.clusters:
            jobs = {(js.namespace, js.name): js.job_id or f"{js.namespace}/{js.name}" for js in c.jobsets}
            for w in c.workloads:
                cls = of.get(jobs.get((w.namespace, w.jobset or "")) or f"{w.namespace}/{w.name}", UNKNOWN_CLASS)
                start = _wait_start(w)
                admitted = w.condition("Admitted")
                if admitted is not None and admitted.status == "True" and admitted.since is not None:
                    key = (c.name, w.namespace, w.name, admitted.since)
                    seen.add(key)
                    if key not in self._seen and start is not None:
                        self.queue_wait.labels(cls).observe(max(0.0, (admitted.since - start).total_seconds()))
                elif w.phase() in ("queued", "evicted") and start is not None:
                    oldest[cls] = max(oldest.get(cls, 0.0), (now - start).total_seconds())
        # Remember only what this snapshot holds (the set does not grow without bound), but keep what was seen
        # on clusters whose Workloads could not be read now: when they come back, their admissions are old news.
        unread = {c.name for c in snap.clusters
                  if c.status == "unreachable" or any(p.resource == "workloads" for p in c.problems)}
        self._seen = seen | {k for k in self._seen if k[0] in unread or snap.cluster(k[0]) is None}
        for cls, seconds in sorted(oldest.items()):
            self.queue_oldest.labels(cls).set(max(0.0, seconds))

    # --- output --------------------------------------------------------------------------------------------

    def exposition(self) -> str:
        """The Prometheus text format of every metric (what a scrape of `serve` returns)."""
        return generate_latest(self.registry).decode()

    def serve(self, port: int, addr: str = LOOPBACK, *, max_connections: int = MAX_CONNECTIONS,
              timeout_s: float = CONNECTION_TIMEOUT_S) -> tuple[MetricsServer, threading.Thread]:
        """EFFECT: serve the registry over HTTP (`GET /metrics`) on `addr:port` from a daemon thread; returns
        its (server, thread). Loopback unless `addr` says otherwise (`fleet reconcile --metrics-address`); at
        most `max_connections` at once (one more is closed at once, unanswered) and `timeout_s` for each read
        and write of one, so connections that never finish a request cannot exhaust threads or descriptors:
        the server keeps answering scrapes."""
        server = MetricsServer((addr, port), self.registry, max_connections=max_connections, timeout_s=timeout_s)
        thread = threading.Thread(target=server.serve_forever, name="fleet-metrics", daemon=True)
        thread.start()
        return server, thread


class _Handler(BaseHTTPRequestHandler):
    """`GET /metrics` (or `/`): the registry's exposition; anything else 404. No request logging."""

    registry: CollectorRegistry
    server_version = "fleet-metrics"

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] not in ("/metrics", "/"):
            self.send_error(404, "only /metrics is served")
            return
        body = generate_latest(self.registry)
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE_LATEST)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


class MetricsServer(ThreadingHTTPServer):
    """A threading HTTP server with a bound on the connections it serves at once and a timeout on each
    socket read and write. A connection beyond the bound is closed without a thread; a client that sends
    nothing (a half-open connection) is dropped after the timeout."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], registry: CollectorRegistry, *, max_connections: int,
                 timeout_s: float) -> None:
        handler = type("Handler", (_Handler,), {"registry": registry, "timeout": timeout_s})
        self.slots = threading.BoundedSemaphore(max_connections)
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):    # full: close this one now, keep serving the others
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def _tally(kinds: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for k in kinds:
        out[k] += 1
    return out


def _classes(v: Validated) -> tuple[str, ...]:
    prio = v.loaded.priorities
    return tuple(sorted(c.name for c in prio.classes)) if prio is not None else ()


def _class_of(v: Validated) -> dict[str, str]:
    """job id -> its priority class (the job's, else the default)."""
    prio = v.loaded.priorities
    default = prio.default if prio is not None else UNKNOWN_CLASS
    return {j.id: j.priority or default for j in v.loaded.jobs}


def _class_by_value(v: Validated) -> dict[int, str]:
    """Kueue's Workload priority value -> the class (for Workloads of jobs not in jobs/)."""
    prio = v.loaded.priorities
    return {c.value: c.name for c in prio.classes} if prio is not None else {}


def _observed_classes(snap: Snapshot, by_value: Mapping[int, str]) -> dict[str, str]:
    """job id -> class by the Workload's priority value, for what runs but is not in jobs/ (the id as
    `fleet status` names it: the JobSet's labels, else namespace/Workload name)."""
    out: dict[str, str] = {}
    for c in snap.clusters:
        jobs = {(js.namespace, js.name): js.job_id or f"{js.namespace}/{js.name}" for js in c.jobsets}
        for w in c.workloads:
            if w.priority is not None and w.priority in by_value:
                out[jobs.get((w.namespace, w.jobset or "")) or f"{w.namespace}/{w.name}"] = by_value[w.priority]
    return out


def _wait_start(w: Workload) -> datetime | None:
    """Creation, or Kueue's later `Requeued` transition (an evicted Workload waits again from there)."""
    requeued = w.condition("Requeued")
    starts = [t for t in (w.created_at, requeued.since if requeued is not None else None) if t is not None]
    return max(starts) if starts else None
