"""Cost reports and plan diffs on a git repository built in the test, checked against dollars computed by hand.

The fixture prices are round numbers (fleet/prices.yaml below), so every expectation is arithmetic on them:
- tpu-v5p on-demand in us-central1: $4.00 per chip-hour, 25% negotiated discount -> one 4x4x4 slice (64 chips)
  = 64 x 4 x 0.75 = $192/h;
- a3-highgpu-8g (8x H100) on-demand: $80 per node-hour;
- onprem-sjc/h100-owned: 4 owned nodes at $40/h = $160/h, paid whether used or not.
Commits: A base (vision/train, 16 H100 = 2 owned nodes, free: already paid), B adds two lang jobs (big starts
on 3 new v5p slices, pretrain waits for quota), C raises lang's v5p quota (pretrain starts on 1 more
slice), D drains onprem-sjc (vision/train moves to 2 on-demand H100 nodes), E lowers vision's budget below
what its running job costs (a budget violation).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builders import GKE, TEAMS, base_files

PRICES = """\
prices:
  - {accelerator: tpu-v5p, region: us-central1, on_demand_hourly_usd: 4.0, source: test fixture}
  - {machine_type: a3-highgpu-8g, region: us-central1, on_demand_hourly_usd: 80.0, spot_hourly_usd: 30.0}
discounts:
  - {accelerator: tpu-v5p, percent_off: 25, capacity: [on-demand]}
"""
GKE_PRICED = GKE.replace("    max: 8\n    placement: compact", "    machine_type: a3-highgpu-8g\n    max: 8\n"
                         "    placement: compact").replace("    capacity: spot\n", "    capacity: spot\n"
                                                          "    machine_type: a3-highgpu-8g\n")
PRETRAIN = """\
name: pretrain
team: lang
options:
  - {accelerator: tpu-v5p, topology: 4x4x4}
duration_hours: 100
image: img:1
"""
BIG = PRETRAIN.replace("name: pretrain", "name: big").replace("topology: 4x4x4}", "topology: 4x4x4, slices: 3}")
MONTH = 730


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def commit(repo: Path, files: dict[str, str | bytes], message: str) -> None:
    for rel, content in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(content.encode() if isinstance(content, str) else content)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def fleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLEET_DEBUG"}
    env.setdefault("FLEET_NOW", "2026-01-15T12:00:00Z")     # the budget forecast runs to the end of its month
    return subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, check=False)


def cost_json(repo: Path, *args: str) -> dict[str, object]:
    r = fleet("cost", "--base", "HEAD~1", "--format", "json", *args, cwd=repo)
    assert r.returncode == 0, r.stderr
    doc: dict[str, object] = json.loads(r.stdout)
    return doc


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository after commit A; tests add B..E in order through `history`."""
    path = tmp_path_factory.mktemp("fleetrepo")
    git(path, "init", "-q", "-b", "main")
    files: dict[str, str | bytes] = {**base_files(), "fleet/clusters/gke-usc1.yaml": GKE_PRICED,
                                     "fleet/prices.yaml": PRICES}
    commit(path, files, "A: base")
    return path


def test_base_commit_costs_what_the_owned_pool_costs(repo: Path) -> None:
    r = fleet("cost", "--format", "json", cwd=repo)
    doc = json.loads(r.stdout)
    cost = doc["head"]["cost"]
    # vision/train takes 2 of the 4 owned nodes ($80/h); the other 2 are idle; nothing else is paid for.
    assert cost["hourly_usd"] == 160.0 and cost["monthly_usd"] == 160 * MONTH
    assert cost["by_team"]["vision"] == {"hourly_usd": 80.0, "monthly_usd": 80 * MONTH}
    assert cost["idle_hourly_usd"] == 80.0
    assert cost["jobs"] == [{"job": "vision/train", "team": "vision", "cluster": "onprem-sjc", "pool": "h100-owned",
                             "accelerator": "nvidia-h100-80gb", "accelerators": 16, "hourly_usd": 80.0,
                             "monthly_usd": 80 * MONTH, "duration_hours": 24.0, "run_hours": 48.0,
                             "run_usd": 80 * 48}]   # its H100 option runs at relative_speed 0.5: 24 h of v5p work
    # the plan's own cost block agrees with the cost model
    plan = json.loads(fleet("plan", "--format", "json", cwd=repo).stdout)["cost"]
    assert (plan["hourly_usd"], plan["idle_hourly_usd"], plan["by_team"]["vision"]) == (160.0, 80.0, 80.0)


