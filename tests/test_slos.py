"""policies/slos.yaml: an optional document like every other (model, JSON Schema, located errors with hints,
cross-checks), and what `fleet render` makes of it (monitoring/prometheus-rules.yaml and the dashboard)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.observability.slos import SlosDoc
from reconciler.pipeline import check, monitoring
from reconciler.schema import schemas

from builders import with_files

ROOT = Path(__file__).resolve().parents[1]
SLOS = "policies/slos.yaml"
GOOD = """\
objectives:
  - name: prod-wait
    priority_class: production
    queue_wait: {percentile: 99, under_minutes: 30}
  - name: prod-goodput
    priority_class: production
    window_days: 7
    goodput: {above_percent: 95}
alerts:
  pool_unhealthy: {enabled: false, for_minutes: 5, severity: page}
"""


def problems(text: str) -> list[tuple[str, int, int, str, str, str]]:
    v = check(with_files({SLOS: text}), load_catalog())
    return [(p.path, p.line, p.col, p.field, p.message, p.hint) for p in v.problems]


def test_a_valid_document_loads_with_defaults() -> None:
    v = check(with_files({SLOS: GOOD}), load_catalog())
    assert v.ok, v.problems
    doc = v.loaded.slos
    assert doc is not None
    assert [o.name for o in doc.objectives] == ["prod-wait", "prod-goodput"]
    assert doc.objectives[0].window_days == 28 and doc.objectives[0].target == pytest.approx(0.99)
    assert doc.alerts.pool_unhealthy.enabled is False
    assert doc.alerts.cluster_lost.for_minutes == 15 and doc.alerts.cluster_lost.severity == "page"
    assert doc.wait_thresholds_s() == (1800.0,)


def test_absent_means_the_defaults() -> None:
    v = check(with_files({}), load_catalog())
    assert v.ok and v.loaded.slos == SlosDoc()


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("objectives:\n  - name: w\n    priority_class: gold\n    goodput: {above_percent: 90}\n",
                 (3, 21, "objectives[0].priority_class", "priority class `gold` does not exist",
                  "use one of: critical, opportunistic, production, research"), id="unknown-class"),
    pytest.param("objectives:\n  - {name: w, priority_class: research, goodput: {above_percent: 90}}\n"
                 "  - {name: w, priority_class: research, goodput: {above_percent: 80}}\n",
                 (3, 12, "objectives[1].name", "objective `w` is defined twice (also objectives[0])",
                  "rename one: the name labels its recording rules and alerts"), id="twice"),
    pytest.param("objectives:\n  - name: w\n    priority_class: research\n",
                 (2, 11, "objectives[0].name", "objective `w` has no objective",
                  "give exactly one: `queue_wait: {percentile: 99, under_minutes: 30}` or "
                  "`goodput: {above_percent: 95}` (write two objectives for both)"), id="none"),
    pytest.param("objectives:\n  - name: w\n    priority_class: research\n    goodput: {above_percent: 90}\n"
                 "    queue_wait: {percentile: 99, under_minutes: 5}\n",
                 (4, 5, "objectives[0].goodput", "objective `w` has both `queue_wait` and `goodput`",
                  "give exactly one: `queue_wait: {percentile: 99, under_minutes: 30}` or "
                  "`goodput: {above_percent: 95}` (write two objectives for both)"), id="both"),
    pytest.param("objectives:\n  - name: w\n    priority_class: research\n    goodput: {above_percent: 100}\n",
                 (4, 30, "objectives[0].goodput.above_percent", "`above_percent` must be < 100.0, got 100",
                  "set above_percent to a value < 100.0"), id="percent-100"),
    pytest.param("objectives:\n  - name: w\n    priority_class: research\n    queue_wait: {percentile: 99, "
                 "under_minutes: \"30\"}\n",
                 (4, 49, "objectives[0].queue_wait.under_minutes", "`under_minutes` must be a number, not str `30`",
                  "write it without quotes, e.g. 1.5"), id="quoted-number"),
    pytest.param("alerts:\n  cluster_lost: {for_minutes: 5, severity: urgent}\n",
                 (2, 44, "alerts.cluster_lost.severity", "`urgent` is not a valid severity",
                  "use one of: page or ticket"), id="severity"),
    pytest.param("alerts:\n  reconciler_not_cycling: {for_minutes: 0, severity: page}\n",
                 (2, 41, "alerts.reconciler_not_cycling.for_minutes",
                  "`reconciler_not_cycling` must allow at least 1 minute without a successful cycle",
                  "set for_minutes above the loop's interval, e.g. 10, or `enabled: false`"), id="stale-0"),
    pytest.param("alerts:\n  cluster_gone: {for_minutes: 5, severity: page}\n",
                 (2, 3, "alerts.cluster_gone", "unknown field `cluster_gone`",
                  "did you mean `cluster_lost`? allowed fields: cluster_lost, pool_unhealthy, team_over_budget, "
                  "reconciler_not_cycling, rollout_stuck"), id="unknown-alert"),
])
def test_bad_documents_get_located_errors(text: str, expected: tuple[int, int, str, str, str]) -> None:
    assert problems(text) == [(SLOS, *expected)]


def test_the_json_schema_comes_from_the_model() -> None:
    schema = json.loads(schemas()["slos.schema.json"])
    assert schema["title"] == "Fleet slos document"
    assert set(schema["properties"]) == {"objectives", "alerts"}
    assert (ROOT / "schema" / "slos.schema.json").read_text() == schemas()["slos.schema.json"]


def test_the_example_has_objectives_for_its_classes() -> None:
    v = check({**with_files({}), SLOS: (ROOT / SLOS).read_bytes()}, load_catalog())
    assert v.ok, v.problems
    assert v.loaded.slos is not None and len(v.loaded.slos.objectives) >= 3


def test_render_writes_the_monitoring_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["render", "--repo", str(ROOT), "--out", str(out)])
    assert r.exit_code == 0, r.output
    v = check({**with_files({}), SLOS: (ROOT / SLOS).read_bytes()}, load_catalog())
    expected = monitoring(check(_example_files(), load_catalog()))
    for rel, text in expected.items():
        assert (out / rel).read_text() == text
    assert "FleetSLOBudgetBurn" in (out / "monitoring/prometheus-rules.yaml").read_text()
    assert monitoring(v) == monitoring(v)                       # deterministic bytes


def _example_files() -> dict[str, bytes]:
    from reconciler.sources import read_worktree

    return read_worktree(ROOT)
