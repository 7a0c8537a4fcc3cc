"""monitoring/prometheus-rules.yaml through Prometheus's own `promtool` (`check rules`, and `test rules` with
alert cases that fire and cases that must not), and the Grafana dashboard: deterministic, and every panel
names only metrics FleetMetrics exposes or rules the rule file records (its PromQL checked by promtool too).

promtool comes from Debian's `prometheus` package; `.ci/run` installs it, so in CI (env `CI` set) a missing
promtool fails these tests instead of skipping them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.observability import names
from reconciler.observability.dashboard import dashboard_json
from reconciler.observability.metrics import FleetMetrics
from reconciler.observability.rules import SLI_RULE, burn_rate, prometheus_rules, rules_yaml
from reconciler.observability.slos import SlosDoc
from reconciler.robots.observed import RobotsObservation

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = SlosDoc.model_validate(yaml.safe_load((ROOT / "policies" / "slos.yaml").read_text()))
PROD = 'priority_class="production"'


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing, but .ci/run installs it (Debian package prometheus)", pytrace=False)
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return path


def run_promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *map(str, args)], capture_output=True, text=True, timeout=300)


# --- the rule file -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", [
    pytest.param(EXAMPLE, id="example"),
    pytest.param(SlosDoc(), id="defaults"),
    pytest.param(SlosDoc.model_validate({"alerts": {k: {"enabled": False, "for_minutes": 1, "severity": "page"}
                                                    for k in ("cluster_lost", "pool_unhealthy", "team_over_budget",
                                                              "reconciler_not_cycling")}}), id="all-off"),
])
def test_promtool_checks_the_rules(doc: SlosDoc, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(rules_yaml(doc))
    r = run_promtool("check", "rules", path)
    assert r.returncode == 0, r.stdout + r.stderr
    records = sum(len(g["rules"]) for g in prometheus_rules(doc)["groups"])
    assert f"SUCCESS: {records} rules found" in r.stdout


def test_burn_rates_follow_the_workbook() -> None:
    """14.4 / 6 / 3 / 1 for a 30-day window (SRE workbook, table 5-8), scaled to the objective's window."""
    month = SlosDoc.model_validate({"objectives": [{"name": "m", "priority_class": "p", "window_days": 30,
                                                    "goodput": {"above_percent": 99}}]}).objectives[0]
    rates = [burn_rate(month, share, w) for share, w in ((0.02, "1h"), (0.05, "6h"), (0.10, "1d"), (0.10, "3d"))]
    assert rates == pytest.approx([14.4, 6, 3, 1])
    assert burn_rate(EXAMPLE.objectives[1], 0.02, "1h") == pytest.approx(13.44)     # 28 days


def _annotations(alert: str, slo: str | None = None, severity: str | None = None, **subst: str) -> dict[str, str]:
    """The alert's annotations from the rule file, with the template fields promtool expands."""
    for g in prometheus_rules(EXAMPLE)["groups"]:
        for rule in g["rules"]:
            if rule.get("alert") == alert and (slo is None or rule["labels"].get("slo") == slo) and \
                    (severity is None or rule["labels"]["severity"] == severity):
                out = {}
                for k, text in rule["annotations"].items():
                    for name, val in subst.items():
                        field = name if name == "value" else f"labels.{name}"
                        text = re.sub(r"\{\{ \$" + field + r"( \| humanize)? \}\}", val, text)
                    out[k] = text
                return out
    raise AssertionError(f"no alert {alert} {slo} {severity}")


def _burn(slo: str, cls: str, severity: str) -> dict[str, Any]:
    return {"exp_labels": {"slo": slo, "priority_class": cls, "severity": severity},
            "exp_annotations": _annotations("FleetSLOBudgetBurn", slo, severity)}


def _case(series: dict[str, str], checks: list[tuple[str, str, list[dict[str, Any]]]],
          interval: str = "1m") -> dict[str, Any]:
    return {"interval": interval, "input_series": [{"series": s, "values": v} for s, v in series.items()],
            "alert_rule_test": [{"eval_time": t, "alertname": a, "exp_alerts": e} for t, a, e in checks]}


