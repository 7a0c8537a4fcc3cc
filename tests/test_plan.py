"""Planner behaviour, case by case, on small fleets built from tests/builders.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.pipeline import check
from reconciler.plan import Plan, plan, plan_from_dict
from reconciler.plan.explain import explain
from reconciler.plan.markdown import to_markdown
from reconciler.plan.planner import plan_with_state
from reconciler.sources import read_worktree

from builders import GKE, ONPREM, TEAMS, with_files

CAT = load_catalog()
ROOT = Path(__file__).resolve().parents[1]


def gpu_job(name: str, team: str = "vision", count: int = 8, **extra: object) -> str:
    lines = [f"name: {name}", f"team: {team}", "options:", f"  - {{accelerator: nvidia-h100-80gb, count: {count}}}",
             "image: img:1"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def tpu_job(name: str, team: str = "vision", topology: str = "4x4x4", slices: int = 1, **extra: object) -> str:
    lines = [f"name: {name}", f"team: {team}", "options:",
             f"  - {{accelerator: tpu-v5p, topology: {topology}, slices: {slices}}}", "image: img:1"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def run(jobs: dict[str, str], *, drop_train: bool = True, base: Plan | None = None,
        changes: dict[str, str | None] | None = None) -> Plan:
    files: dict[str, str | bytes | None] = {f"jobs/{k}.yaml": v for k, v in jobs.items()}
    if drop_train:
        files["jobs/vision/train.yaml"] = None
    files.update(changes or {})
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    return plan(v, base)


def where(p: Plan, job: str) -> tuple[str, str, tuple[int, ...]] | None:
    pl = p.placement_of(job)
    return (pl.cluster, pl.pool, pl.units) if pl else None


def test_small_gpu_jobs_fill_owned_nodes_first_and_share_them() -> None:
    p = run({"vision/a": gpu_job("a", count=2), "vision/b": gpu_job("b", count=4)})
    assert where(p, "vision/a") == ("onprem-sjc", "h100-owned", (0,))
    assert where(p, "vision/b") == ("onprem-sjc", "h100-owned", (0,))     # best fit: same node
    assert p.placement_of("vision/a").hourly_usd == pytest.approx(40.0 * 2 / 8)


def test_multi_node_gang_takes_whole_nodes_of_one_pool() -> None:
    # 6 owned nodes are needed but only 4 exist: the gang goes whole to the on-demand pool instead
    p = run({"vision/big": gpu_job("big", count=48)})
    assert where(p, "vision/big") == ("gke-usc1", "h100", (0, 1, 2, 3, 4, 5))
    pool = next(x for x in p.pools if x.pool == "h100")
    node = CAT.price_for(accelerator="nvidia-h100-80gb", machine_type="a3-highgpu-8g", region="us-central1")
    assert node is not None
    assert (pool.target, pool.used, pool.hourly_usd) == (6, 6, pytest.approx(6 * node.on_demand))


def test_tpu_multislice_takes_exact_slices_in_one_pool() -> None:
    p = run({"vision/ms": tpu_job("ms", slices=3)})
    placed = p.placement_of("vision/ms")
    assert placed is not None
    assert (placed.pool, placed.units, placed.accelerators_per_unit) == ("v5p-4x4x4", (0, 1, 2), 64)


def test_quota_shortfall_is_quantified() -> None:
    # lang: 128 v5p chips nominal, no borrowing room left in the cohort once vision lends only 64
    p = run({"lang/big": tpu_job("big", team="lang", slices=4)})
    assert p.pending[0].reasons == ("insufficient tpu-v5p quota for team lang: 64 chips more needed (team lang "
                                    "uses 0 of its nominal 128 and asks 256 more, the cohort has 64 left to lend)",)


def test_borrowing_within_the_lending_limit() -> None:
    # lang needs 192 chips: 128 own + 64 borrowed from vision's lending_limit of 64
    p = run({"lang/big": tpu_job("big", team="lang", slices=3)})
    placed = p.placement_of("lang/big")
    assert placed is not None and placed.accelerators_per_unit * len(placed.units) == 192
    quota = {(q.team, q.accelerator): q for q in p.quotas if q.cluster == placed.cluster}
    lang, vision = quota["lang", "tpu-v5p"], quota["vision", "tpu-v5p"]
    assert (lang.nominal, vision.lending_limit) == (128, 64)     # lang's ClusterQueue lends it nothing of its own
    assert lang.borrowing_limit is None or lang.borrowing_limit >= 64   # the 64 chips over it are borrowed


def test_higher_priority_first_when_capacity_is_short() -> None:
    jobs = {"vision/low": tpu_job("low", slices=3, priority="research"),
            "vision/high": tpu_job("high", slices=3, priority="production")}
    p = run(jobs)
    assert p.placement_of("vision/high") is not None
    assert [x.job for x in p.pending] == ["vision/low"]
    assert p.pending[0].reasons == (   # both, sorted: 192 + 192 chips is over vision's 256 + 64 borrowable
        "insufficient tpu-v5p quota for team vision: 64 chips more needed (team vision uses 192 of its nominal "
        "256 and asks 192 more, borrows 0 of its borrowing limit 64, the cohort has 128 left to lend; held by "
        "vision/high (192 chips))",
        "not enough free tpu-v5p 4x4x4 x3 capacity: needs 3 slices, the 1 matching pool(s) have at most 1 slice free; "
        "held by vision/high (192 chips)")


def test_fair_share_alternates_between_teams() -> None:
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 512}").replace(
        "nvidia-h100-80gb: {nominal: 32}", "nvidia-h100-80gb: {nominal: 512}").replace("weight: 2", "weight: 1")
    jobs = {f"{t}/{t[0]}{i}": gpu_job(f"{t[0]}{i}", team=t, count=64) for t in ("vision", "lang") for i in range(4)}
    gke = GKE.replace("    max: 8\n    placement: compact\n", "    max: 16\n    placement: compact\n")
    p = run(jobs, changes={"policies/teams.yaml": teams, "fleet/clusters/onprem-sjc.yaml": None,
                           "fleet/clusters/gke-usc1.yaml": gke})
    placed = sorted(x.job for x in p.placements)
    # 16 on-demand H100 nodes hold two 64-GPU gangs; equal weights and shares: one for each team
    assert sum(j.startswith("vision/") for j in placed) == sum(j.startswith("lang/") for j in placed) == 1


def test_team_budget_caps_what_it_is_planned_onto() -> None:
    teams = TEAMS.replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 100000")
    p = run({"vision/ms": tpu_job("ms", slices=1)}, changes={"policies/teams.yaml": teams})
    assert p.pending[0].reasons == ("monthly budget of team vision ($100,000) would be exceeded: the job costs "
                                    "$196,224/month and $100,000 is left",)


def test_a_job_its_quota_and_its_budget_both_block_is_told_both() -> None:
    """A job short of quota whose budget would block it too: freeing the quota would not start it, and the reason
    says so (before 2026-12-06 only the quota was named, the budget only when nothing else blocked)."""
    teams = TEAMS.replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 100000").replace(
        "tpu-v5p: {nominal: 256, borrowing_limit: 64, lending_limit: 64}", "tpu-v5p: {nominal: 64, borrowing_limit: 0}")
    p = run({"vision/ms": tpu_job("ms", slices=2)}, changes={"policies/teams.yaml": teams})
    assert p.pending[0].reasons == (
        "insufficient tpu-v5p quota for team vision: 64 chips more needed (team vision uses 0 of its nominal 64 and "
        "asks 128 more, borrows 0 of its borrowing limit 0, the cohort has 128 left to lend)",
        "monthly budget of team vision ($100,000) would be exceeded: the job costs $392,448/month and $100,000 is "
        "left")
    # no room either: the budget is reckoned on the cheapest matching pool, as the least the job would cost
    lang = {"lang/two": tpu_job("two", team="lang", slices=2)}   # kept from the base: 2 of the 4 slices
    base = run(lang, changes={"policies/teams.yaml": teams})
    p = run({**lang, "vision/ms": tpu_job("ms", slices=3)}, base=base, changes={"policies/teams.yaml": teams})
    assert [x.job for x in p.pending] == ["vision/ms"]
    assert [r.split(":")[0] for r in p.pending[0].reasons] == [
        "insufficient tpu-v5p quota for team vision", "monthly budget of team vision ($100,000) would be exceeded",
        "not enough free tpu-v5p 4x4x4 x3 capacity"]
    assert "the job costs at least $588,672/month and $100,000 is left" in p.pending[0].reasons[1]
    # within budget: quota alone is named
    p = run({"vision/ms": tpu_job("ms", slices=2)},
            changes={"policies/teams.yaml": teams.replace("budget_monthly_usd: 100000", "budget_monthly_usd: 500000")})
    assert [r.split(":")[0] for r in p.pending[0].reasons] == ["insufficient tpu-v5p quota for team vision"]


def test_spot_never_stays_off_spot_and_opportunistic_goes_to_spot() -> None:
    gke = GKE.replace("    max: 8\n    placement: compact\n", "    max: 0\n    placement: compact\n")
    onprem = ONPREM + "status: down\n"
    p = run({"vision/safe": gpu_job("safe", count=8),
             "vision/cheap": gpu_job("cheap", count=8, priority="opportunistic")},
            changes={"fleet/clusters/gke-usc1.yaml": gke, "fleet/clusters/onprem-sjc.yaml": onprem})
    assert where(p, "vision/cheap") == ("gke-usc1", "h100-spot", (0,))
    assert p.placement_of("vision/safe") is None
    assert p.pending[0].reasons == (
        "no pool in an active cluster has room for 8x nvidia-h100-80gb on non-spot capacity (onprem-sjc is down)",)


def test_data_region_is_preferred_even_when_dearer() -> None:
    onprem = ONPREM.replace("region: sjc", "region: us-west9")
    p = run({"vision/near": gpu_job("near", count=8, data_region="us-central1")},
            changes={"fleet/clusters/onprem-sjc.yaml": onprem})
    assert where(p, "vision/near") == ("gke-usc1", "h100", (0,))


def test_stickiness_keeps_running_jobs_even_if_cheaper_room_appears() -> None:
    jobs = {"vision/a": gpu_job("a", count=8)}
    base = run(jobs, changes={"fleet/clusters/onprem-sjc.yaml": None})
    assert where(base, "vision/a") == ("gke-usc1", "h100", (0,))
    head = run(jobs, base=base)   # the owned pool is back and cheaper: the job stays
    assert where(head, "vision/a") == ("gke-usc1", "h100", (0,))
    assert head.placement_of("vision/a").status == "kept"


def test_down_cluster_fails_over_and_says_why() -> None:
    jobs = {"vision/a": gpu_job("a", count=8)}
    base = run(jobs)
    assert where(base, "vision/a")[0] == "onprem-sjc"
    head = run(jobs, base=base, changes={"fleet/clusters/onprem-sjc.yaml": ONPREM + "status: down\n"})
    moved = head.placement_of("vision/a")
    assert (moved.cluster, moved.status, moved.reason) == ("gke-usc1", "moved", "cluster onprem-sjc is down")


def test_draining_moves_at_most_max_migrations() -> None:
    jobs = {f"vision/j{i}": gpu_job(f"j{i}", count=8, checkpoint_minutes=10 * i) for i in range(3)}
    base = run(jobs)
    assert {where(base, j)[0] for j in jobs} == {"onprem-sjc"}
    head = run(jobs, base=base, changes={"fleet/clusters/onprem-sjc.yaml": ONPREM + "status: draining\n",
                                         "policies/placement.yaml": "max_migrations_per_plan: 2\n"})
    placed = {j: (head.placement_of(j).status, head.placement_of(j).reason) for j in jobs}
    assert placed == {   # least lost work first; the one left behind says why
        "vision/j0": ("moved", "cluster onprem-sjc is draining"),
        "vision/j1": ("moved", "cluster onprem-sjc is draining"),
        "vision/j2": ("kept", "cluster onprem-sjc is draining; waits for the migration limit (2 per plan)")}


def test_draining_jobs_with_nowhere_to_go_stay_and_say_why() -> None:
    # Three 8-GPU jobs on the owned nodes; the cloud pool now holds one node: one moves, two stay, each with
    # the numbers that keep it there, in the JSON, the Markdown and `fleet explain`.
    jobs = {f"vision/j{i}": gpu_job(f"j{i}", count=8, checkpoint_minutes=10 * i) for i in range(3)}
    base = run(jobs)
    assert {where(base, j)[0] for j in jobs} == {"onprem-sjc"}
    gke = GKE.replace("    max: 8\n    placement: compact\n", "    max: 1\n    placement: compact\n")
    changes = {"fleet/clusters/onprem-sjc.yaml": ONPREM + "status: draining\n", "fleet/clusters/gke-usc1.yaml": gke}
    head = run(jobs, base=base, changes=changes)
    stay = ("cluster onprem-sjc is draining; no room elsewhere: not enough free 8x nvidia-h100-80gb capacity: "
            "needs 1 node, the 1 matching pool(s) have at most 0 nodes free; held by vision/j0 (8 GPUs)")
    assert {j: (head.placement_of(j).cluster, head.placement_of(j).status, head.placement_of(j).reason)
            for j in jobs} == {"vision/j0": ("gke-usc1", "moved", "cluster onprem-sjc is draining"),
                               "vision/j1": ("onprem-sjc", "kept", stay),
                               "vision/j2": ("onprem-sjc", "kept", stay)}
    assert json.loads(head.to_json())["placements"][1]["reason"] == stay
    md = to_markdown(head)
    assert "**2 still on draining clusters**" in md.splitlines()[2]
    section = md.split("## Still on draining clusters\n", 1)[1].split("\n## ", 1)[0]
    assert [line for line in section.splitlines() if line.startswith("| vision/")] == [
        f"| vision/j1 | onprem-sjc/h100-owned | {stay} |", f"| vision/j2 | onprem-sjc/h100-owned | {stay} |"]
    v = check(with_files({**{f"jobs/{k}.yaml": b for k, b in jobs.items()}, "jobs/vision/train.yaml": None,
                          **changes}), CAT)
    result, state = plan_with_state(v, base)
    assert f"**still on a draining cluster**: {stay}" in explain(result, state, "vision/j1").splitlines()
    assert "Still on draining clusters" not in to_markdown(base)


def test_nominal_quota_lent_to_a_higher_class_says_so_in_numbers() -> None:
    # vision's production job borrows 64 of the 128 v5p chips lang lends; lang's research job, within its own
    # nominal 128, waits: the reason names the lent chips and the borrower, not a bare "64 more needed".
    gke = GKE.replace("    max: 4\n", "    max: 8\n")
    jobs = {"vision/big": tpu_job("big", slices=5, priority="production"),
            "lang/own": tpu_job("own", team="lang", slices=2, priority="research")}
    p = run(jobs, changes={"fleet/clusters/gke-usc1.yaml": gke})
    assert p.placement_of("vision/big") is not None
    assert [(x.job, x.reasons) for x in p.pending] == [("lang/own", (
        "insufficient tpu-v5p quota for team lang: 64 chips more needed (64 of team lang's nominal tpu-v5p quota "
        "(128) are lent to cohort-mates (vision borrows 64); reclaiming them needs preemption; held by vision/big "
        "(320 chips))",))]


def test_preemption_names_its_cause_and_spares_critical_jobs() -> None:
    gke = GKE.replace("    max: 4\n", "    max: 2\n")
    low = {"vision/low": tpu_job("low", slices=1, priority="research", checkpoint_minutes=5),
           "vision/crit": tpu_job("crit", slices=1, priority="critical")}
    base = run(low, changes={"fleet/clusters/gke-usc1.yaml": gke})
    head = run({**low, "vision/urgent": tpu_job("urgent", slices=1, priority="production")}, base=base,
               changes={"fleet/clusters/gke-usc1.yaml": gke})
    assert [(x.job, x.by) for x in head.preemptions] == [("vision/low", "vision/urgent")]
    assert head.preemptions[0].reason.startswith("preempted by vision/urgent (priority 1000): lower priority")
    assert head.placement_of("vision/crit").status == "kept"
    assert any(r.startswith("preempted:") for r in next(x for x in head.pending if x.job == "vision/low").reasons)


def test_plan_json_matches_the_contract_and_is_deterministic() -> None:
    jobs = {"vision/a": gpu_job("a", count=2), "vision/ms": tpu_job("ms", slices=2), "lang/x": gpu_job("x", "lang", 64)}
    first, second = run(jobs).to_json(), run(jobs).to_json()
    assert first == second
    doc = json.loads(first)
    assert list(doc) == ["version", "placements", "pending", "preemptions", "pools", "quotas", "cost"]
    assert set(doc["placements"][0]) >= {"job", "cluster", "pool", "option", "units", "accelerators_per_unit",
                                         "status", "hourly_usd"}
    assert set(doc["pools"][0]) == {"cluster", "pool", "min", "max", "target", "used", "unit_accelerators",
                                    "unit_hourly_usd", "hourly_usd"}
    assert set(doc["cost"]) == {"hourly_usd", "monthly_usd", "idle_hourly_usd", "by_team", "by_cluster"}
    assert plan_from_dict(doc).to_json() == first
    assert [p["job"] for p in doc["placements"]] == sorted(p["job"] for p in doc["placements"])


def test_quotas_per_cluster_sum_to_the_team_quota() -> None:
    p = run({"vision/ms": tpu_job("ms", slices=2)})
    for team, acc, nominal in (("vision", "tpu-v5p", 256), ("vision", "nvidia-h100-80gb", 64),
                               ("lang", "nvidia-h100-80gb", 32)):
        assert sum(q.nominal for q in p.quotas if (q.team, q.accelerator) == (team, acc)) == nominal


def test_cost_block_adds_up() -> None:
    p = run({"vision/a": gpu_job("a", count=2), "vision/ms": tpu_job("ms", slices=2)})
    assert p.cost.hourly_usd == pytest.approx(sum(x.hourly_usd for x in p.pools))
    assert p.cost.idle_hourly_usd == pytest.approx(p.cost.hourly_usd - sum(x.hourly_usd for x in p.placements))
    assert p.cost.monthly_usd == pytest.approx(p.cost.hourly_usd * 730)


def test_example_plan_cli_and_explain() -> None:
    r = CliRunner().invoke(cli, ["plan", "--repo", str(ROOT), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert len(doc["placements"]) + len(doc["pending"]) >= 40
    r = CliRunner().invoke(cli, ["plan", "--repo", str(ROOT)])
    assert r.output.startswith("# Fleet plan\n\n**")
    job = doc["placements"][0]["job"]
    r = CliRunner().invoke(cli, ["explain", job, "--repo", str(ROOT)])
    assert r.exit_code == 0 and f"# {job}" in r.output and "**placed**" in r.output
    r = CliRunner().invoke(cli, ["explain", "nobody/nothing", "--repo", str(ROOT)])
    assert r.exit_code != 0


def test_the_printed_json_in_chunks_is_the_written_plan_byte_for_byte(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleet plan --format json` prints the plan in chunks (the 100,000-job plan is 53 MB): the same bytes as
    `--out` writes (one text), however small the chunks."""
    from reconciler import jsontext

    written = CliRunner().invoke(cli, ["plan", "--repo", str(ROOT), "--format", "json", "--out", str(tmp_path)])
    assert written.exit_code == 0, written.output
    monkeypatch.setattr(jsontext, "CHUNK_PIECES", 7)
    printed = CliRunner().invoke(cli, ["plan", "--repo", str(ROOT), "--format", "json"])
    assert printed.exit_code == 0 and printed.output == written.output == (tmp_path / "plan.json").read_text()


