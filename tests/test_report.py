"""The reports' shape: the Markdown comment stays under GitHub's cap however large the change, tables are
truncated with "... and N more", the HTML is self-contained and renders its charts in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.cost.budget import budget_violations
from reconciler.cost.history import HistoryPoint
from reconciler.cost.model import CostBreakdown, JobCost, PoolCost, Priced
from reconciler.diff import diff_plans
from reconciler.plan.types import Cost, Pending, Placement, Plan, PoolPlan, QuotaPlan
from reconciler.report import MAX_MARKDOWN_CHARS, CostReport, cost_html, cost_json, cost_markdown

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def side(jobs: range, pending: range, target: int, teams: int, reason: str = "") -> Priced:
    """A synthetic priced plan: job i of team i % 400 on pool i % 100 at $(i % 7 + 1)/h; `teams` teams have
    quotas and a $1 budget."""
    placements = tuple(Placement(f"team-{i % 400:03d}/job-{i:05d}", f"c{i % 10}", f"p{i % 100}", 0, (i % 8,), 8,
                                 "new", float(i % 7 + 1)) for i in jobs)
    pend = tuple(Pending(f"team-{i % 400:03d}/wait-{i:05d}", (reason or f"needs {i} chips",)) for i in pending)
    pools = tuple(PoolPlan(f"c{k % 10}", f"p{k}", 0, 64, target, target, 8, 10.0, 10.0 * target) for k in range(100))
    quotas = tuple(QuotaPlan(f"c{k % 10}", f"team-{k:03d}", "tpu-v5p", target * k, None, None) for k in range(teams))
    job_costs = tuple(JobCost(p.job, p.job.split("/")[0], p.cluster, p.pool, "tpu-v5p", 8, p.hourly_usd, 10.0)
                      for p in placements)
    by_team: dict[str, float] = {}
    for j in job_costs:
        by_team[j.team] = by_team.get(j.team, 0.0) + j.hourly_usd
    pool_costs = tuple(PoolCost(p.cluster, p.pool, "tpu-v5p", "on-demand", p.target, p.target, 8, 10.0, "test",
                                False, 0, 0.0) for p in pools)
    total = sum(p.hourly_usd for p in pool_costs)
    cost = CostBreakdown(pool_costs, job_costs, by_team, {f"c{k}": total / 10 for k in range(10)},
                         {"tpu-v5p": total}, {"on-demand": total}, total, max(0.0, total - sum(by_team.values())))
    plan = Plan(placements, pend, (), pools, quotas, Cost(total, total * 730, 0.0, by_team, {}))
    return Priced(plan, cost, {(f"team-{k:03d}", "tpu-v5p"): (target * k, None, None, 0) for k in range(teams)},
                  {f"team-{k:03d}": 1.0 for k in range(teams)})


def huge_report() -> CostReport:
    base = side(range(0, 20000), range(0, 3000), 2, 400)
    head = side(range(10000, 30000), range(3000, 9000), 5, 500, reason="x|y " * 400)
    hist = tuple(HistoryPoint(f"{i:040x}", "2026-01-01T00:00:00+00:00", "s" * 500, 0, float(i)) for i in range(2000))
    return CostReport(head, "work tree", base, "main", diff_plans(base, head), budget_violations(head, base), hist,
                      "0.1.0")


def test_markdown_of_a_huge_change_stays_under_the_cap() -> None:
    report = huge_report()
    md = cost_markdown(report)
    assert len(md) <= MAX_MARKDOWN_CHARS
    # the headline leads with the placed jobs the change stops (10,000 whose files are gone, planned from git
    # alone: each may have finished; the synthetic plans name no class or checkpoint), then what it starts and
    # commits (run cost over duration_hours, not x 730)
    assert md.startswith("## Removes the files of 10,000 placed jobs (10000 ?), stopped unless already finished: "
                         "up to 0 accelerator-hours of work lost (+10000 "
                         "without checkpoint_minutes); starts 10,000 jobs committing $399,980 · 6,000 new jobs wait · "
                         "run-rate +$3,000.00/h\n")
    assert re.search(r"^\.\.\. and \d[\d,]* more$", md, re.MULTILINE)
    assert "<details><summary>Job changes (" in md
    # a table cell never breaks the table: pipes are escaped, long cells cut
    for line in md.splitlines():
        if line.startswith("| ") and "wait" in line:
            assert "x\\|y" in line and len(line) < 1000


def test_markdown_cuts_at_a_line_with_a_pointer_when_rows_alone_do_not_fit() -> None:
    md = cost_markdown(huge_report(), max_chars=1500)
    assert len(md) <= 1500 and md.endswith("the full report is in cost.html and cost.json.\n")


def test_json_keeps_every_row() -> None:
    import json

    doc = json.loads(cost_json(huge_report()))
    changes = [j["change"] for j in doc["diff"]["jobs"]]
    # stop: 10,000 placed jobs are gone; withdraw: 3,000 waiting jobs are gone; start: 10,000 new; wait: 6,000 new
    assert {c: changes.count(c) for c in set(changes)} == {"stop": 10000, "withdraw": 3000, "start": 10000,
                                                           "wait": 6000}
    assert len(doc["budget_violations"]) == 400               # teams 400-499 run nothing


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package `chromium`)")
def test_html_renders_charts_offline_in_headless_chromium(tmp_path: Path) -> None:
    report = huge_report()
    html = cost_html(report)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "the report must not load anything"
    assert "<script" not in html
    page = tmp_path / "cost.html"
    page.write_text(html)
    r = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--virtual-time-budget=2000", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120, check=False)
    dom = r.stdout
    assert r.returncode == 0, r.stderr[-2000:]
    # team, cluster, utilization, history, change by team, budgets (spent and forecast against each budget)
    assert dom.count("<svg") == 6
    assert dom.count('<rect class="bar"') >= 10 and "<polyline" in dom and 'class="used"' in dom
    assert dom.count('<line class="budget"') >= 10
    assert "Removes the files of 10,000 placed jobs" in dom and "starts 10,000 jobs committing $399,980" in dom
