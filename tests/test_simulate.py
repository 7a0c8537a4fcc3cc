"""`fleet simulate`: the trace format and its errors, the engine's accounting, the fault model, the policies,
the invariants (one place at a time, whole gangs, every job accounted for, ratios in [0, 1]), determinism,
the reports (HTML in headless Chromium), the Alibaba importer and the command line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.simulate import simulate
from reconciler.simulate.alibaba import import_pods
from reconciler.simulate.cluster import READY
from reconciler.simulate.engine import Engine
from reconciler.simulate.faults import FaultModel, Outage
from reconciler.simulate.generate import generate
from reconciler.simulate.html import to_html
from reconciler.simulate.policies import make
from reconciler.simulate.results import result
from reconciler.simulate.state import SimJob
from reconciler.simulate.trace import Trace, load_trace, write_lines

from builders import base_files

CATALOG = load_catalog()


def line(name: str, submit: float, hours: float, *, team: str = "vision", count: int = 8, **extra: Any) -> str:
    doc: dict[str, Any] = {"name": name, "team": team, "options": [{"accelerator": "nvidia-h100-80gb", "count": count}],
                           "duration_hours": hours, "checkpoint_minutes": 30, "image": "img:1",
                           "submit_at_minutes": submit, **extra}
    return json.dumps(doc)


def trace(*lines: str, files: dict[str, bytes] | None = None) -> Trace:
    loaded = load_trace("t.jsonl", write_lines(lines).encode(), files or base_files(), CATALOG)
    assert isinstance(loaded, Trace), loaded
    return loaded


def run(tr: Trace, policy: str, days: float, faults: FaultModel | None = None, seed: int = 1,
        interval_s: int = 60) -> tuple[Engine, dict[str, Any]]:
    sim = Engine(tr, faults or FaultModel.off(), seed, days, interval_s)
    sim.run(make(policy, sim))
    return sim, result(sim, policy, days, seed).doc


# --- the trace -----------------------------------------------------------------------------------------------

def test_trace_problems_name_the_file_line_field_and_a_fix() -> None:
    lines = [
        line("ok", 0, 1),
        "{not json",
        json.dumps({"name": "late", "team": "vision", "options": [{"accelerator": "nvidia-h100-80gb", "count": 1}],
                    "duration_hours": 1, "image": "img:1"}),
        line("typo", 5, 1, checkpoint_minuts=5),
        line("stranger", 5, 1, team="nobody"),
        line("ok", 9, 1),
        line("negative", -3, 1),
    ]
    problems = load_trace("t.jsonl", write_lines(lines).encode(), base_files(), CATALOG)
    assert isinstance(problems, list)
    got = {(p.path, p.line, p.field) for p in problems}
    assert ("t.jsonl", 2, "") in got                                   # not JSON
    assert ("t.jsonl", 3, "submit_at_minutes") in got                  # missing arrival
    assert ("t.jsonl", 4, "checkpoint_minuts") in got                  # unknown field, by name
    assert ("t.jsonl", 5, "team") in got                               # no such team (the validator's rule)
    assert ("t.jsonl", 6, "name") in got                               # the same job twice
    assert ("t.jsonl", 7, "submit_at_minutes") in got
    assert all(p.hint for p in problems)
    typo = next(p for p in problems if p.line == 4)
    assert typo.col == lines[3].index('"checkpoint_minuts"') + 1       # located in the line, as in a YAML file


def test_a_trace_needs_a_runtime_and_takes_actual_hours_over_duration_hours() -> None:
    bare = json.dumps({"name": "x", "team": "vision", "options": [{"accelerator": "nvidia-h100-80gb", "count": 1}],
                       "image": "img:1", "submit_at_minutes": 0})
    problems = load_trace("t.jsonl", (bare + "\n").encode(), base_files(), CATALOG)
    assert isinstance(problems, list) and problems[0].field == "actual_hours"
    tr = trace(line("a", 0, 5, actual_hours=2.5), line("b", 0, 5))
    assert [(t.job.name, t.actual_hours) for t in tr.jobs] == [("a", 2.5), ("b", 5.0)]


def test_generated_traces_validate_clean_and_are_seeded() -> None:
    from reconciler.pipeline import check

    v = check(base_files(), CATALOG)
    one, again, other = (generate(v, 200, 3, s) for s in (7, 7, 8))
    assert one == again and one != other
    tr = trace(*one)
    assert len(tr.jobs) == 200
    assert all(0 <= t.submit_minutes < 3 * 1440 for t in tr.jobs)


# --- the engine's accounting -----------------------------------------------------------------------------------

def test_one_job_on_owned_nodes_runs_its_actual_hours_and_is_paid_for_by_the_pool() -> None:
    _, doc = run(trace(line("a", 0, 2)), "cheapest", days=0.25)
    assert doc["jobs"] == {"submitted": 1, "completed": 1, "failed": 0, "unfinished": 0}
    assert doc["jct_hours"]["p50"] == 2.0
    # the owned pool (4 nodes x 8 GPUs, min 4) is paid for 6 hours; the job occupies 8 GPUs for 2 of them
    assert doc["allocation"] == round(16 / 192, 4) == doc["goodput"]
    assert doc["cost_usd"] == 4 * 40.0 * 6
    assert doc["lost_accelerator_hours"] == 0.0


def test_a_job_that_never_started_counts_its_wait_so_far_and_as_never_started() -> None:
    """lang's quota and what vision lends admit six of seven 16-GPU jobs (test_simulate_rules.py): in 2 hours
    the seventh never starts; its wait counts to the end, and `never_started` says there is one."""
    tr = trace(*(line(f"j{i}", 0, 5, team="lang", count=16, spot="allowed") for i in range(7)))
    _, doc = run(tr, "cheapest", days=2 / 24)
    wait = doc["queue_wait_minutes"]["research"]
    assert wait["never_started"] == 1 and wait["max"] == 120.0
    assert all(w["never_started"] == 0 for c, w in doc["queue_wait_minutes"].items() if c != "research")


def test_the_wait_by_accelerator_shows_a_large_job_that_a_plain_p99_hides() -> None:
    """100 one-GPU waits of 0 and one 64-GPU wait of 120 minutes: the plain p99 (rank 100 of 101) is 0, the p99
    by accelerator (64 of 164 requested accelerators waited 120 minutes) is 120; equal weights give the plain one."""
    from reconciler.simulate.results import percentile, weighted_percentile

    waits = [(0.0, 1.0)] * 100 + [(120.0, 64.0)]
    assert percentile([w for w, _ in waits], 99) == 0.0
    assert weighted_percentile(waits, 99) == 120.0
    assert weighted_percentile(waits, 50) == 0.0 and weighted_percentile([], 99) == 0.0
    values = [3.0, 1.0, 7.0, 5.0, 2.0]
    assert all(weighted_percentile([(v, 2.0) for v in values], q) == percentile(values, q)
               for q in (1, 40, 50, 99, 100))
    # in a run: vision's 95 one-GPU jobs fill its quota, its 32-GPU job never starts in the 2 hours
    tr = trace(*(line(f"s{i}", 0, 5, team="vision", count=1) for i in range(95)),
               line("big", 1, 5, team="vision", count=32))
    sim, doc = run(tr, "cheapest", days=2 / 24)
    wait = doc["queue_wait_minutes"]["research"]
    big = next(j for j in sim.jobs if j.id == "vision/big")
    assert big.first_start_s is None and wait["never_started"] == 1
    mine = [((j.first_start_s if j.first_start_s is not None else sim.end_s) - j.submit_s) / 60 for j in sim.jobs]
    assert wait["mean"] == round(sum(mine) / len(mine), 2)
    assert wait["p99_by_accelerator"] == wait["max"] == 119.0     # 32 of 127 accelerators wait to the end


def test_an_outage_loses_the_work_since_the_last_checkpoint_and_the_job_finishes_elsewhere() -> None:
    tr = trace(line("a", 0, 2))
    faults = FaultModel.off((Outage("onprem-sjc", 0.75, 1.0),))
    sim, doc = run(tr, "cheapest", days=1, faults=faults)
    # ran 45 minutes, checkpointed at 30: 15 minutes of 8 GPUs lost; then the restart (restore and warm-up,
    # 10 minutes by default) of its next run: 8 x 10 / 60 more (issue 22: a restart once cost nothing)
    assert sim.c.lost_by == {"outage": 2.0, "restart": 8 * 10 / 60}
    assert doc["lost_accelerator_hours"] == round(2.0 + 8 * 10 / 60, 2)
    assert doc["faults"]["cluster"] == 1
    assert doc["jobs"]["completed"] == 1
    j = sim.jobs[0]
    assert j.finish_s is not None and j.finish_s > 2 * 3600 + 25 * 60        # the lost work was redone


def test_a_gang_never_runs_in_part_and_work_waits_for_its_slowest_unit() -> None:
    # 16 GPUs: two on-demand nodes provisioned together (the owned pool holds 32 but is busy with 4 x 8)
    lines = [line(f"own{i}", 0, 10) for i in range(4)] + [line("big", 1, 1, count=16)]
    sim, _ = run(trace(*lines), "cheapest", days=1)
    big = sim.by_id["vision/big"]
    assert big.first_start_s is not None and big.first_start_s >= 60 + 10 * 60    # nodes took 10 minutes
    assert big.finish_s == big.first_start_s + 3600


# --- the fleet policy is the reconcile loop ------------------------------------------------------------------

def test_fleet_moves_a_job_off_a_failed_slice_after_the_grace_time_instead_of_waiting_for_the_repair() -> None:
    tpu = json.dumps({"name": "t", "team": "vision", "options": [{"accelerator": "tpu-v5p", "topology": "4x4x4"}],
                      "duration_hours": 3, "checkpoint_minutes": 30, "image": "img:1", "submit_at_minutes": 0})
    tr = trace(tpu)
    sim = Engine(tr, FaultModel.off(), 1, 2, 60)
    policy = make("fleet", sim)
    sim.schedule_fault(3600, "gke-usc1/v5p-4x4x4", 0)
    sim.schedule_fault(3600, "gke-usc1/v5p-4x4x4", 1)
    sim.schedule_fault(3600, "gke-usc1/v5p-4x4x4", 2)
    sim.run(policy)
    j = sim.jobs[0]
    assert sim.c.faults["slice"] == 1          # only the slice it ran on was ready, so only that one failed
    assert j.state == "done" and j.finish_s is not None
    assert j.finish_s < 6 * 3600               # not after the 48-hour TPU repair
    assert j.units != (0,) and sim.c.lost_acc_h > 0


def test_the_planner_keeps_planning_with_a_failed_node_above_free_ones() -> None:
    """A failed unit holds no job but looks used: the planner's compaction once took it for a job's unit
    (KeyError), found by this simulator at 10,000 jobs."""
    sim = Engine(trace(line("a", 0, 3)), FaultModel.off(), 1, 0.1, 60)
    policy = make("fleet", sim)
    sim.schedule_fault(600, "onprem-sjc/h100-owned", 3)          # past node_failed_after_minutes by 20 min
    sim.run(policy)
    assert sim.c.faults["node"] == 1 and sim.jobs[0].state == "running" and 3 not in sim.jobs[0].units


def test_on_the_example_fleet_without_faults_no_job_moves_twice_and_no_service_moves() -> None:
    """Issue 15's churn, end to end: a spread service seen running in one pool had its other replicas placed
    anew every cycle (moving it back and forth, and preempting for it), and a job whose start failed kept
    its units in the plan over a job running there. Seeded: 300 generated jobs over a day, the loop every
    5 minutes; before the fixes 32 moves (services 2-3 times each, one batch job 6 times)."""
    from reconciler.sources import read_worktree

    files = read_worktree(Path(__file__).resolve().parents[1])
    v = check({p: b for p, b in files.items() if not p.startswith("jobs/")}, CATALOG)
    # seed 5 since issue 26's robotics team changed the generated trace (seed 4 then moved no job at all)
    tr = load_trace("g.jsonl", write_lines(generate(v, 300, 1.0, 5, 0.9)).encode(), files, CATALOG)
    assert isinstance(tr, Trace)
    moves: dict[str, int] = {}

    class Counted(Engine):
        def stop(self, j: SimJob, why: str) -> None:
            if why == "move" and j.state in ("starting", "running"):
                moves[j.id] = moves.get(j.id, 0) + 1
            super().stop(j, why)

    sim = Counted(tr, FaultModel.off(), 5, 1.0, 300)
    sim.run(make("fleet", sim))
    assert moves and max(moves.values()) == 1
    assert not [j for j in moves if sim.by_id[j].job.kind == "inference"]


# --- invariants ------------------------------------------------------------------------------------------------

class Checked(Engine):
    """The engine with the invariants checked after every event."""

    def _handle(self, kind: int, a: int, b: Any) -> None:
        super()._handle(kind, a, b)
        seen: dict[str, str] = {}
        for p in self.pools.values():
            for u in p.units:
                assert u.used == sum(self.by_id[jid].per_unit for jid in u.jobs) <= p.rp.unit_accelerators
                for jid in u.jobs:
                    assert seen.setdefault(jid, p.key) == p.key, f"{jid} in two places"      # never two places
        for j in self.jobs:
            if j.state == "running":
                assert j.pool is not None and all(j.pool.units[i].state == READY for i in j.units)  # whole gang
                assert not self.clusters[j.cluster].down
            assert (j.id in seen) == (j.state in ("starting", "running"))
            assert 0 <= j.done_h <= j.work_h + 1e-9
        assert 0 <= self.c.busy_acc_h <= self.c.paid_acc_h + 1e-6
        assert self.c.good_acc_h <= self.c.busy_acc_h + 1e-6


JOBS = st.lists(st.tuples(st.integers(0, 600), st.floats(0.1, 8), st.sampled_from([1, 2, 8, 16, 24]),
                          st.sampled_from(["vision", "lang"]), st.sampled_from([None, 0, 15, 60])),
                min_size=1, max_size=10)


@pytest.mark.parametrize("policy", ["fifo", "kueue", "kueue-multikueue", "cheapest", "fleet"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=JOBS, seed=st.integers(0, 1000))
def test_invariants_hold_under_heavy_faults(policy: str, jobs: list[tuple[int, float, int, str, int | None]],
                                            seed: int) -> None:
    lines = []
    for k, (submit, hours, count, team, ckpt) in enumerate(jobs):
        doc = json.loads(line(f"j{k}", submit, round(hours, 2), team=team, count=count, spot="allowed"))
        if ckpt is None:
            del doc["checkpoint_minutes"]
        else:
            doc["checkpoint_minutes"] = ckpt
        lines.append(json.dumps(doc))
    faults = FaultModel(node_failures_per_acc_hour=0.002, gpu_repair_minutes=30, spot_reclaims_per_hour=0.2,
                        outages=(Outage("onprem-sjc", 3, 2),))
    sim = Checked(trace(*lines), faults, seed, 1, 300)
    sim.run(make(policy, sim))
    doc = result(sim, policy, 1, seed).doc
    assert 0 <= doc["goodput"] <= doc["allocation"] <= 1
    assert doc["jobs"]["completed"] + doc["jobs"]["unfinished"] == doc["jobs"]["submitted"] == len(jobs)
    assert doc["jobs"]["completed"] == sum(j.state == "done" for j in sim.jobs)


def test_the_json_is_byte_identical_for_the_same_inputs_and_seed() -> None:
    from reconciler.pipeline import check

    tr = trace(*generate(check(base_files(), CATALOG), 60, 2, 3))
    faults = FaultModel(spot_reclaims_per_hour=0.05, node_failures_per_acc_hour=0.0005)

    def once(seed: int) -> str:
        rs = simulate(tr, ["fleet", "kueue", "kueue-multikueue", "cheapest", "fifo"], days=2, seed=seed,
                      faults=faults, interval_s=300)
        return "".join(r.to_json() for r in rs)

    first = once(5)
    assert first == once(5)
    assert '"policy": "fleet"' in first and '"policy": "fifo"' in first
    doc = json.loads(simulate(tr, ["fleet"], days=2, seed=5, faults=faults, interval_s=300)[0].to_json())
    assert list(doc) == ["policy", "days", "seed", "jobs", "jct_hours", "queue_wait_minutes", "allocation", "goodput",
                         "lost_accelerator_hours", "cost_usd", "migrations", "preemptions", "faults",
                         "accelerator_hours_completed", "usd_per_kept_accelerator_hour", "violations"]   # DESIGN 4c
    assert list(doc["violations"]) == ["quota_accelerator_hours", "budget_hours",   # DESIGN 4c's, then two more
                                       "nominal_withheld_accelerator_hours", "priority_inverted_accelerator_hours"]
    assert list(doc["queue_wait_minutes"]) == ["critical", "production", "research", "opportunistic"]
    assert list(doc["queue_wait_minutes"]["production"]) == ["p50", "p99", "max", "never_started", "mean",
                                                             "p99_by_accelerator"]
    assert list(doc["faults"]) == ["node", "slice", "spot", "cluster"] and doc["days"] == 2


# --- policies differ where they should --------------------------------------------------------------------------

def test_kueue_keeps_a_job_on_its_cluster_while_cheapest_relaunches_it_elsewhere() -> None:
    tr = trace(line("a", 0, 4))
    probe = Engine(tr, FaultModel.off(), 1, 1, 60)
    home = make("kueue", probe).home["vision/a"]          # type: ignore[union-attr]
    assert home is not None
    _, kueue = run(tr, "kueue", days=1, faults=FaultModel.off((Outage(home, 1, 10),)))
    _, cheapest = run(tr, "cheapest", days=1, faults=FaultModel.off((Outage("onprem-sjc", 1, 10),)))
    assert kueue["faults"]["cluster"] == cheapest["faults"]["cluster"] == 1
    assert kueue["jct_hours"]["p50"] > 10              # waited for its cluster to come back
    assert cheapest["jct_hours"]["p50"] < 6            # relaunched in another region


# --- reports ----------------------------------------------------------------------------------------------------

def _chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


@pytest.mark.skipif(_chromium() is None and not os.environ.get("CI"),
                    reason="headless Chromium is not installed (CI installs it: .ci/run)")
def test_html_report_renders_offline_in_headless_chromium(tmp_path: Path) -> None:
    tr = trace(line("a", 0, 2), line("b", 30, 3, priority="production"), line("c", 60, 1, count=16))
    rs = simulate(tr, ["fleet", "kueue"], days=0.5, seed=1, faults=FaultModel(), interval_s=300)
    page = tmp_path / "simulate.html"
    page.write_text(to_html(rs, "t.jsonl"))
    html = page.read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "<script" not in html
    browser = _chromium()
    assert browser is not None
    r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert '<table id="summary">' in dom and dom.count("<polyline") == 2 * (4 + 2 + 1 + 1)
    assert '<section class="policy" id="policy-fleet">' in dom and '<section class="policy" id="policy-kueue">' in dom


# --- the Alibaba importer -----------------------------------------------------------------------------------------

POD_LIST = """\
,name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
0,openb-pod-0017,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497
1,openb-pod-0022,4000,15258,1,220,,BE,Running,9679175,9973826,9679175
2,openb-pod-0035,16000,32768,1,1000,V100M16|V100M32,LS,Running,9967058,9968575,9967063
3,openb-pod-0040,32000,65536,0,0,,BE,Succeeded,9967100,9968575,9967100
4,openb-pod-0041,32000,65536,2,1000,,LS,Failed,9967200,9967200,0
"""


def test_alibaba_pods_become_a_valid_trace_on_the_fleet() -> None:
    from reconciler.pipeline import check

    v = check(base_files(), CATALOG)
    got = import_pods("pods.csv", POD_LIST, v)
    assert got.problems == [] and got.skipped == {"cpu_only": 1, "never_ran": 0, "no_runtime": 1, "too_large": 0}
    docs = [json.loads(x) for x in got.lines]
    assert [(d["name"], d["submit_at_minutes"], d["options"][0]["count"]) for d in docs] == [
        ("openb-pod-0017", 0.0, 8), ("openb-pod-0022", round((9679175 - 9437497) / 60, 3), 1),
        ("openb-pod-0035", round((9967058 - 9437497) / 60, 3), 1)]
    assert docs[0]["actual_hours"] == round((10769854 - 9437497) / 3600, 4)
    assert docs[1]["priority"] == "opportunistic" and docs[1]["spot"] == "required"     # BE: spot
    assert docs[2]["kind"] == "inference"                                                # LS
    assert isinstance(load_trace("t.jsonl", write_lines(got.lines).encode(), base_files(), CATALOG), Trace)


def test_alibaba_file_without_the_columns_is_rejected_with_the_columns_named() -> None:
    from reconciler.pipeline import check

    got = import_pods("pods.csv", "name,num_gpu\nx,1\n", check(base_files(), CATALOG))
    assert got.lines == [] and got.problems[0].line == 1 and "creation_time" in got.problems[0].message


# --- the command line ---------------------------------------------------------------------------------------------

def _fleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLEET_DEBUG"}
    return subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, check=False)


def test_cli_generates_then_simulates_side_by_side_and_rejects_bad_input(tmp_path: Path) -> None:
    for rel, content in base_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    r = _fleet("simulate", "--generate", "40", "--days", "1", "--out", "t.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = _fleet("simulate", "--trace", "t.jsonl", "--policy", "kueue,cheapest", "--format", "json",
               "--outage", "gke-usc1@2+3", "--out", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    docs = json.loads(r.stdout)
    assert [d["policy"] for d in docs] == ["kueue", "cheapest"] and docs[0]["faults"]["cluster"] == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["simulate.html", "simulate.json", "simulate.md"]
    (tmp_path / "bad.jsonl").write_text('{"name": "x"}\n')
    r = _fleet("simulate", "--trace", "bad.jsonl", cwd=tmp_path)
    assert r.returncode == 1 and "bad.jsonl:1:1: error: `submit_at_minutes` is missing" in r.stderr
    assert "Traceback" not in r.stderr
    r = _fleet("simulate", "--trace", "t.jsonl", "--policy", "magic", cwd=tmp_path)
    assert r.returncode == 2 and "unknown policy magic" in r.stderr
    r = _fleet("simulate", "--trace", "t.jsonl", "--outage", "nowhere@1+1", cwd=tmp_path)
    assert r.returncode == 2 and "no cluster `nowhere`" in r.stderr


def test_the_json_is_the_same_bytes_in_processes_with_other_hash_seeds(tmp_path: Path) -> None:
    for rel, content in base_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    assert _fleet("simulate", "--generate", "30", "--days", "1", "--out", "t.jsonl", cwd=tmp_path).returncode == 0
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        r = subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", "simulate", "--trace",
                            "t.jsonl", "--policy", "fleet,kueue,cheapest,fifo", "--format", "json"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, check=False)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1]


def test_an_on_demand_slice_is_re_created_after_a_fault_and_released_once_idle() -> None:
    """Issue 22: a faulty on-demand slice was held failed for the 48-hour TPU repair (paid nothing, usable by
    nobody). The cloud re-creates it (a new slice, provisioned again); Fleet's loop releases it once idle.
    (Issue 20's case, a failed slice the loop asked to release, now arises only in outages.)"""
    tpu = json.dumps({"name": "t", "team": "vision", "options": [{"accelerator": "tpu-v5p", "topology": "4x4x4"}],
                      "duration_hours": 3, "checkpoint_minutes": 30, "image": "img:1", "submit_at_minutes": 0})
    sim = Engine(trace(tpu), FaultModel.off(), 1, 3, 60)
    policy = make("fleet", sim)
    sim.schedule_fault(3600, "gke-usc1/v5p-4x4x4", 0)          # the slice the job runs on
    sim.run(policy)
    j, p = sim.jobs[0], sim.pools["gke-usc1/v5p-4x4x4"]
    assert sim.c.faults["slice"] == 1
    assert j.state == "done" and j.finish_s is not None and j.finish_s < 6 * 3600
    assert all(u.state != "failed" for u in p.units)
    assert p.present == set()                                   # the pool's planned size: no job, min 0
    assert p.units[0].since_s < 8 * 3600                        # released hours, not days, after the fault
    sim3 = Engine(trace(tpu), FaultModel.off(), 1, 1, 60)
    sim3.schedule_fault(3600, "gke-usc1/v5p-4x4x4", 0)
    sim3.end_s = 3600 + 60
    sim3.run(make("cheapest", sim3))
    assert sim3.pools["gke-usc1/v5p-4x4x4"].units[0].state == "provisioning"     # re-created at once