def test_plan_refuses_an_invalid_repository(tmp_path: Path) -> None:
    for rel, content in with_files({"jobs/vision/train.yaml": "name: [\n"}).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    from reconciler.problems import RejectedError
    r = CliRunner().invoke(cli, ["plan", "--repo", str(tmp_path)])
    assert isinstance(r.exception, RejectedError)


SOLO_TEAMS = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 16}").replace(
    "    cohort: research\n    weight: 2\n", "    weight: 2\n")   # vision alone: 16 H100s, no cohort


def test_preemption_frees_quota_held_in_another_pool() -> None:
    # Defect 3: vision's opportunistic job runs on the spot pool and holds 8 of vision's 16 H100s (no cohort);
    # the production job may not use spot, so it lands on the owned pool, where none of vision's work runs.
    # Preempting the spot job frees the quota it needs: the spot pool is no place the job could run, so its victim
    # there may free quota (issue 22); with a `spot:` quota, nothing is preempted (tests/test_preempt_cheap.py).
    changes = {"policies/teams.yaml": SOLO_TEAMS}
    low = {"vision/low": gpu_job("low", count=8, priority="opportunistic", checkpoint_minutes=5)}
    base = run(low, changes=changes)
    assert where(base, "vision/low") == ("gke-usc1", "h100-spot", (0,))
    head = run({**low, "vision/urgent": gpu_job("urgent", count=16, priority="production", spot="never")},
               base=base, changes=changes)
    assert [(x.job, x.by) for x in head.preemptions] == [("vision/low", "vision/urgent")]
    assert where(head, "vision/urgent") == ("onprem-sjc", "h100-owned", (0, 1))
    assert head.placement_of("vision/low") is None


