"""Reports that lead with what matters (issue 16 item 4): the pull-request comment, the HTML cost report and
`fleet plan --base` lead with the running work a change stops or moves (by priority class, with the work lost),
then what it commits (run cost of the jobs it starts) beside the change in run-rate; budgets to the month's
end, price changes, new pools' exposure, jobs away from their data and waiting jobs follow."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_cost import commit, fleet, git

from reconciler.catalog import load_catalog
from reconciler.impact import impact, month_hours
from reconciler.pipeline import Change, change, check, cost_report
from reconciler.report import cost_html, cost_markdown
from reconciler.sources import read_worktree

from builders import GKE, base_files, with_files

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
USE5 = "fleet/clusters/gke-use5.yaml"
AS_OF = datetime(2026, 11, 23, 4, 0, tzinfo=UTC)        # 532 hours of November past, 188 left


def example_files() -> dict[str, bytes]:
    return dict(read_worktree(ROOT))


def use5_down() -> dict[str, bytes]:
    files = example_files()
    assert b"status: active" in files[USE5]
    files[USE5] = files[USE5].replace(b"status: active", b"status: down")
    return files


def changed(head: dict[str, bytes], base: dict[str, bytes]) -> Change:
    catalog = load_catalog()
    return change(check(head, catalog), check(base, catalog))


@pytest.fixture(scope="module")
def use5_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git copy of the example: the example, then "take gke-use5 down"."""
    repo = tmp_path_factory.mktemp("example")
    git(repo, "init", "-q", "-b", "main")
    commit(repo, example_files(), "the example")
    commit(repo, {USE5: use5_down()[USE5]}, "take gke-use5 down")
    return repo


def test_taking_gke_use5_down_leads_with_the_critical_and_production_jobs_it_stops(use5_repo: Path) -> None:
    r = fleet("cost", "--base", "HEAD~1", cwd=use5_repo)
    assert r.returncode == 0, r.stderr
    md = r.stdout
    # the headline: what stops, by class, and the work lost; then the cost (no longer "-24.0%" first)
    headline = md.splitlines()[0]
    # (critical services move when gke-use5 goes down, it stops none; atlas-chat-eu runs in its data region
    # europe-west4 only, the default spread yields to it: issue 20, so losing gke-use5 leaves it alone)
    # (multimodal/captioner-finetune runs on the queued v6e pool of gke-euw4 since issue 26, not on gke-use5)
    assert headline.startswith("## Stops 4 running jobs (3 production, 1 opportunistic) and moves 3 "
                               "(3 critical): up to 3,333 accelerator-hours of work lost; "), headline
    assert "Monthly cost" not in headline
    # the first section is the disruption; its class table names the critical and production jobs it stops
    sections = re.findall(r"^### (.+)$", md, re.MULTILINE)
    assert sections[:2] == ["Disruption: 7 running jobs stopped or moved", "Cost of the change"]
    rows = [line for line in md.split("### Disruption", 1)[1].splitlines() if line.startswith("| ")]
    assert rows[1] == ("| critical | – | foundation/atlas-400b-pretrain, serving/atlas-chat, "
                       "serving/safety-classifier | 2,048.0 |")
    assert rows[2] == ("| production | foundation/atlas-70b-pretrain, foundation/atlas-long-context, "
                       "serving/embeddings-api | – | 1,280.0 |")
    # each job's work lost: accelerators x checkpoint_minutes (the 70b pretrain: 2,048 chips x 30 min)
    assert ("| production | foundation/atlas-70b-pretrain | stops | gke-use5/v5p-8x8x8 | pending | 2048 | 30 min | "
            "1,024.0 |") in md
    assert "| critical | serving/safety-classifier | moves | gke-use5/v6e-2x2 | gke-use4/v6e-2x2 " \
           "| 16 | 0 min | 0.0 | cluster gke-use5 is down |" in md
    assert "| production | serving/embeddings-api | stops | gke-use5/v5e-2x2 | pending | 16 | 0 min | " \
           "0.0 (service down) |" in md
    # the cost: what the change commits (run cost of the two jobs it starts) beside the run-rate
    # (vlm-pretrain's v5p option runs at relative_speed 0.7: 480 h of work take 685.7 h there)
    assert "**Commits $1,437,757**: the run cost (hourly × `duration_hours` / the option's `relative_speed`) of " \
           "the 2 jobs it starts." in md
    assert "Run-rate $25,814.41/h → **$19,722.11/h** (-$6,092.30/h; -$4,447,379 over a whole month of 730 h, " \
           "-23.6%)." in md
    assert md.index("### Disruption") < md.index("### Cost of the change") < md.index("### Plan changes")
    # waiting jobs with their reasons, highest class first; jobs away from their data
    waiting = md.split("### Waiting (5)", 1)[1].split("###", 1)[0]
    assert "serving/safety-classifier" not in waiting
    assert waiting.index("serving/embeddings-api | production |") < waiting.index("rl/critic-distill | research")
    assert "| foundation/atlas-400b-pretrain | us-east5 | gke-usc1/v5p-8x8x8 | 7,741.44 |" in md