BUCKET = f'{names.QUEUE_WAIT}_bucket{{{PROD},le="1800.0"}}'
COUNT = f"{names.QUEUE_WAIT}_count{{{PROD}}}"
LOST = f"{names.LOST_HOURS}_total{{{PROD}}}"
HELD = f"{names.ACCELERATOR_HOURS}_total{{{PROD}}}"
LAST = names.LAST_SUCCESS

CASES: dict[str, dict[str, Any]] = {
    # half of production's admissions wait past 30 minutes: page (and ticket) for its queue-wait SLO only
    "queue-wait-burns-fast": _case({BUCKET: "0+5x120", COUNT: "0+10x120"}, [
        ("60m", "FleetSLOBudgetBurn", [_burn("production-queue-wait", "production", "page"),
                                       _burn("production-queue-wait", "production", "ticket")])]),
    # 1 in 1,000 late: within a 1% budget, nothing fires
    "queue-wait-within-budget": _case({BUCKET: "0+999x120", COUNT: "0+1000x120"}, [
        ("60m", "FleetSLOBudgetBurn", []), ("120m", "FleetSLOBudgetBurn", [])]),
    # bad for an hour, then good for 30 minutes: the short windows stop the page; the day's budget still burns
    "burn-stopped": _case({BUCKET: "0+5x60 300+10x30", COUNT: "0+10x90"}, [
        ("90m", "FleetSLOBudgetBurn", [_burn("production-queue-wait", "production", "ticket")])]),
    # 30% of production's accelerator-hours lost (budget 5%): 6h/30m page
    "goodput-burns": _case({LOST: "0+30x120", HELD: "0+100x120"}, [
        ("60m", "FleetSLOBudgetBurn", [_burn("production-goodput", "production", "page"),
                                       _burn("production-goodput", "production", "ticket")])]),
    "goodput-within-budget": _case({LOST: "0+1x120", HELD: "0+100x120"}, [("60m", "FleetSLOBudgetBurn", [])]),
    # cluster a is lost from minute 2, b never: pending at 10m, firing at 20m for a only
    "cluster-lost": _case({f'{names.CLUSTER_REACHABLE}{{cluster="a"}}': "1 1 0x30",
                           f'{names.CLUSTER_REACHABLE}{{cluster="b"}}': "1x32", LAST: "0+60x32"}, [
        ("10m", "FleetClusterLost", []),
        ("20m", "FleetClusterLost", [{"exp_labels": {"cluster": "a", "severity": "page"},
                                      "exp_annotations": _annotations("FleetClusterLost", cluster="a")}])]),
    "pool-unhealthy": _case({f'{names.POOL_UNITS}{{cluster="c",pool="p",state="unhealthy"}}': "0 1x20",
                             f'{names.POOL_UNITS}{{cluster="c",pool="q",state="unhealthy"}}': "0x20",
                             f'{names.POOL_UNITS}{{cluster="c",pool="q",state="ready"}}': "3x20", LAST: "0+60x20"}, [
        ("5m", "FleetPoolUnhealthyUnits", []),
        ("15m", "FleetPoolUnhealthyUnits", [
            {"exp_labels": {"cluster": "c", "pool": "p", "state": "unhealthy", "severity": "ticket"},
             "exp_annotations": _annotations("FleetPoolUnhealthyUnits", cluster="c", pool="p", value="1")}])]),
    # vision runs at $150/h on two clusters (109,500 a month) against 100,000; lang's plan (not what runs)
    # is over, and its running cost is under: only vision fires
    "team-over-budget": _case({
        f'{names.COST}{{team="vision",cluster="x",source="running"}}': "100x70",
        f'{names.COST}{{team="vision",cluster="y",source="running"}}': "50x70",
        f'{names.COST}{{team="lang",cluster="x",source="running"}}': "10x70",
        f'{names.COST}{{team="lang",cluster="x",source="planned"}}': "1000x70",
        f'{names.BUDGET}{{team="vision"}}': "100000x70", f'{names.BUDGET}{{team="lang"}}': "100000x70",
        LAST: "0+60x70"}, [
        ("30m", "FleetTeamOverBudget", []),
        ("65m", "FleetTeamOverBudget", [{"exp_labels": {"team": "vision", "severity": "ticket"},
                                         "exp_annotations": _annotations("FleetTeamOverBudget", team="vision",
                                                                         value="109.5k")}])]),
    # the loop cycles every minute, then stops at minute 5 (last success at 300 s)
    "reconciler-stuck": _case({LAST: "0+60x5 300x30"}, [
        ("12m", "FleetReconcilerNotCycling", []),
        ("20m", "FleetReconcilerNotCycling", [{"exp_labels": {"severity": "page"},
                                               "exp_annotations": _annotations("FleetReconcilerNotCycling")}]),
        ("20m", "FleetReconcilerMetricsAbsent", [])]),
    "reconciler-cycling": _case({LAST: "0+60x60"}, [("59m", "FleetReconcilerNotCycling", [])]),
    # wave canary (deadline 40 min) ages a minute a minute: stuck past 40 min, firing 5 min later; rest is not
    "rollout-wave-stuck": _case({
        f'{names.ROLLOUT_WAVE_AGE}{{robot_fleet="lab",deployment="towel",wave="canary"}}': "0+60x60",
        f'{names.ROLLOUT_WAVE_DEADLINE}{{robot_fleet="lab",deployment="towel",wave="canary"}}': "2400x60",
        f'{names.ROLLOUT_WAVE_AGE}{{robot_fleet="lab",deployment="mop",wave="rest"}}': "0+60x60",
        f'{names.ROLLOUT_WAVE_DEADLINE}{{robot_fleet="lab",deployment="mop",wave="rest"}}': "7200x60",
        LAST: "0+60x60"}, [
        ("42m", "FleetRolloutWaveStuck", []),
        ("50m", "FleetRolloutWaveStuck", [
            {"exp_labels": {"robot_fleet": "lab", "deployment": "towel", "wave": "canary", "severity": "ticket"},
             "exp_annotations": _annotations("FleetRolloutWaveStuck", robot_fleet="lab", deployment="towel",
                                             wave="canary")}])]),
    "reconciler-absent": _case({f'{names.CLUSTER_REACHABLE}{{cluster="a"}}': "1x30"}, [
        ("5m", "FleetReconcilerMetricsAbsent", []),
        ("15m", "FleetReconcilerMetricsAbsent", [{"exp_labels": {"severity": "page"},
                                                  "exp_annotations": _annotations("FleetReconcilerMetricsAbsent")}])]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_promtool_alert_cases(case: str, tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(rules_yaml(EXAMPLE))
    test = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [CASES[case]]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    r = run_promtool("test", "rules", tmp_path / "test.yaml")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_case_that_should_fail_fails(tmp_path: Path) -> None:
    """The harness itself: expecting no alert where one fires makes promtool fail."""
    (tmp_path / "rules.yaml").write_text(rules_yaml(EXAMPLE))
    wrong = _case({BUCKET: "0+5x120", COUNT: "0+10x120"}, [("60m", "FleetSLOBudgetBurn", [])])
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
                                                        "tests": [wrong]}, sort_keys=False))
    r = run_promtool("test", "rules", tmp_path / "test.yaml")
    assert r.returncode == 1 and "FleetSLOBudgetBurn" in r.stdout + r.stderr


