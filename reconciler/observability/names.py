"""The names of Fleet's metrics and the queue-wait histogram's bucket edges. Pure.

One module that the metrics (`metrics.py`), the alerting and recording rules (`rules.py`) and the dashboard
(`dashboard.py`) all read, so a rule or a panel can only name a metric that exists (a test checks every
expression against a real exposition).

Only what Kueue, DCGM and kube-state-metrics do not export: Fleet's priority classes, pools, plan, prices
and budgets are Fleet's own concepts, so the metrics carry them as labels; per-GPU utilisation and health
(DCGM exporter), ClusterQueue usage and Kueue's own wait histograms (Kueue), and pod/node objects
(kube-state-metrics) are left to those exporters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

PREFIX = "fleet_"

JOBS = "fleet_jobs"                                     # gauge {phase, priority_class}: observed
PLAN_JOBS = "fleet_plan_jobs"                           # gauge {state: placed|pending|preempted, priority_class}
QUEUE_WAIT = "fleet_queue_wait_seconds"                 # histogram {priority_class}: creation to admission
QUEUE_OLDEST = "fleet_queue_oldest_wait_seconds"        # gauge {priority_class}: longest wait still queued
POOL_UNITS = "fleet_pool_units"                # gauge {cluster, pool, state: planned|ready|unhealthy|occupied}
ACCELERATORS = "fleet_accelerators"            # gauge {cluster, pool, accelerator, state: planned|ready|allocated}
COST = "fleet_cost_hourly_usd"                          # gauge {team, cluster, source: planned|running}
IDLE_COST = "fleet_idle_cost_hourly_usd"                # gauge {cluster}: planned capacity no job occupies
BUDGET = "fleet_team_budget_monthly_usd"                # gauge {team}
DRIFT_JOBS = "fleet_drift_jobs"                         # gauge {cluster, kind: missing|unexpected|misplaced}
DRIFT_UNITS = "fleet_drift_pool_units"                  # gauge {cluster, pool}: planned minus observed units
IMPOSTORS = "fleet_impostor_objects"                    # gauge {cluster}: Fleet-labelled, outside its team's namespace
CLUSTER_REACHABLE = "fleet_cluster_reachable"           # gauge {cluster}: 1 read (ok or degraded), 0 unreachable
SNAPSHOT_TIME = "fleet_snapshot_timestamp_seconds"      # gauge: observed_at of the last snapshot
ACCELERATOR_HOURS = "fleet_job_accelerator_hours"       # counter {priority_class}: accelerator-hours of admitted jobs
LOST_HOURS = "fleet_lost_accelerator_hours"             # counter {priority_class}: work lost since a checkpoint
FAILOVERS = "fleet_failovers"                           # counter {cluster}: a lost cluster's jobs placed elsewhere
PREEMPTIONS = "fleet_preemptions"                       # counter {priority_class}: jobs Fleet preempted
MIGRATIONS = "fleet_migrations"                         # counter {priority_class}: jobs Fleet moved
CYCLE_DURATION = "fleet_reconcile_cycle_duration_seconds"   # histogram
CYCLES = "fleet_reconcile_cycles"                       # counter {result: ok|error}
ACTIONS = "fleet_reconcile_actions"                     # counter {action}
LAST_SUCCESS = "fleet_reconcile_last_success_timestamp_seconds"   # gauge
ROLLOUT_ROBOTS = "fleet_rollout_robots"        # gauge {fleet, deployment, wave, state}: robots of a wave by state
ROLLOUT_PHASE = "fleet_rollout_phase"          # gauge {fleet, deployment, phase}: 1 for the rollout's phase
ROLLOUT_WAVE_AGE = "fleet_rollout_wave_age_seconds"        # gauge {fleet, deployment, wave}: the rolling wave's age
ROLLOUT_WAVE_DEADLINE = "fleet_rollout_wave_deadline_seconds"   # gauge {...}: its soak plus health timeout
ROLLOUT_EVENTS = "fleet_rollout_events"        # counter {fleet, deployment, kind}: transitions of rollouts
ROBOT_HEALTHY = "fleet_robot_healthy"          # gauge {fleet, robot}: 1 healthy, 0 not (failed or unknown)
ROBOT_HEARTBEAT = "fleet_robot_heartbeat_timestamp_seconds"   # gauge {fleet, robot}: its last status

COUNTERS = (ACCELERATOR_HOURS, LOST_HOURS, FAILOVERS, PREEMPTIONS, MIGRATIONS, CYCLES, ACTIONS, ROLLOUT_EVENTS)
"""prometheus-client exposes each counter as `<name>_total` (and `<name>_created`)."""

KUEUE_WAIT_BUCKETS_S: tuple[float, ...] = (1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240)
"""Kueue's `kueue_admission_wait_time_seconds` buckets: `generateExponentialBuckets(14)` =
`append([]float64{1}, prometheus.ExponentialBuckets(2.5, 2, 13)...)` in kubernetes-sigs/kueue
`pkg/metrics/metrics.go` (commit 0062126395f37f2caa749c7bfdd467e9ecdead2c). Every edge is one of ours too,
so a threshold read on Kueue's histogram reads the same on Fleet's."""

FLEET_WAIT_BUCKETS_S: tuple[float, ...] = (60, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400,
                                           172800, 604800)
"""Edges past Kueue's 2.8 hours and at round minutes (ML jobs wait for hours and days), so SLO thresholds such
as 30 minutes, 1, 4 or 24 hours are edges without being declared."""


def wait_buckets(extra_s: tuple[float, ...] = ()) -> tuple[float, ...]:
    """Kueue's edges, Fleet's, and `extra_s` (the queue-wait thresholds of `policies/slos.yaml`), sorted: a
    latency SLO counts the admissions under its threshold from the bucket whose edge is the threshold."""
    return tuple(sorted({float(b) for b in (*KUEUE_WAIT_BUCKETS_S, *FLEET_WAIT_BUCKETS_S, *extra_s)}))


def le(seconds: float) -> str:
    """The `le` label value prometheus-client writes for a bucket edge (Go's float format, e.g. `1800.0`),
    which is also how Prometheus 3 normalises classic-histogram edges."""
    from prometheus_client import utils

    go_format = cast(Callable[[float], str], utils.floatToGoString)     # the client's own (untyped) formatter
    return go_format(seconds)
