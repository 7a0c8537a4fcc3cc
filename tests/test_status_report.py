"""`fleet status` leads with what matters, like the cost report (issue 16 item 4): jobs evicted, restarted or
failed by priority class with the work lost, waiting jobs with Kueue's reason, each team's spend against its
budget to the end of the month, jobs outside their data region; the HTML page checked in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.observe.model import ClusterObservation, Condition, Eviction, JobSet, Snapshot, Workload
from reconciler.pipeline import check
from reconciler.sources import read_worktree
from reconciler.status import StatusReport, status
from reconciler.status.render import to_html, to_text

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 11, 23, 4, 0, tzinfo=UTC)          # 532 hours of November past, 188 left
DAY_AGO = datetime(2026, 11, 22, 4, 0, tzinfo=UTC)
OCTOBER = datetime(2026, 10, 31, 0, 0, tzinfo=UTC)      # 24 h in October, 532 h in November
WAITS = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu, 16 more needed"
EVICTED = "Preempted to accommodate a higher priority Workload"


def job(team: str, name: str, pool: str, *, admitted: datetime | None = None, restarts: int = 0,
        evicted: int = 0, waits: str = "") -> tuple[JobSet, Workload]:
    conditions = []
    if admitted is not None:
        conditions += [Condition(type="Admitted", status="True", since=admitted),
                       Condition(type="PodsReady", status="True", since=admitted),
                       Condition(type="QuotaReserved", status="True", since=admitted)]
    if evicted:
        conditions += [Condition(type="Evicted", status="True", reason="Preempted", message=EVICTED, since=NOW),
                       Condition(type="QuotaReserved", status="False", reason="Pending", since=NOW)]
    if waits:
        conditions.append(Condition(type="QuotaReserved", status="False", reason="Pending", message=waits, since=NOW))
    ns = {"serving": "serving-prod"}.get(team, team)       # policies/teams.yaml: where the team's jobs are
    js = JobSet(namespace=ns, name=name, team=team, job=name, pool=pool, restarts=restarts,
                suspended=admitted is None, created_at=OCTOBER)
    w = Workload(namespace=ns, name=f"jobset-{name}-x", jobset=name, created_at=OCTOBER,
                 evictions=(Eviction(reason="Preempted", count=evicted),) if evicted else (),
                 conditions=tuple(sorted(conditions, key=lambda c: c.type)))
    return js, w


def cluster(name: str, *jobs: tuple[JobSet, Workload]) -> ClusterObservation:
    return ClusterObservation(name=name, status="ok", jobsets=tuple(j for j, _ in jobs),
                              workloads=tuple(w for _, w in jobs))


@pytest.fixture(scope="module")
def report() -> StatusReport:
    v = check(read_worktree(ROOT), load_catalog())
    snap = Snapshot(observed_at=NOW, clusters=(
        cluster("gke-use5", job("foundation", "atlas-70b-pretrain", "v5p-8x8x8", evicted=2),
                job("serving", "safety-classifier", "v6e-2x2", admitted=DAY_AGO, restarts=1)),
        cluster("gke-usc1", job("serving", "atlas-chat", "h200-a3ultra", admitted=OCTOBER),
                job("rl", "critic-distill", "h200-a3ultra", waits=WAITS))))
    return status(v, snap)


def test_jobs_carry_their_class_the_work_lost_and_why_they_wait(report: StatusReport) -> None:
    rows = {j.job: j for j in report.jobs}
    pretrain = rows["foundation/atlas-70b-pretrain"]
    # evicted twice: each eviction loses at most 2,048 chips x checkpoint_minutes (30) = 1,024 accelerator-hours
    assert (pretrain.priority, pretrain.phase, pretrain.evictions, pretrain.accelerators) == ("production", "evicted",
                                                                                             2, 2048)
    assert pretrain.lost_accelerator_hours == 2048.0 and pretrain.reason == EVICTED
    safety = rows["serving/safety-classifier"]                 # a service: checkpoint_minutes 0 loses no work
    assert (safety.priority, safety.restarts, safety.lost_accelerator_hours) == ("critical", 1, 0.0)
    assert rows["rl/critic-distill"].reason == WAITS and rows["rl/critic-distill"].phase == "queued"
    chat = rows["serving/atlas-chat"]                          # data in us-east5, runs in us-central1
    assert chat.outside_data_region and not safety.outside_data_region
    assert chat.lost_accelerator_hours == 0.0 and chat.reason == ""


def test_team_spend_this_month_and_forecast_to_its_end(report: StatusReport) -> None:
    rows = {j.job: j for j in report.jobs}
    safety, chat = rows["serving/safety-classifier"], rows["serving/atlas-chat"]
    assert safety.hourly_usd is not None and chat.hourly_usd is not None
    # the month counts from November 1: atlas-chat's 24 October hours are in its cost so far, not in the month's
    assert chat.cost_usd == pytest.approx(chat.hourly_usd * 556, abs=0.01)
    assert chat.month_cost_usd == pytest.approx(chat.hourly_usd * 532, abs=0.01)
    assert safety.month_cost_usd == pytest.approx(safety.hourly_usd * 24, abs=0.01)
    serving = next(t for t in report.teams if t.team == "serving")
    spent = safety.hourly_usd * 24 + chat.hourly_usd * 532
    assert serving.spent_month_usd == pytest.approx(spent, abs=0.02)
    assert serving.forecast_month_usd == pytest.approx(spent + (safety.hourly_usd + chat.hourly_usd) * 188, abs=0.02)


CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package `chromium`)")
def test_html_leads_with_disruption_then_waiting_budgets_and_data_in_headless_chromium(report: StatusReport,
                                                                                       tmp_path: Path) -> None:
    page = tmp_path / "status.html"
    page.write_text(to_html(report))
    r = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    body = r.stdout.split("<body>", 1)[1]
    order = [body.index(x) for x in ('id="disruption-section"', '<table id="waiting">', '<table id="budgets">',
                                     '<table id="away">', '<table id="jobs">')]
    assert order == sorted(order)
    assert "Up to <b>2,048 accelerator-hours of work lost</b>" in body

    def table(name: str) -> list[list[str]]:
        html = body.split(f'<table id="{name}">', 1)[1].split("</table>", 1)[0]
        return [re.findall(r"<td[^>]*>([^<]*)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", html, re.S)[1:]]

    # highest class first: the critical service that restarted, then the production pretrain evicted twice
    assert [row[:3] + row[6:7] for row in table("disruption")] == [
        ["critical", "serving/safety-classifier", "running", "0.0"],
        ["production", "foundation/atlas-70b-pretrain", "evicted", "2,048.0"]]
    waiting = {row[1]: row for row in table("waiting")}
    assert set(waiting) == {"rl/critic-distill", "foundation/atlas-70b-pretrain"}     # not the jobs found nowhere
    assert waiting["rl/critic-distill"][5] == WAITS
    assert waiting["foundation/atlas-70b-pretrain"][5] == EVICTED
    budgets = {row[0]: row for row in table("budgets")}
    assert set(budgets) == {"evals", "foundation", "interp", "multimodal", "rl", "robotics", "serving"}
    assert budgets["serving"][6] == "ok"
    assert table("away") == [["serving/atlas-chat", "critical", "gke-usc1", "h200-a3ultra"]]


def test_text_leads_with_the_same(report: StatusReport) -> None:
    text = to_text(report)
    assert text.index("\ndisrupted (evicted, restarted, failed)\n") < text.index("\nwaiting\n") \
        < text.index("\nbudgets to the end of November 2026\n") < text.index("\noutside their data region\n") \
        < text.index("\njobs\n")
    disrupted = text.split("\ndisrupted (evicted, restarted, failed)\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert disrupted[1].split()[:3] == ["critical", "serving/safety-classifier", "running"]
    assert disrupted[2].split()[:3] == ["production", "foundation/atlas-70b-pretrain", "evicted"]