def test_every_rule_reads_metrics_fleet_exposes() -> None:
    """Every series a rule reads is one FleetMetrics exposes (or a recording rule), and the `le` edge each
    queue-wait SLO reads is a bucket of the histogram built from the same document."""
    from prometheus_client.parser import text_string_to_metric_families

    exposed = _exposed(EXAMPLE)
    for g in prometheus_rules(EXAMPLE)["groups"]:
        for rule in g["rules"]:
            assert _metrics_in(rule["expr"]) <= exposed | _recorded(), rule["expr"]
    m = FleetMetrics(EXAMPLE)
    m.queue_wait.labels("production")
    edges = {s.labels["le"] for f in text_string_to_metric_families(m.exposition()) for s in f.samples
             if s.name == f"{names.QUEUE_WAIT}_bucket"}
    rules = rules_yaml(EXAMPLE)
    for o in EXAMPLE.objectives:
        if o.queue_wait is not None:
            edge = names.le(o.queue_wait.under_minutes * 60)
            assert edge in edges and f'le="{edge}"' in rules


# --- the dashboard ----------------------------------------------------------------------------------------------


def _targets(doc: SlosDoc) -> list[str]:
    return [t["expr"] for p in json.loads(dashboard_json(doc))["panels"] for t in p.get("targets") or []]