def test_add_jobs_one_starts_one_waits(repo: Path) -> None:
    commit(repo, {"jobs/lang/pretrain.yaml": PRETRAIN, "jobs/lang/big.yaml": BIG}, "B: lang jobs")
    doc = cost_json(repo)
    # lang's 128 chips of nominal v5p quota plus the 64 vision lends in the cohort hold big's 3 slices (192
    # chips) or pretrain's 1, not both; the planner places the most work: big. Three new slices: +$576/h =
    # +$420,480/month on a base of $116,800 -> +360.0%
    # the headline: what the change commits (big's run cost, 100 h at $576/h), not the run-rate x 730
    assert doc["headline"] == "Starts 1 job committing $57,600 · 1 new job waits · run-rate +$576.00/h"
    assert doc["diff"]["monthly_delta_usd"] == 576 * MONTH
    d = doc["diff"]
    assert [(j["change"], j["job"], j["before"], j["after"], j["monthly_delta_usd"]) for j in d["jobs"]] == [
        ("start", "lang/big", "", "gke-usc1/v5p-4x4x4", 576 * MONTH),
        ("wait", "lang/pretrain", "", "pending", 0.0)]
    assert "insufficient tpu-v5p quota for team lang: 64 chips more needed" in d["jobs"][1]["detail"]
    assert d["pools"] == [{"cluster": "gke-usc1", "pool": "v5p-4x4x4", "accelerator": "tpu-v5p",
                           "target_before": 0, "target_after": 3, "monthly_delta_usd": 576 * MONTH}]
    assert d["by_team"][0] == {"name": "lang", "before_monthly_usd": 0.0, "after_monthly_usd": 576 * MONTH,
                               "delta_monthly_usd": 576 * MONTH}
    assert d["by_accelerator"][0]["name"] == "tpu-v5p" and d["by_accelerator"][0]["delta_monthly_usd"] == 576 * MONTH
    assert [(x["name"], x["delta_monthly_usd"]) for x in d["by_cluster"]] == [("gke-usc1", 576 * MONTH),
                                                                              ("onprem-sjc", 0.0)]
    assert doc["head"]["cost"]["jobs"][0]["run_usd"] == 576 * 100    # lang/big: 100 h at $576/h


def test_raise_quota_starts_the_waiting_job(repo: Path) -> None:
    commit(repo, {"policies/teams.yaml": TEAMS.replace("tpu-v5p: {nominal: 128}", "tpu-v5p: {nominal: 256}")},
           "C: lang quota")
    doc = cost_json(repo)
    # base B (planned on its own) runs big on 3 slices: $160 + $576 = $736/h = $537,280/month. One more slice
    # for pretrain: +$192/h = +$140,160/month -> +26.1%
    assert doc["headline"] == "Starts 1 job committing $19,200 · run-rate +$192.00/h"     # 100 h at $192/h
    assert doc["diff"]["monthly_delta_usd"] == 192 * MONTH
    d = doc["diff"]
    assert [(j["change"], j["job"], j["after"], j["monthly_delta_usd"]) for j in d["jobs"]] == [
        ("start", "lang/pretrain", "gke-usc1/v5p-4x4x4", 192 * MONTH)]
    assert d["jobs"][0]["detail"] == "was waiting"
    assert [(p["pool"], p["target_before"], p["target_after"]) for p in d["pools"]] == [("v5p-4x4x4", 3, 4)]
    team_quota = [q for q in d["quotas"] if q["cluster"] is None]
    assert team_quota == [{"team": "lang", "accelerator": "tpu-v5p", "cluster": None,
                           "before": {"nominal": 128, "borrowing_limit": None, "lending_limit": None},
                           "after": {"nominal": 256, "borrowing_limit": None, "lending_limit": None}}]


