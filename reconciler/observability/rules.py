"""`monitoring/prometheus-rules.yaml`: recording rules and alerts over Fleet's metrics, from
`policies/slos.yaml`. Pure and deterministic (objectives in file order, which the document fixes).

Per objective, as chapter 5 ("Alerting on SLOs") of Google's SRE workbook recommends:
- recording rules `fleet_slo:sli_error:ratio_rate<W>` {slo, priority_class} for W in 5m, 30m, 1h, 2h, 6h,
  1d, 3d: the share of bad events over the window (admissions that waited past the threshold; accelerator-
  hours lost among those held);
- multi-window, multi-burn-rate alerts: `page` when the error ratio over 1 hour and over 5 minutes both
  exceed the burn rate that spends 2% of the window's budget in that hour, or 6 hours and 30 minutes both
  exceed the rate spending 5% in 6 hours; `ticket` for 10% in a day (with 2 hours) or 10% in 3 days (with 6
  hours). The workbook's factors (14.4, 6, 3, 1) are for a 30-day window; here they come from the
  objective's own window: burn = budget share x window hours / long-window hours (28 days: 13.44, 5.6,
  2.8, 0.93). The short window makes an alert stop soon after the burn stops.
Fleet alerts (each can be turned off or retimed in the document): a cluster Fleet cannot read, a pool with
unhealthy units, a team whose running jobs cost more per month than its budget, the reconciler not
completing a cycle (or its metrics absent).
"""

from __future__ import annotations

from typing import Any

from . import names as n
from .slos import AlertRule, Objective, SlosDoc

HOURS_PER_MONTH = 730
WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
WINDOW_HOURS = {"5m": 5 / 60, "30m": 0.5, "1h": 1, "2h": 2, "6h": 6, "1d": 24, "3d": 72}
BURNS: tuple[tuple[str, str, str, float], ...] = (
    # severity, long window, short window, share of the window's error budget spent over the long window
    ("page", "1h", "5m", 0.02),
    ("page", "6h", "30m", 0.05),
    ("ticket", "1d", "2h", 0.10),
    ("ticket", "3d", "6h", 0.10),
)
SLI_RULE = "fleet_slo:sli_error:ratio_rate"


def _num(x: float) -> str:
    return f"{x:.6g}"