def test_preemption_takes_the_fewest_victims_and_leaves_unneeded_ones_running() -> None:
    # Two small opportunistic jobs (1 GPU each, least work lost) and one of 8 hold vision's spot quota in the spot
    # pool (10 of 16); the production spot job needs 8, 2 more than is left: preempting the two small ones frees
    # enough but takes two victims; the single 8-GPU job is one victim, so it goes and the small ones stay.
    changes = {"policies/teams.yaml": SOLO_TEAMS.replace("{nominal: 16}", "{nominal: 16, spot: 16}")}
    low = {"vision/s1": gpu_job("s1", count=1, priority="opportunistic", checkpoint_minutes=1),
           "vision/s2": gpu_job("s2", count=1, priority="opportunistic", checkpoint_minutes=1),
           "vision/big": gpu_job("big", count=8, priority="opportunistic", checkpoint_minutes=60)}
    base = run(low, changes=changes)
    assert len(base.placements) == 3
    head = run({**low, "vision/urgent": gpu_job("urgent", count=8, priority="production", spot="required")},
               base=base, changes=changes)
    assert [(x.job, x.by) for x in head.preemptions] == [("vision/big", "vision/urgent")]
    assert {p.job for p in head.placements} == {"vision/s1", "vision/s2", "vision/urgent"}


