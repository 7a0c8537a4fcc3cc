"""`monitoring/grafana-dashboard.json`: one Grafana dashboard over Fleet's metrics and SLO recording rules,
built with Grafana's own builder library (grafana-foundation-sdk, generated from Grafana's schemas and kept
in step with them by Grafana Labs; grafanalib, the older choice, last released in January 2024). Pure and
deterministic: panel ids in order, keys sorted.

Rows: jobs and queue waits by priority class; SLOs (when `policies/slos.yaml` has objectives); capacity
(pool units, accelerator allocation); cost against budget; drift and disruptions; the reconciler. Every
expression names only Fleet's metrics (`names.py`) or the rules of `rules.py` (a test checks each against a
real exposition and `promtool`). Per-GPU utilisation and health belong to a DCGM dashboard beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from grafana_foundation_sdk.builders.dashboard import Dashboard, DatasourceVariable, QueryVariable, Row
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.stat import Panel as Stat
from grafana_foundation_sdk.builders.timeseries import Panel as Timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

from . import names as n
from .rules import HOURS_PER_MONTH, SLI_RULE
from .slos import SlosDoc

UID = "fleet-overview"
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
CLS = 'priority_class=~"$priority_class"'


@dataclass(frozen=True)
class P:
    """One panel: title, unit, kind (timeseries or stat) and its queries as (expression, legend)."""

    title: str
    unit: str
    queries: tuple[tuple[str, str], ...]
    kind: str = "timeseries"
    description: str = ""


def panels(doc: SlosDoc) -> list[tuple[str, list[P]]]:
    """The rows and their panels (a row of SLOs only when there are objectives)."""
    q = n.QUEUE_WAIT
    rows: list[tuple[str, list[P]]] = [
        ("Jobs", [
            P("Jobs by phase", "short", ((f"sum by (phase) ({n.JOBS}{{{CLS}}})", "{{phase}}"),)),
            P("Plan: placed, pending, preempted", "short",
              ((f"sum by (state) ({n.PLAN_JOBS}{{{CLS}}})", "{{state}}"),)),
            P("Queue wait p50 / p99 (1h)", "s", tuple(
                (f"histogram_quantile({p}, sum by (le, priority_class) (rate({q}_bucket{{{CLS}}}[1h])))",
                 f"p{round(p * 100)} {{{{priority_class}}}}") for p in (0.5, 0.99))),
            P("Longest wait still queued", "s", ((f"max by (priority_class) ({n.QUEUE_OLDEST}{{{CLS}}})",
                                                  "{{priority_class}}"),)),
        ]),
    ]
    if doc.objectives:
        rows.append(("SLOs", [
            P("SLO error ratio (1h)", "percentunit", ((f"{SLI_RULE}1h{{{CLS}}}", "{{slo}}"),),
              description="Share of bad events over the last hour; the burn-rate alerts compare it to the budget"),
            P("SLO error ratio (3d)", "percentunit", ((f"{SLI_RULE}3d{{{CLS}}}", "{{slo}}"),)),
        ]))
    rows += [
        ("Capacity", [
            P("Pool units by state", "short", ((f"sum by (state) ({n.POOL_UNITS})", "{{state}}"),)),
            P("Unhealthy units", "short", ((f'{n.POOL_UNITS}{{state="unhealthy"}} > 0', "{{cluster}}/{{pool}}"),)),
            P("Accelerator allocation", "percentunit", (
                (f'sum by (accelerator) ({n.ACCELERATORS}{{state="allocated"}}) / '
                 f'sum by (accelerator) ({n.ACCELERATORS}{{state="ready"}})', "{{accelerator}}"),),
              description="Accelerators held by admitted jobs over those ready"),
            P("Clusters readable", "short", ((f"sum({n.CLUSTER_REACHABLE})", "readable"),
                                             (f"count({n.CLUSTER_REACHABLE} == 0)", "lost")), kind="stat"),
        ]),
        ("Cost", [
            P("Cost per hour by team (running)", "currencyUSD",
              ((f'sum by (team) ({n.COST}{{source="running"}})', "{{team}}"),)),
            P("Cost per hour by cluster (planned)", "currencyUSD",
              ((f'sum by (cluster) ({n.COST}{{source="planned"}})', "{{cluster}}"),
               (f"sum({n.IDLE_COST})", "idle capacity"))),
            P("Monthly run-rate against budget", "percentunit",
              ((f'sum by (team) ({n.COST}{{source="running"}}) * {HOURS_PER_MONTH} / on (team) {n.BUDGET}',
                "{{team}}"),), description="Above 100%: the team's running jobs cost more than its budget"),
        ]),
        ("Drift and disruptions", [
            P("Jobs drifted from the plan", "short", ((f"sum by (kind) ({n.DRIFT_JOBS})", "{{kind}}"),)),
            P("Pool units: planned minus observed", "short", ((f"{n.DRIFT_UNITS} != 0", "{{cluster}}/{{pool}}"),)),
            P("Failovers, preemptions, migrations (1h)", "short", (
                (f"sum(increase({n.FAILOVERS}_total[1h]))", "failovers"),
                (f"sum(increase({n.PREEMPTIONS}_total[1h]))", "preemptions"),
                (f"sum(increase({n.MIGRATIONS}_total[1h]))", "migrations"))),
            P("Accelerator-hours lost (1h)", "short",
              ((f"sum by (priority_class) (increase({n.LOST_HOURS}_total{{{CLS}}}[1h]))", "{{priority_class}}"),)),
        ]),
        ("Reconciler", [
            P("Cycle duration p50 / p99 (15m)", "s", tuple(
                (f"histogram_quantile({p}, sum by (le) (rate({n.CYCLE_DURATION}_bucket[15m])))", f"p{round(p * 100)}")
                for p in (0.5, 0.99))),
            P("Cycles by result", "ops", ((f"sum by (result) (rate({n.CYCLES}_total[5m]))", "{{result}}"),)),
            P("Since the last successful cycle", "s", ((f"time() - max({n.LAST_SUCCESS})", "age"),), kind="stat"),
            P("Actions (1h)", "short", ((f"sum by (action) (increase({n.ACTIONS}_total[1h]))", "{{action}}"),)),
        ]),
        ("Robots", [
            P("Rollout robots by state", "short", ((f"sum by (state) ({n.ROLLOUT_ROBOTS})", "{{state}}"),)),
            P("Rolling wave age against its soak plus health timeout", "s",
              ((f"{n.ROLLOUT_WAVE_AGE}", "{{deployment}} {{wave}} age"),
               (f"{n.ROLLOUT_WAVE_DEADLINE}", "{{deployment}} {{wave}} deadline"))),
            P("Robots unhealthy", "short", ((f"count({n.ROBOT_HEALTHY} == 0)", "unhealthy"),), kind="stat"),
            P("Robots silent over 10 minutes", "short",
              ((f"count(time() - {n.ROBOT_HEARTBEAT} > 600)", "silent"),), kind="stat"),
            P("Rollout transitions (1h)", "short",
              ((f"sum by (kind) (increase({n.ROLLOUT_EVENTS}_total[1h]))", "{{kind}}"),)),
        ]),
    ]
    return rows


def dashboard(doc: SlosDoc) -> Dashboard:
    d = (Dashboard("Fleet").uid(UID).tags(["fleet"]).refresh("1m").time("now-24h", "now")
         .with_variable(DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
         .with_variable(QueryVariable("priority_class").label("Priority class").datasource(DS)
                        .query(f"label_values({n.JOBS}, priority_class)").multi(True).include_all(True)))
    pid = 0
    for title, row in panels(doc):
        pid += 1
        d = d.with_row(Row(title).id(pid))
        for p in row:
            pid += 1
            panel = (Stat() if p.kind == "stat" else Timeseries()).id(pid).title(p.title).unit(p.unit).datasource(DS)
            if p.description:
                panel = panel.description(p.description)
            for i, (expr, legend) in enumerate(p.queries):
                panel = panel.with_target(Dataquery().expr(expr).legend_format(legend).ref_id(chr(ord("A") + i)))
            d = d.with_panel(panel)
    return d


def dashboard_json(doc: SlosDoc) -> str:
    return json.dumps(dashboard(doc).build(), cls=JSONEncoder, sort_keys=True, indent=2) + "\n"