ROBOTS_SEEN = RobotsObservation.model_validate({
    "rollouts": [{"fleet": "lab", "deployment": "towel", "digest": "sha256:" + "1" * 64, "phase": "rolling",
                  "wave": "canary", "wave_started_at": "2026-01-01T00:00:00Z",
                  "waves": [{"name": "canary", "robots": 1, "pending": 1}]}],
    "robots": [{"fleet": "lab", "robot": "r1", "health": "ok", "heartbeat": "2026-01-01T00:20:00Z"}]})


def _metrics_in(expr: str) -> set[str]:
    return set(re.findall(r"\b(fleet[a-zA-Z0-9_:]*)", re.sub(r'"[^"]*"', '""', expr)))


def _exposed(doc: SlosDoc) -> set[str]:
    """Every series name FleetMetrics can expose, histogram and counter suffixes included."""
    from prometheus_client.parser import text_string_to_metric_families

    m = FleetMetrics(doc)
    m.failover("c")
    m.preemption("p")
    m.migration("p")
    m.lost_work("p", 1)
    m.cycle(1.0, True, ["start"], now=__import__("datetime").datetime(2026, 1, 1))
    m.queue_wait.labels("p").observe(1)
    m.accelerator_hours.labels("p").inc()
    m.robots.update(ROBOTS_SEEN, {("lab", "towel", "canary"): 600.0}, ROBOTS_SEEN.robots[0].heartbeat)
    m.robots.event("lab", "towel", "wave-started")
    names_seen = {f.name for f in text_string_to_metric_families(m.exposition())}
    samples = {s.name for f in text_string_to_metric_families(m.exposition()) for s in f.samples}
    return names_seen | samples


def _recorded() -> set[str]:
    return {f"{SLI_RULE}{w}" for w in ("5m", "30m", "1h", "2h", "6h", "1d", "3d")}


def test_dashboard_panels_name_only_metrics_that_exist() -> None:
    exprs = _targets(EXAMPLE)
    assert len(exprs) >= 20
    exposed, recorded = _exposed(EXAMPLE), _recorded()
    used = set().union(*map(_metrics_in, exprs))
    assert used and used <= exposed | recorded, used - exposed - recorded
    assert used & recorded                                    # the SLO row reads the recording rules
    assert not _metrics_in(" ".join(_targets(SlosDoc()))) & recorded   # no objectives: no SLO row


def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """promtool parses every panel query (Grafana's `$priority_class` given a value first)."""
    rules = [{"record": f"fleet:panel:{i}", "expr": e.replace("$priority_class", ".*")}
             for i, e in enumerate(_targets(EXAMPLE))]
    path = tmp_path / "panels.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    r = run_promtool("check", "rules", path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dashboard_is_deterministic_and_built_by_the_library() -> None:
    text = dashboard_json(EXAMPLE)
    assert text == dashboard_json(EXAMPLE.model_copy())
    d = json.loads(text)
    assert d["uid"] == "fleet-overview" and d["title"] == "Fleet"
    ids = [p["id"] for p in d["panels"]]
    assert ids == list(range(1, len(ids) + 1))
    assert [v["name"] for v in d["templating"]["list"]] == ["datasource", "priority_class"]
    assert {p["type"] for p in d["panels"]} == {"row", "timeseries", "stat"}


def test_ci_never_skips_for_want_of_promtool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")                    # no promtool to be found
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"\.ci/run installs it"):
        promtool()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        promtool()