def test_example_with_eks_down_runs_the_production_job_by_preempting_its_teams_research_work() -> None:
    # Defect 3 on the example: with eks-use1 down, rl's production agentic-rl-long-horizon must move; rl's
    # research work running on other clusters holds the H100 quota it needs, and is preempted for it.
    files = read_worktree(ROOT)
    base = plan(check(files, CAT))
    key = "fleet/clusters/eks-use1.yaml"
    files[key] = files[key].replace(b"status: active", b"status: down")
    head = plan(check(files, CAT), base)
    job = "rl/agentic-rl-long-horizon"
    assert head.placement_of(job) is not None, next(p.reasons for p in head.pending if p.job == job)
    # With data locality (defect 1) rl's research selfplay-v5p runs on its TPU option, so the H100 quota the
    # production job needs may be free without preempting anything; whatever it preempts is rl's own work.
    victims = [p for p in head.preemptions if p.by == job]
    assert all(p.job.startswith("rl/") for p in victims)


def test_a_waiting_job_gives_the_reason_that_bound_when_it_was_decided() -> None:
    # Defect 4: after a budget cut, vision's production job (16 GPUs, was running on-prem, now down) no longer
    # fits its team's budget; a cheaper research job of vision then takes 8 of vision's 16 H100s. On the final
    # state the production job is also short of quota, but what decided was the budget: the plan says so.
    down = {"fleet/clusters/onprem-sjc.yaml": ONPREM + "status: down\n", "policies/teams.yaml": SOLO_TEAMS}
    urgent = {"vision/urgent": gpu_job("urgent", count=16, priority="production", spot="never")}
    base = run(urgent, changes={"policies/teams.yaml": SOLO_TEAMS})
    assert base.placement_of("vision/urgent") is not None
    alone = run(urgent, changes=down)   # what it costs where it can run now
    monthly = alone.placement_of("vision/urgent").hourly_usd * 730
    cut = SOLO_TEAMS.replace("budget_monthly_usd: 5000000", f"budget_monthly_usd: {int(monthly * 0.9)}")
    jobs = {**urgent, "vision/small": gpu_job("small", count=8, spot="never")}
    head = run(jobs, base=base, changes={**down, "policies/teams.yaml": cut})
    assert head.placement_of("vision/small") is not None
    [pending] = head.pending
    assert pending.job == "vision/urgent"
    assert "was running, but cluster onprem-sjc is down" in pending.reasons
    assert any(r.startswith("monthly budget of team vision") for r in pending.reasons), pending.reasons
    assert not any("insufficient" in r for r in pending.reasons), pending.reasons