def test_drain_cluster_moves_the_job_and_keeps_paying_for_owned_nodes(repo: Path) -> None:
    onprem = base_files()["fleet/clusters/onprem-sjc.yaml"].decode()
    commit(repo, {"fleet/clusters/onprem-sjc.yaml": onprem.replace("kubernetes:", "status: draining\nkubernetes:")},
           "D: drain onprem-sjc")
    doc = cost_json(repo)
    # 2 on-demand H100 nodes: +$160/h = +$116,800/month on $677,440 -> +17.2%; the owned nodes stay paid (idle)
    # vision/train restarts elsewhere: 16 GPUs lose up to its checkpoint_minutes (30) of work = 8 accelerator-hours
    assert doc["headline"] == "Moves 1 running job (1 production): up to 8 accelerator-hours of work lost; " \
        "run-rate +$160.00/h"
    assert doc["diff"]["monthly_delta_usd"] == 160 * MONTH
    assert doc["impact"]["disrupted"] == [
        {"job": "vision/train", "change": "moves", "priority": "production", "kind": "training",
         "before": "onprem-sjc/h100-owned", "after": "gke-usc1/h100", "accelerators": 16, "checkpoint_minutes": 30,
         "lost_accelerator_hours_max": 8.0, "why": "cluster onprem-sjc is draining"}]
    d = doc["diff"]
    assert [(j["change"], j["job"], j["before"], j["after"], j["monthly_delta_usd"], j["detail"]) for j in d["jobs"]] \
        == [("move", "vision/train", "onprem-sjc/h100-owned", "gke-usc1/h100", 80 * MONTH,
             "cluster onprem-sjc is draining")]
    assert [(p["pool"], p["target_before"], p["target_after"], p["monthly_delta_usd"]) for p in d["pools"]] == [
        ("h100", 0, 2, 160 * MONTH)]
    head = doc["head"]["cost"]
    assert head["hourly_usd"] == 4 * 192 + 160 + 160 and head["idle_hourly_usd"] == 160.0
    assert head["by_cluster"]["onprem-sjc"]["hourly_usd"] == 160.0
    idle = next(x for x in d["by_team"] if x["name"] == "(idle capacity)")
    assert idle["delta_monthly_usd"] == 80 * MONTH       # the 2 owned nodes vision/train left


def test_budget_violation_is_listed_with_its_jobs_and_fails_only_when_asked(repo: Path) -> None:
    commit(repo, {"policies/teams.yaml": TEAMS.replace("tpu-v5p: {nominal: 128}", "tpu-v5p: {nominal: 256}")
                  .replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 100000")}, "E: vision budget")
    doc = cost_json(repo)
    # vision/train keeps running (2 H100 nodes, $160/h = $116,800/month), $16,800 over the $100,000 budget
    assert doc["budget_violations"] == [{"team": "vision", "budget_monthly_usd": 100000.0,
                                         "planned_monthly_usd": 160 * MONTH, "over_monthly_usd": 16800.0,
                                         "jobs": [{"job": "vision/train", "monthly_usd": 160 * MONTH,
                                                   "changed": False}]}]
    md = fleet("cost", "--base", "HEAD~1", cwd=repo)
    assert md.returncode == 0
    assert "### Budget violations (1)" in md.stdout
    assert "| vision | $100,000 | $116,800 | $16,800 | vision/train ($116,800) |" in md.stdout
    failed = fleet("cost", "--base", "HEAD~1", "--fail-on-violation", cwd=repo)
    assert failed.returncode == 1 and "team vision is planned at $116,800/month" in failed.stderr
    plan = fleet("plan", "--base", "HEAD~1", "--fail-on-violation", cwd=repo)
    assert plan.returncode == 1 and "### Budget violations (1)" in plan.stdout
    assert fleet("plan", "--base", "HEAD~1", cwd=repo).returncode == 0


def test_history_lists_every_commit_and_reuses_the_cache(repo: Path) -> None:
    r = fleet("cost", "--history", "10", "--format", "json", cwd=repo)
    assert r.returncode == 0, r.stderr
    points = json.loads(r.stdout)["history"]
    assert [p["subject"] for p in points] == ["A: base", "B: lang jobs", "C: lang quota", "D: drain onprem-sjc",
                                              "E: vision budget"]
    # each commit planned on its own (no base): A 160, B 736 (big's 3 slices: the most work lang's quota
    # holds; pretrain waits), C 928, D 1088 ($/h); in E vision/train is not
    # running yet, so its new $100,000 budget (= $136.99/h) keeps it from starting on $160/h: 4 x 192 + 160 = 928
    assert [p["hourly_usd"] for p in points] == [160.0, 736.0, 928.0, 1088.0, 928.0]
    assert [p["pending"] for p in points] == [0, 1, 0, 0, 1]
    cache = repo / ".fleet" / "cache" / "history"
    entries = sorted(cache.glob("*.json"))
    assert len(entries) == len(points)
    assert (repo / ".fleet" / "cache" / ".gitignore").read_text() == "*\n"
    entries[0].write_text("{not json")                  # a corrupt entry is ignored and recomputed
    again = json.loads(fleet("cost", "--history", "10", "--format", "json", cwd=repo).stdout)["history"]
    assert again == points
    assert json.loads(entries[0].read_text())["hourly_usd"] in {p["hourly_usd"] for p in points}


def test_out_writes_all_three_reports(repo: Path, tmp_path: Path) -> None:
    # head E against base B: lang/pretrain starts (+1 slice, +$140,160 on $537,280); vision/train stays on the
    # draining cluster because moving it to $160/h on-demand nodes would break vision's new budget
    r = fleet("cost", "--base", "HEAD~3", "--format", "html", "--out", str(tmp_path / "o"), cwd=repo)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["cost.html", "cost.json", "cost.md"]
    assert r.stdout == (tmp_path / "o" / "cost.html").read_text()
    md = (tmp_path / "o" / "cost.md").read_text()
    assert md.startswith("## Starts 1 job committing $19,200 · run-rate +$192.00/h\n")
    assert "Run-rate $736.00/h → **$928.00/h** (+$192.00/h; +$140,160 over a whole month of 730 h, +26.1%)." in md
    assert "| start | lang/pretrain | pending | gke-usc1/v5p-4x4x4 | +$140,160 | was waiting |" in md
    assert json.loads((tmp_path / "o" / "cost.json").read_text())["diff"]["monthly_delta_usd"] == 192 * MONTH


def test_unknown_base_is_a_clean_usage_error(repo: Path) -> None:
    r = fleet("cost", "--base", "no-such-branch", cwd=repo)
    assert r.returncode == 2 and "unknown git revision `no-such-branch`" in r.stderr and "Traceback" not in r.stderr


def test_shallow_clone_with_the_base_fetched(repo: Path, tmp_path: Path) -> None:
    base_sha = git(repo, "rev-parse", "HEAD~1").strip()
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(clone)], check=True)
    missing = fleet("cost", "--base", base_sha, cwd=clone)
    assert missing.returncode == 2 and "unknown git revision" in missing.stderr and "hint: fetch it" in missing.stderr
    git(clone, "fetch", "-q", "--depth", "1", "origin", base_sha)
    r = fleet("cost", "--base", base_sha, "--format", "json", cwd=clone)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["base"]["cost"]["hourly_usd"] == 1088.0