def _sel(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def sli_error_expr(o: Objective, window: str) -> str:
    """The objective's error ratio over `window` (bad events / all events; NaN without events, which no
    comparison passes, so a quiet class never alerts)."""
    cls = o.priority_class
    if o.queue_wait is not None:
        edge = n.le(o.queue_wait.under_minutes * 60)
        good = f"sum(rate({n.QUEUE_WAIT}_bucket{_sel(priority_class=cls, le=edge)}[{window}]))"
        total = f"sum(rate({n.QUEUE_WAIT}_count{_sel(priority_class=cls)}[{window}]))"
        return f"1 - ({good} / {total})"
    lost = f"sum(rate({n.LOST_HOURS}_total{_sel(priority_class=cls)}[{window}]))"
    held = f"sum(rate({n.ACCELERATOR_HOURS}_total{_sel(priority_class=cls)}[{window}]))"
    return f"{lost} / {held}"


def burn_rate(o: Objective, share: float, long_window: str) -> float:
    """How many times faster than sustainable the budget burns when `share` of it goes in `long_window`."""
    return share * o.window_days * 24 / WINDOW_HOURS[long_window]


def _describe(o: Objective) -> str:
    if o.queue_wait is not None:
        return (f"{_num(o.queue_wait.percentile)}% of {o.priority_class} jobs admitted within "
                f"{_num(o.queue_wait.under_minutes)} minutes over {o.window_days} days")
    assert o.goodput is not None
    return f"goodput of {o.priority_class} jobs above {_num(o.goodput.above_percent)}% over {o.window_days} days"


def slo_rules(o: Objective) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(recording rules, alerts) of one objective."""
    labels = {"slo": o.name, "priority_class": o.priority_class}
    records = [{"record": f"{SLI_RULE}{w}", "expr": sli_error_expr(o, w), "labels": dict(labels)} for w in WINDOWS]
    budget = 1 - o.target
    alerts = []
    for severity in ("page", "ticket"):
        parts = []
        for sev, long_w, short_w, share in BURNS:
            if sev != severity:
                continue
            threshold = _num(burn_rate(o, share, long_w) * budget)
            sel = _sel(slo=o.name)
            parts.append(f"({SLI_RULE}{long_w}{sel} > {threshold} and {SLI_RULE}{short_w}{sel} > {threshold})")
        alerts.append({
            "alert": "FleetSLOBudgetBurn",
            "expr": "\nor\n".join(parts),
            "labels": {**labels, "severity": severity},
            "annotations": {
                "summary": f"SLO {o.name} is burning its error budget "
                           + ("fast" if severity == "page" else "steadily"),
                "description": f"Objective: {_describe(o)}. The error ratio over the last hours would spend "
                               + ("2% of the budget in 1 hour or 5% in 6 hours." if severity == "page" else
                                  "10% of the budget in 1 day or in 3 days."),
            },
        })
    return records, alerts


def _alert(name: str, rule: AlertRule, expr: str, summary: str, description: str) -> dict[str, Any]:
    out: dict[str, Any] = {"alert": name, "expr": expr}
    if rule.for_minutes:
        out["for"] = f"{rule.for_minutes}m"
    out["labels"] = {"severity": rule.severity}
    out["annotations"] = {"summary": summary, "description": description}
    return out


def fleet_alerts(doc: SlosDoc) -> list[dict[str, Any]]:
    a = doc.alerts
    out = []
    if a.cluster_lost.enabled:
        out.append(_alert("FleetClusterLost", a.cluster_lost, f"{n.CLUSTER_REACHABLE} == 0",
                          "Fleet cannot read cluster {{ $labels.cluster }}",
                          "No Workload, JobSet or Node of the cluster could be read; after "
                          "cluster_lost_after_minutes the reconciler places its jobs elsewhere. `fleet observe` "
                          "says why (context, credentials, network)."))
    if a.pool_unhealthy.enabled:
        out.append(_alert("FleetPoolUnhealthyUnits", a.pool_unhealthy, f'{n.POOL_UNITS}{_sel(state="unhealthy")} > 0',
                          "Pool {{ $labels.cluster }}/{{ $labels.pool }} has {{ $value }} unhealthy units",
                          "Units with a node NotReady, cordoned or accelerator-unhealthy; `fleet status` lists "
                          "the nodes and their conditions."))
    if a.team_over_budget.enabled:
        out.append(_alert("FleetTeamOverBudget", a.team_over_budget,
                          f'sum by (team) ({n.COST}{_sel(source="running")}) * {HOURS_PER_MONTH} '
                          f"> on (team) {n.BUDGET}",
                          "Team {{ $labels.team }} runs at ${{ $value | humanize }} a month, over its budget",
                          "The running jobs' cost per hour x 730 exceeds budget_monthly_usd in "
                          "policies/teams.yaml; `fleet status` lists the jobs."))
    if a.reconciler_not_cycling.enabled:
        rule = a.reconciler_not_cycling
        seconds = rule.for_minutes * 60
        out.append(_alert("FleetReconcilerNotCycling", rule.model_copy(update={"for_minutes": 0}),
                          f"time() - max({n.LAST_SUCCESS}) > {seconds}",
                          f"No successful reconcile cycle for {rule.for_minutes} minutes",
                          "The loop is failing or stuck: see the reconciler's log and "
                          f"{n.CYCLES}_total{{result=\"error\"}}."))
        out.append(_alert("FleetReconcilerMetricsAbsent", rule, f"absent({n.LAST_SUCCESS})",
                          f"Fleet's metrics have been absent for {rule.for_minutes} minutes",
                          "Prometheus scrapes no Fleet reconciler: it is down, or the scrape "
                          "configuration does not reach its --metrics-port."))
    if a.rollout_stuck.enabled:
        out.append(_alert("FleetRolloutWaveStuck", a.rollout_stuck,
                          f"{n.ROLLOUT_WAVE_AGE} > on (robot_fleet, deployment, wave) {n.ROLLOUT_WAVE_DEADLINE}",
                          "Wave {{ $labels.wave }} of {{ $labels.robot_fleet }}/{{ $labels.deployment }} is stuck",
                          "The wave has run longer than its soak plus health timeout without passing its gate: "
                          "robots offline, not switched (window, prestage, disk) or not yet healthy; "
                          "`fleet status` lists them."))
    return out


def prometheus_rules(doc: SlosDoc) -> dict[str, Any]:
    """The rule file: `fleet-slo-records`, `fleet-slo-alerts` (when there are objectives), `fleet-alerts`."""
    records: list[dict[str, Any]] = []
    alerts: list[dict[str, Any]] = []
    for o in doc.objectives:
        r, a = slo_rules(o)
        records += r
        alerts += a
    groups = []
    if records:
        groups += [{"name": "fleet-slo-records", "rules": records}, {"name": "fleet-slo-alerts", "rules": alerts}]
    groups.append({"name": "fleet-alerts", "rules": fleet_alerts(doc)})
    return {"groups": groups}


def rules_yaml(doc: SlosDoc) -> str:
    from ..render.yamlout import dump_all

    return dump_all([prometheus_rules(doc)]).removeprefix("---\n")