def test_a_quota_reason_names_the_jobs_that_hold_the_quota() -> None:
    changes = {"policies/teams.yaml": SOLO_TEAMS}
    jobs = {"vision/a": gpu_job("a", count=8, priority="production"), "vision/b": gpu_job("b", count=16)}
    p = run(jobs, changes=changes)
    [pending] = p.pending
    assert pending.job == "vision/b"
    assert pending.reasons[0].endswith("; held by vision/a (8 GPUs))"), pending.reasons


def test_explain_gives_the_rule_the_run_cost_only_real_alternatives_and_json(tmp_path: Path) -> None:
    # Defect 8: vision/a runs on the owned nodes (8 GPUs at $40/h for 10 h). GKE's on-demand H100s fit too
    # (dearer: a real alternative); its TPU option has room but is over vision's budget ($100,000/month), so it
    # is not an alternative that fits. The rule and the run cost are stated, in Markdown and in JSON.
    teams = TEAMS.replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 100000")
    a = gpu_job("a", count=8, duration_hours=10, spot="never").replace(
        "image:", "  - {accelerator: tpu-v5p, topology: 4x4x4}\nimage:")
    files = with_files({"jobs/vision/train.yaml": None, "policies/teams.yaml": teams, "jobs/vision/a.yaml": a})
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    r = CliRunner().invoke(cli, ["explain", "vision/a", "--repo", str(tmp_path), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["placed"]["pool"] == "h100-owned" and doc["placed"]["run_cost_usd"] == 400.0
    assert doc["rule"].startswith("owned capacity costs no new money; the next alternative, gke-usc1/h100, adds $")
    assert [(x["pool"], x["fits"]) for x in doc["alternatives"]] == [("gke-usc1/h100", True)]
    assert doc["alternatives"][0]["run_cost_usd"] == round(doc["alternatives"][0]["hourly_usd"] * 10, 2)
    [tpu] = doc["not_possible"]
    assert tpu["pool"] == "gke-usc1/v5p-4x4x4" and tpu["hourly_usd"] * 730 > 100000   # its own spend set aside
    assert tpu["why_not"] == ["team budget: $100,000/month left"]
    text = CliRunner().invoke(cli, ["explain", "vision/a", "--repo", str(tmp_path)]).output
    assert "**decided by**: owned capacity costs no new money" in text and "$400 for its 10 h" in text
    assert "| 0 8x nvidia-h100-80gb | gke-usc1/h100 |" in text and "| 1 tpu-v5p" not in text


def test_example_finishing_a_job_releases_its_nodes_and_leaves_no_paid_hole() -> None:
    # Defect 5 on the example: rl/grpo-math (8 p5 spot nodes below other jobs' nodes) finishes. Its nodes are
    # released: the cost falls by what it paid, idle cost does not rise, and every GPU unit stays below target.
    files = read_worktree(ROOT)
    base = plan(check(files, CAT))
    gone = base.placement_of("rl/grpo-math")
    assert gone is not None
    del files["jobs/rl/grpo-math.yaml"]
    head = plan(check(files, CAT), base)
    assert head.cost.hourly_usd == pytest.approx(base.cost.hourly_usd - gone.hourly_usd)
    assert head.cost.idle_hourly_usd <= base.cost.idle_hourly_usd + 1e-6
    pools = {(x.cluster, x.pool): x for x in head.pools}
    for pl in head.placements:
        assert max(pl.units) < pools[(pl.cluster, pl.pool)].target, pl
    kept = {pl.job for pl in head.placements if pl.status == "kept"}
    assert kept == {pl.job for pl in base.placements} - {"rl/grpo-math"}


def test_a_freed_tpu_slice_below_a_kept_one_is_released_and_not_rendered() -> None:
    # Defect 5: two one-slice TPU jobs on slices 0 and 1; the first finishes. The second keeps slice 1 (a
    # running job never moves only to compact), the pool pays for one slice, and the infra stack spec creates
    # exactly that slice's node pool.
    from reconciler.render import render

    jobs = {"vision/a": tpu_job("a"), "vision/b": tpu_job("b")}
    base = run(jobs)
    slices = {j: base.placement_of(j).units for j in jobs}  # type: ignore[union-attr]
    assert sorted(slices.values()) == [(0,), (1,)]
    first = next(j for j, u in slices.items() if u == (0,))
    second = next(j for j in jobs if j != first)
    files: dict[str, str | bytes | None] = {f"jobs/{k}.yaml": v for k, v in jobs.items()}
    files.update({"jobs/vision/train.yaml": None, f"jobs/{first}.yaml": None})
    v = check(with_files(files), CAT)
    head = plan(v, base)
    assert where(head, second) == ("gke-usc1", "v5p-4x4x4", (1,))
    pool = next(x for x in head.pools if x.pool == "v5p-4x4x4")
    assert (pool.target, pool.used) == (1, 1) and pool.hourly_usd == pytest.approx(pool.unit_hourly_usd)
    spec = json.loads(render(v, head, CAT)["stacks/gke-usc1-infra.json"])
    tpu = [np["name"] for np in spec["node_pools"] if np["pool"] == "v5p-4x4x4"]
    assert tpu == ["v5p-4x4x4-s1"]


def test_example_jobs_run_where_their_data_is() -> None:
    # Defect 1 on the example: interp/sae-train-70b and interp/activation-dump (data on the San Jose NFS) ran
    # on AWS p5 while jobs with no data region filled the owned on-prem pool. Now they run on-prem, and exactly
    # the placements outside their job's data region are flagged.
    v = check(read_worktree(ROOT), CAT)
    p = plan(v)
    region = {pool.key: pool.region for pool in v.pools}
    data = {j.id: j.data_region for j in v.loaded.jobs}
    for job in ("interp/sae-train-70b", "interp/activation-dump"):     # on-prem: Kubernetes or the Slurm cluster
        got = where(p, job)
        assert got is not None and region[f"{got[0]}/{got[1]}"] == "onprem-sjc", got
    away = [pl.job for pl in p.placements if data[pl.job] not in (None, region[pl.pool_key])]
    assert away == [pl.job for pl in p.placements if pl.outside_data_region]
    assert not {"interp/sae-train-70b", "interp/activation-dump"} & set(away)


def test_a_job_with_a_data_region_goes_first_for_its_regions_capacity() -> None:
    # Defect 1: a larger job without a data region would take the 4 owned on-prem nodes (no new money) and
    # push the small job whose data is on-prem to GKE. The data-bound job is placed in its region first.
    p = run({"vision/big": gpu_job("big", count=32),
             "vision/local": gpu_job("local", count=8, data_region="sjc")})
    assert where(p, "vision/local") == ("onprem-sjc", "h100-owned", (0,))
    assert p.placement_of("vision/local").outside_data_region is False  # type: ignore[union-attr]
    assert p.placement_of("vision/big") is not None


def test_a_job_placed_outside_its_data_region_is_flagged_in_plan_cost_report_and_comment() -> None:
    # Defect 1: no pool is in europe-west4, so the job runs elsewhere: the plan JSON, the plan Markdown, the cost
    # report (JSON) and the pull-request comment (cost Markdown) all say so.
    from reconciler.cost.model import price
    from reconciler.report import CostReport, cost_markdown

    files: dict[str, str | bytes | None] = {"jobs/vision/far.yaml": gpu_job("far", count=8, data_region="europe-west4"),
                                            "jobs/vision/near.yaml": gpu_job("near", count=8),
                                            "jobs/vision/train.yaml": None}
    v = check(with_files(files), CAT)
    p = plan(v)
    doc = json.loads(p.to_json())
    flagged = {x["job"]: x.get("outside_data_region") for x in doc["placements"]}
    assert flagged == {"vision/far": True, "vision/near": None}
    assert plan_from_dict(doc) == p
    md = to_markdown(p)
    assert "## Outside their data region" in md and "| vision/far |" in md.split("## Outside their data region")[1]
    priced = price(p, v)
    assert [j["job"] for j in priced.cost.to_dict()["jobs"] if j.get("outside_data_region")] == ["vision/far"]
    comment = cost_markdown(CostReport(priced, "work tree"))
    section = comment.split("### Outside their data region (1)")[1].split("###")[0]
    assert "vision/far" in section and "europe-west4" in section and "vision/near" not in section


def test_the_markdown_units_column_names_exactly_the_units_of_each_placement() -> None:
    """A placement on units [0, 1, 2, 3, 4, 5, 8] read "0–8 (7)": a range for units that are not one. Ranges are
    written only for consecutive units (the example has gaps: serving/atlas-chat, interp/sae-train-70b)."""
    p = plan(check(read_worktree(ROOT), load_catalog()))
    rows = {}
    for line in to_markdown(p).split("## Placements", 1)[1].split("## Pools", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and "/" in cells[0]:
            rows[(cells[0], cells[1])] = cells[3]
    for pl in p.placements:
        text, count = rows[(pl.job, f"{pl.cluster}/{pl.pool}")].rsplit(" (", 1)
        units: list[int] = []
        for part in text.split(", "):
            lo, _, hi = part.partition("–")
            units += range(int(lo), int(hi or lo) + 1)
        assert (units, int(count.rstrip(")"))) == (sorted(pl.units), len(pl.units)), pl.job
    from reconciler.suggest import unit_list as _units
    assert [_units(u) for u in ((0, 1, 2, 3, 4, 5, 8), (9, 12, 13, 14), (0, 1), (3,), (0, 1, 2, 3))] == [
        "0–5, 8", "9, 12–14", "0, 1", "3", "0–3"]