def test_plan_base_leads_with_the_same_disruption(use5_repo: Path) -> None:
    r = fleet("plan", "--base", "HEAD~1", cwd=use5_repo)
    assert r.returncode == 0, r.stderr
    change_section = r.stdout.split("## Change against the base", 1)[1]
    assert change_section.lstrip().startswith("**Stops 4 running jobs (3 production, 1 opportunistic)")
    assert change_section.index("### Disruption: 7 running jobs") < change_section.index("### Plan changes")


def test_a_new_48_hour_job_reads_as_its_run_cost_not_a_month_of_it() -> None:
    base = example_files()
    head = dict(base)
    head["jobs/robotics/new-48h.yaml"] = (b"name: new-48h\nteam: robotics\noptions:\n  - {accelerator: "
                                          b"nvidia-h100-80gb, count: 8}\nduration_hours: 48\ncheckpoint_minutes: 30\n"
                                          b"image: x/y:1\n")   # robotics: H100 quota to spare in the example
    c = changed(head, base)
    placed = c.head.plan.placement_of("robotics/new-48h")
    assert placed is not None
    run_cost = placed.hourly_usd * 48
    md = cost_markdown(cost_report(c, "work tree", "main"))
    assert md.startswith(f"## Starts 1 job committing ${run_cost:,.0f} · run-rate +${placed.hourly_usd:,.2f}/h\n")
    assert "Monthly cost increases" not in md
    row = f"| robotics/new-48h | research | {placed.pool_key} | {placed.hourly_usd:,.2f} | 48 | ${run_cost:,.0f} |"
    assert row in md
    assert "**No running job stops, moves or is preempted.**" in md


def test_the_issues_48_hour_job_commits_8294_not_126144_a_month() -> None:
    """Issue 16's example: a new 48-hour job at $172.80/h read "Monthly cost increases by $126,144"."""
    prices = "prices:\n  - {machine_type: a3-highgpu-8g, region: us-central1, on_demand_hourly_usd: 172.8}\n"
    gke = GKE.replace("    max: 8\n    placement: compact", "    machine_type: a3-highgpu-8g\n    max: 8\n"
                      "    placement: compact")
    base = with_files({"fleet/prices.yaml": prices, "fleet/clusters/gke-usc1.yaml": gke,
                       "fleet/clusters/onprem-sjc.yaml": None})      # no idle owned nodes to land on for free
    new = ("name: eval\nteam: lang\noptions:\n  - {accelerator: nvidia-h100-80gb, count: 8}\n"
           "duration_hours: 48\ncheckpoint_minutes: 30\nimage: img:1\n")
    c = changed({**base, "jobs/lang/eval.yaml": new.encode()}, base)
    md = cost_markdown(cost_report(c, "work tree", "main"))
    assert md.startswith("## Starts 1 job committing $8,294 · run-rate +$172.80/h\n"), md[:200]
    assert "(+$172.80/h; +$126,144 over a whole month of 730 h" in md