def test_cost_model_agrees_with_the_plan_cost_block_on_the_example() -> None:
    from reconciler.catalog import load_catalog
    from reconciler.cost.model import price
    from reconciler.pipeline import check
    from reconciler.plan import plan
    from reconciler.sources import read_worktree

    v = check(read_worktree(Path(__file__).resolve().parents[1]), load_catalog())
    p = plan(v)
    c = price(p, v).cost
    assert c.hourly_usd == pytest.approx(p.cost.hourly_usd)
    assert c.idle_hourly_usd == pytest.approx(p.cost.idle_hourly_usd)
    assert c.by_team == pytest.approx(p.cost.by_team) and c.by_cluster == pytest.approx(p.cost.by_cluster)
    assert sum(c.by_team.values()) + c.idle_hourly_usd == pytest.approx(c.hourly_usd)
    assert sum(c.by_accelerator.values()) == pytest.approx(c.hourly_usd)


def test_history_points_are_the_same_computed_in_worker_processes(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    """Cold history spreads the points over worker processes when there are many; the points do not depend
    on it (each is a pure function of its commit's files)."""
    from reconciler import history_cache as history
    from reconciler.catalog import load_catalog

    shutil.copytree(repo, tmp_path / "r", ignore=shutil.ignore_patterns(".fleet"))
    serial = history.collect(tmp_path / "r", 10, load_catalog())
    shutil.rmtree(tmp_path / "r" / ".fleet")
    spawned: list[int] = []
    real = history._pool

    def counting(workers: int, catalog: object) -> object:
        spawned.append(workers)
        return real(workers, catalog)  # type: ignore[arg-type]

    monkeypatch.setattr(history, "PARALLEL_FROM", 1)
    monkeypatch.setattr(history.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(history, "_pool", counting)
    assert history.collect(tmp_path / "r", 10, load_catalog()) == serial
    assert spawned == [2]


def test_written_plan_and_cost_report_add_up_and_agree_on_the_example() -> None:
    """The money rule (plan/types.py): unit prices are whole cents, so the numbers as written add up exactly.
    Before it, p5en printed 63.3 x 16 = 1012.74 and the plan's monthly cost was not its hourly cost x 730."""
    from reconciler.catalog import load_catalog
    from reconciler.cost.model import price
    from reconciler.pipeline import check
    from reconciler.plan import plan
    from reconciler.sources import read_worktree

    v = check(read_worktree(Path(__file__).resolve().parents[1]), load_catalog())
    p = plan(v)
    doc, report = p.to_dict(), price(p, v).cost.to_dict()
    c = doc["cost"]
    assert all(u.hourly_usd == round(u.hourly_usd, 2) for u in v.unit_prices.values())
    for x in doc["pools"]:
        assert round(x["unit_hourly_usd"] * x["target"], 2) == x["hourly_usd"], x
    assert round(sum(x["hourly_usd"] for x in doc["pools"]), 2) == c["hourly_usd"]
    assert round(sum(c["by_cluster"].values()), 2) == c["hourly_usd"]
    assert c["monthly_usd"] == round(c["hourly_usd"] * MONTH, 2)
    # the cost report states the same numbers (the example's only reserved pool is fixed-size, so paid = target)
    assert (report["hourly_usd"], report["monthly_usd"], report["idle_hourly_usd"]) == \
        (c["hourly_usd"], c["monthly_usd"], c["idle_hourly_usd"])
    assert {k: x["hourly_usd"] for k, x in report["by_cluster"].items()} == c["by_cluster"]
    assert {k: x["hourly_usd"] for k, x in report["by_team"].items()} == c["by_team"]
    assert [(x["cluster"], x["pool"], x["unit_hourly_usd"], x["hourly_usd"]) for x in report["pools"]] == \
        [(x["cluster"], x["pool"], x["unit_hourly_usd"], x["hourly_usd"]) for x in doc["pools"]]
    for rows in ("by_cluster", "by_accelerator", "by_capacity"):
        for k, x in report[rows].items():
            assert x["monthly_usd"] == round(x["hourly_usd"] * MONTH, 2), (rows, k, x)


@pytest.mark.parametrize(("hourly_usd", "unit"), [(40.0049, 40.0), (12.345678, 12.35), (0.001, 0.0), (63.29625, 63.3)])
def test_a_unit_price_is_whole_cents(hourly_usd: float, unit: float) -> None:
    from reconciler.catalog import load_catalog
    from reconciler.pipeline import check

    onprem = base_files()["fleet/clusters/onprem-sjc.yaml"].decode().replace("hourly_usd: 40.0",
                                                                            f"hourly_usd: {hourly_usd}")
    v = check({**base_files(), "fleet/clusters/onprem-sjc.yaml": onprem.encode()}, load_catalog())
    assert v.ok, v.errors
    assert v.unit_prices["onprem-sjc/h100-owned"].hourly_usd == unit


def test_a_history_point_is_cached_exactly() -> None:
    """JSON floats round-trip by repr, so the cache holds the point as computed; the report rounds."""
    from reconciler.cost.history import HistoryPoint

    point = HistoryPoint("abc", "2026-01-01T00:00:00Z", "s", 0, 25633.778541, 12.3456789, 3, 1,
                         {"vision": 0.1 + 0.2, "lang": 1e-7})
    assert HistoryPoint.from_dict(json.loads(json.dumps(point.to_dict()))) == point
    shown = point.report_dict()
    assert (shown["hourly_usd"], shown["monthly_usd"]) == (25633.78, round(25633.78 * MONTH, 2))
    old = {**point.to_dict(), "hourly_usd": 25633.78}
    del old["format"]
    with pytest.raises(ValueError):                     # a rounded entry of the old format is recomputed
        HistoryPoint.from_dict(old)
    with pytest.raises(ValueError):
        HistoryPoint.from_dict({**point.to_dict(), "hourly_usd": float("inf")})


def test_cached_history_is_byte_for_byte_the_fresh_one(tmp_path: Path) -> None:
    """Prices that are not whole cents once made `fleet cost --history` differ by dollars once cached."""
    onprem = base_files()["fleet/clusters/onprem-sjc.yaml"].decode().replace("hourly_usd: 40.0",
                                                                            "hourly_usd: 40.0049")
    git(tmp_path, "init", "-q", "-b", "main")
    commit(tmp_path, {**base_files(), "fleet/clusters/onprem-sjc.yaml": onprem}, "A: owned at 40.0049")
    commit(tmp_path, {"fleet/prices.yaml": "prices:\n  - {accelerator: tpu-v5p, on_demand_hourly_usd: 4.123457}\n",
                      "jobs/lang/pretrain.yaml": PRETRAIN}, "B: v5p at 4.123457 a chip")
    commit(tmp_path, {"fleet/clusters/onprem-sjc.yaml": onprem.replace("40.0049", "38.3333")}, "C: cheaper")
    outputs = []
    for _ in range(2):                                  # fresh, then every point from the cache
        runs = [fleet("cost", "--history", "5", "--format", f, cwd=tmp_path) for f in ("json", "md")]
        assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
        outputs.append([r.stdout for r in runs])
    assert len(list((tmp_path / ".fleet" / "cache" / "history").glob("*.json"))) == 3
    assert outputs[0] == outputs[1]
    points = json.loads(outputs[0][0])["history"]
    assert all(p["monthly_usd"] == round(p["hourly_usd"] * MONTH, 2) for p in points), points