def test_price_changes_say_which_price_old_and_new() -> None:
    base = example_files()
    prices = base["fleet/prices.yaml"]
    head = {**base, "fleet/prices.yaml": prices.replace(b"on_demand_hourly_usd: 86.76", b"on_demand_hourly_usd: 90.0")
            .replace(b"percent_off: 10", b"percent_off: 20")}
    c = changed(head, base)
    i = impact(c.head, c.base, c.diff)
    by_pool = {p.pool: p for p in i.price_changes}
    h200 = by_pool["gke-usc1/h200-a3ultra"]
    assert (h200.before_usd, h200.after_usd) == (86.76, 90.0)
    assert h200.source_before == h200.source_after and "SkyPilot" in h200.source_after
    v5p = by_pool["gke-use5/v5p-8x8x8"]                 # on-demand v5p: 10% off list, then 20% off
    assert v5p.after_usd / v5p.before_usd == pytest.approx(0.8 / 0.9, abs=1e-3)
    assert "gke-use5/v5p-2x4x4-spot" not in by_pool      # the discount is for on-demand capacity only
    md = cost_markdown(cost_report(c, "work tree", "main"))
    assert f"### Price changes ({len(i.price_changes)})" in md
    assert f"| gke-usc1/h200-a3ultra | nvidia-h200-141gb | on-demand | 86.76 | 90.00 | {h200.source_before} |" in md


def test_a_new_pool_shows_its_maximum_monthly_exposure() -> None:
    prices = "prices:\n  - {machine_type: a3-highgpu-8g, region: us-central1, on_demand_hourly_usd: 80.0}\n"
    base = with_files({"fleet/prices.yaml": prices})
    pool = "  - name: h100-b\n    accelerator: nvidia-h100-80gb\n    machine_type: a3-highgpu-8g\n    max: 6\n"
    head = {**base, "fleet/clusters/gke-usc1.yaml": (GKE + pool).encode()}
    c = changed(head, base)
    i = impact(c.head, c.base, c.diff)
    # a pool nobody uses yet can still scale to 6 nodes at $80/h: 6 x 80 x 730 a month
    assert [(e.pool, e.max_before, e.max_after, e.unit_hourly_usd, e.max_monthly_usd) for e in i.exposures] == [
        ("gke-usc1/h100-b", None, 6, 80.0, 6 * 80.0 * 730)]
    md = cost_markdown(cost_report(c, "work tree", "main"))
    assert "| gke-usc1/h100-b | nvidia-h100-80gb | on-demand | 6 | 80.00 | $350,400 |" in md
    back = changed(base, head)                          # the other way round: a removed pool exposes nothing
    assert impact(back.head, back.base, back.diff).exposures == ()


def test_budget_forecast_runs_to_the_end_of_the_month_of_the_date_given() -> None:
    assert month_hours(AS_OF) == (532.0, 188.0)
    base = base_files()
    head = with_files({"policies/teams.yaml": base["policies/teams.yaml"].decode()
                       .replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 50000")})
    c = changed(head, base)
    report = cost_report(c, "work tree", "main", as_of=AS_OF)
    (vision,) = report.impact.budgets
    # vision/train, 2 owned H100 nodes at $40/h = $80/h on both sides: spent 532 h x 80, forecast + 188 h x 80
    assert (vision.team, vision.spent_usd, vision.forecast_usd, vision.left_usd) == ("vision", 42560.0, 57600.0,
                                                                                     -7600.0)
    md = cost_markdown(report)
    assert "### Budgets to the end of November 2026" in md
    assert "| vision | $50,000 | 80.00 → 80.00 | $42,560 (85%) | $57,600 | -$7,600 | over |" in md
    assert cost_markdown(report) == md                  # the date in, the same text out


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package `chromium`)")
def test_html_cost_report_leads_with_the_same_in_headless_chromium(tmp_path: Path) -> None:
    report = cost_report(changed(use5_down(), example_files()), "work tree", "main", as_of=AS_OF)
    page = tmp_path / "cost.html"
    page.write_text(cost_html(report))
    dom = dump_dom(page)
    body = dom.split("<body>", 1)[1]
    assert body.index('id="disruption"') < body.index('id="commitment"') < body.index('id="budgets"') \
        < body.index('id="outside-data-region"') < body.index('id="waiting"') < body.index("Plan changes")
    assert re.search(r'id="work-lost"><b>3,333</b>', dom)
    disruption = body.split('id="disruption"', 1)[1].split("</section>", 1)[0]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", disruption)
    assert cells[:4] == ["critical", "–", "foundation/atlas-400b-pretrain, serving/atlas-chat, "
                         "serving/safety-classifier", "2,048.0"]
    away = body.split('id="outside-data-region"', 1)[1].split("</section>", 1)[0]
    assert "foundation/atlas-400b-pretrain" in away and "us-east5" in away
    assert dom.count('<line class="budget"') == 7                # one per team with a budget


def dump_dom(page: Path) -> str:
    r = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--virtual-time-budget=2000", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout
