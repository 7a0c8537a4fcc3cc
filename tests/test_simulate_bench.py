"""Issue 22's benchmark side: a spread service occupies every pool the plan gives it in the simulator, the fleet
sized to a trace (simulate/sizing.py), and bench_simulate.py's parallel runs giving the sequential figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from test_simulate import line, run, trace

from reconciler.catalog import load_catalog
from reconciler.load import load
from reconciler.simulate.alibaba import import_pods
from reconciler.simulate.cluster import READY
from reconciler.simulate.engine import Engine
from reconciler.simulate.faults import FaultModel
from reconciler.simulate.policies import make
from reconciler.simulate.sizing import Demand, demand, jittered, sized_repo, window
from reconciler.simulate.trace import Trace, load_trace, write_lines
from reconciler.validate import validate

from builders import TEAMS, base_files

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import bench_simulate
import inverted
import withheld


def test_a_spread_service_runs_on_every_pool_the_plan_places_it_on() -> None:
    """A service of 2 replicas spreads over two clusters (plan/spread.py: one placement per pool group). The
    simulator placed the job on the last group only: the other group's units were opened by the plan's pool
    target, paid and left empty while the job ran on half its accelerators (seed 1 of the 2,000-job week: 14,101
    unit-cycles of running services' planned units empty past 40 minutes)."""
    tr = trace(line("serve", 0, 4.0, kind="inference", replicas=2, checkpoint_minutes=0, priority="production"))
    sim, doc = run(tr, "fleet", 0.25)
    j = sim.by_id["vision/serve"]
    assert j.state == "done" and doc["jobs"]["completed"] == 1
    assert doc["lost_accelerator_hours"] == 0
    assert round(sim.c.busy_acc_h, 2) == 16 * 4.0            # both replicas, 8 GPUs each, ran 4 hours
    assert round(sim.c.good_acc_h, 2) == 16 * 4.0
    # every paid unit outside the owned pool held the service while it ran: none opened and left empty
    cloud = sim.pools["gke-usc1/h100"]
    assert sum(1 for u in cloud.units if u.state == READY) == 0        # released once the service finished


# --- a fleet sized to a trace ------------------------------------------------------------------------------------

POD_LIST = """\
,name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
0,openb-pod-0000,12000,16384,1,1000,,LS,Running,0,360000,0
1,openb-pod-0001,6000,12288,4,1000,V100M32,LS,Running,864000,900000,864000
2,openb-pod-0002,6000,12288,8,1000,,Burstable,Succeeded,870000,885000,870600
3,openb-pod-0003,6000,12288,2,1000,,BE,Succeeded,880000,894400,880000
4,openb-pod-0004,6000,12288,1,500,,BE,Pending,890000,,
5,openb-pod-0005,6000,12288,0,0,,LS,Running,890000,990000,890000
"""


def test_the_fleet_sized_to_an_alibaba_excerpt_has_its_demand_at_the_load_asked() -> None:
    """Issue 22: the Alibaba replay on the example fleet filled 8% of what it paid. The sized fleet: H100 pools
    whose capacity puts the window's demand at --size-load (whole 8-GPU nodes), priced from the catalog, quotas
    split over three teams, and the trace valid on it."""
    catalog = load_catalog()
    skeleton, _ = sized_repo(base_files(), catalog, Demand(1.0, 1.0, 1.0), 0.9)
    imported = import_pods("pods.csv", POD_LIST, validate(load(skeleton), catalog))
    assert imported.problems == [] and imported.skipped["never_ran"] == 1 and imported.skipped["cpu_only"] == 1
    lines = window(imported.lines, 10 * 1440)              # from day 10: pod 0 (created at 0) is left out
    assert [json.loads(x)["name"] for x in lines] == ["openb-pod-0001", "openb-pod-0002", "openb-pod-0003"]
    assert json.loads(lines[0])["submit_at_minutes"] == 0
    d = demand(lines, 1.0)                                  # one day: 4 GPUs x 10 h + 8 x 4 h; spot: 2 x 4 h
    assert (round(d.on_demand * 24, 3), round(d.spot * 24, 3)) == (72.0, 8.0)
    files, size = sized_repo(base_files(), catalog, d, 0.9)
    assert (size.reserved, size.on_demand, size.spot_aws, size.spot_gcp, size.gpus) == (0, 1, 1, 0, 16)
    tr = load_trace("pods.jsonl", write_lines(lines).encode(), files, catalog)
    assert isinstance(tr, Trace)
    v = tr.validated
    assert sorted(p.key for p in v.pools) == ["eks-use1/p5", "eks-use1/p5-spot"]
    assert {k: round(u.hourly_usd, 2) for k, u in v.unit_prices.items()} == {"eks-use1/p5": 55.04,
                                                                           "eks-use1/p5-spot": 16.95}
    teams = v.loaded.teams
    assert teams is not None
    assert [(t.name, t.quota["nvidia-h100-80gb"].nominal) for t in teams.teams] == [("alpha", 9), ("beta", 4),
                                                                                  ("gamma", 3)]
    assert {t.budget_monthly_usd for t in teams.teams} == {52553}       # the whole fleet: 730 h x (55.04 + 16.95)
    big = demand(lines * 20, 1.0)              # 20x: 60 GPUs on demand / 0.9 = 9 nodes, 4 of them reserved
    files, size = sized_repo(base_files(), catalog, big, 0.9)
    assert (size.reserved, size.on_demand, size.spot_aws, size.spot_gcp) == (4, 5, 1, 0)
    v = validate(load(files), catalog)
    assert not [p for p in v.problems if p.severity.name == "ERROR"]
    assert round(v.unit_prices["gke-usc1/a3-reserved"].hourly_usd, 2) == 61.38        # the catalog's reserved_1y


def test_a_seed_moves_each_arrival_of_a_given_trace_by_at_most_the_jitter_and_the_same_seed_the_same_way(
        tmp_path: Path) -> None:
    """A given trace (an Alibaba pod list) replayed as given is one run per policy whatever the seed: the seed drew
    only the faults, and on the replay's small fleet seeds 1 and 3 gave the same figures. Now each seed moves every
    job's arrival by up to --arrival-jitter-minutes (`sizing.jittered`): the same seed the same way, another seed
    otherwise, nothing before 0, every job kept in its line's order; the fleet is sized to the trace as given, so
    it is the same for every seed; 0 replays the trace as given."""
    lines = [json.dumps({"name": f"j{i}", "submit_at_minutes": 60.0 * i}) for i in range(40)]
    one, again, two = jittered(lines, 1, 5), jittered(lines, 1, 5), jittered(lines, 2, 5)
    assert one == again and one != two
    for got in (one, two):
        moved = [(json.loads(a)["name"], json.loads(b)["submit_at_minutes"] - json.loads(a)["submit_at_minutes"])
                 for a, b in zip(lines, got, strict=True)]
        assert [n for n, _ in moved] == [f"j{i}" for i in range(40)]
        assert all(-5 <= m <= 5 for _, m in moved) and any(m < -1 for _, m in moved) and any(m > 1 for _, m in moved)
        assert min(json.loads(x)["submit_at_minutes"] for x in got) >= 0
    assert [json.loads(x)["submit_at_minutes"] for x in jittered(lines, 3, 0)] == [60.0 * i for i in range(40)]
    pods = tmp_path / "pods.csv"     # POD_LIST's pods that need no spot capacity, one every 10 minutes
    pods.write_text("\n".join([POD_LIST.splitlines()[0]] + [
        f"{i},openb-pod-{i:04d},6000,12288,1,1000,,LS,Succeeded,{600 * i},{600 * i + 7200},{600 * i}"
        for i in range(12)]) + "\n")

    def traced(seed: int, minutes: float) -> tuple[list[tuple[str, float]], list[str]]:
        s = bench_simulate.Setup(Path(__file__).resolve().parents[1], 0, 1.0, 0.9, 300, None, None, pods, 0.0,
                                 True, 0.9, minutes)
        tr = bench_simulate._trace(s, seed)[0]
        return [(j.job.id, j.submit_minutes) for j in tr.jobs], sorted(p.key for p in tr.validated.pools)

    (a, fleet_a), (b, fleet_b) = traced(1, 5), traced(2, 5)
    assert sorted(x for x, _ in a) == sorted(x for x, _ in b) and a != b and fleet_a == fleet_b
    assert traced(1, 0) == traced(2, 0)
    import subprocess

    bench = Path(__file__).resolve().parents[1] / "bench"
    for script, bad in (("bench_simulate.py", "-1"), ("trace_wait.py", "nan"), ("trace_wait.py", "1e12")):
        r = subprocess.run([sys.executable, str(bench / script), "--alibaba", str(pods), "--arrival-jitter-minutes",
                            bad], capture_output=True, text=True, timeout=120)    # one line, no traceback
        assert r.returncode in (1, 2) and "Traceback" not in r.stderr, (script, bad, r.stderr)
        assert "--arrival-jitter-minutes: give 0 to 1440 minutes" in r.stderr, (script, bad, r.stderr)
    s = bench_simulate.Setup(Path(__file__).resolve().parents[1], 0, 1.0, 0.9, 300, None, None, pods, 0.0, True, 0.9,
                             5.0)
    timing = {"wall_s", "cpu_s", "load_avg", "pid"}
    alone, two = ([{k: v for k, v in d.items() if k not in timing}
                   for d in bench_simulate.run_all(s, [1, 2], ["cheapest"], n)] for n in (1, 2))
    assert two == alone and all(d["arrival_jitter_minutes"] == 5.0 for d in alone)   # worker processes: the same
    as_given = {**alone[0], "arrival_jitter_minutes": 0.0, "seed": 3}
    lines = "\n".join(json.dumps(d) for d in (alone[0], as_given))
    try:
        bench_simulate.from_lines([("runs.out", lines)])
    except SystemExit as e:                     # --from-lines refuses a table of runs moved differently
        assert "different arrival jitter" in str(e), e
    else:
        raise AssertionError("runs of different jitter were tabulated together")


# --- bench_simulate.py --jobs-parallel ----------------------------------------------------------------------------

def test_bench_runs_in_worker_processes_give_the_sequential_figures() -> None:
    """--jobs-parallel N: the (seed, policy) runs in N worker processes, the figures those of the sequential
    run (each run is one function of the same inputs), only the timings differ."""
    s = bench_simulate.Setup(Path(__file__).resolve().parents[1], 40, 0.5, 0.9, 300, None, None, None, 0.0,
                             False, 0.9)
    timing = {"wall_s", "cpu_s", "load_avg", "pid"}

    def figures(parallel: int) -> list[dict[str, object]]:
        runs = bench_simulate.run_all(s, [1, 2], ["fleet", "cheapest"], parallel)
        return [{k: v for k, v in d.items() if k not in timing} for d in runs]

    alone, two = figures(1), figures(2)
    assert [(d["policy"], d["seed"]) for d in two] == [(p, seed) for seed in (1, 2) for p in ("fleet", "cheapest")]
    assert two == alone
    assert alone[0]["jobs"] != alone[2]["jobs"] or alone[0]["cost_usd"] != alone[2]["cost_usd"]   # seeds differ


def test_a_trace_file_that_cannot_be_read_is_an_error_naming_it_not_a_traceback(tmp_path: Path) -> None:
    """bench_simulate.py, trace_wait.py and waits_by_size.py given a missing pod list or a folder: one line
    naming the path and what to give, exit 2 (argparse) or 1, no traceback."""
    import subprocess

    bench = Path(__file__).resolve().parents[1] / "bench"
    missing = tmp_path / "pods.csv"
    assert bench_simulate.unreadable(None) is None
    assert bench_simulate.unreadable(missing) is not None and str(missing) in str(bench_simulate.unreadable(missing))
    (tmp_path / "ok.csv").write_text("name\n")
    assert bench_simulate.unreadable(tmp_path / "ok.csv") is None
    for script, given in (("bench_simulate.py", missing), ("trace_wait.py", tmp_path), ("waits_by_size.py", missing)):
        r = subprocess.run([sys.executable, str(bench / script), "--alibaba", str(given)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode in (1, 2), (script, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr and f"{given}: cannot be read" in r.stderr, (script, r.stderr)


def test_the_migrations_probe_attributes_every_migration_of_the_run_to_the_action_that_made_it() -> None:
    """`trace_costs.py migrations` on a 500-job, 2-day trace: its lines add up to the run's own migration count
    (none unattributed, none counted twice), and the run has some of each kind it names."""
    import subprocess

    bench = Path(__file__).resolve().parents[1] / "bench"
    r = subprocess.run([sys.executable, str(bench / "trace_costs.py"), "migrations", "--jobs", "500", "--days", "2"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    head, *rows = r.stdout.strip().splitlines()
    total = int(head.rsplit(": ", 1)[1].split()[0])
    counts = {line.split(None, 1)[1]: int(line.split()[0]) for line in rows}
    assert total > 0 and sum(counts.values()) == total, r.stdout
    assert "other" not in counts and counts.get("move: re-pack", 0) > 0, r.stdout
    assert counts.get("move: a preemption victim placed again on another pool", 0) > 0, r.stdout


# --- bench_simulate.py: who is better, seed by seed ----------------------------------------------------------------

def _doc(policy: str, seed: int, jobs: int, wait: float, usd: float) -> dict[str, object]:
    """A JSON line of bench_simulate.py with the figures METRICS reads (the rest zero)."""
    waits = {"production": {"p99": wait, "never_started": 0, "p99_by_accelerator": wait, "mean": wait / 10},
             "critical": {"p99": 0.0}}
    return {"policy": policy, "seed": seed, "wall_s": 1.0 + seed, "cpu_s": 1.0, "load_avg": 0.5, "pid": seed,
            "jobs": {"completed": jobs}, "accelerator_hours_completed": jobs * 10.0, "queue_wait_minutes": waits,
            "goodput": 0.9, "allocation": 0.9, "usd_per_kept_accelerator_hour": usd, "lost_accelerator_hours": 0.0,
            "_lost_per_run": 0.0, "cost_usd": 100.0, "preemptions": 0,
            "violations": {"quota_accelerator_hours": 0.0, "budget_hours": 0.0,
                           "nominal_withheld_accelerator_hours": 0.0}}


def test_the_paired_table_counts_the_seeds_each_policy_wins_in_the_direction_of_each_metric() -> None:
    """Seeds differ more than policies (a seed's fleet runs 2.95-3.38 M accelerator-hours), so the two means and
    their overlapping ranges cannot say who is better; the difference on each seed can. More jobs is better,
    a longer wait and a dearer kept hour are worse; a seed with equal figures is a tie."""
    docs = {"fleet": [_doc("fleet", 1, 100, 50.0, 3.9), _doc("fleet", 2, 90, 70.0, 3.8),
                      _doc("fleet", 3, 95, 60.0, 3.7)],
            "cheapest": [_doc("cheapest", 1, 101, 80.0, 3.8), _doc("cheapest", 2, 88, 90.0, 3.8),
                         _doc("cheapest", 3, 96, 30.0, 3.6)]}
    out = bench_simulate.paired(docs)
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1].rstrip(" |") for line in out.splitlines()
            if line.startswith("| ") and "---" not in line}
    assert rows["jobs completed"] == "+0 [-1 to +2], 1/2 of 3"                   # -1, +2, -1
    assert rows["production queue wait p99 (min)"] == "-7 [-30 to +30], 2/1 of 3"   # -30, -20, +30
    assert rows["$ per kept accelerator-hour"] == "+0.07 [+0.00 to +0.10], 0/2 of 3"   # seed 2 ties
    assert rows["goodput"].endswith("0/0 of 3")
    assert rows["cost ($)"] == "+0 [+0 to +0]"              # more work costs more: neither better nor worse
    assert bench_simulate.paired({"fleet": docs["fleet"]}) == ""                # nothing to compare with
    assert bench_simulate.paired({"cheapest": docs["cheapest"], "fifo": docs["cheapest"]}) == ""


def test_saved_outputs_are_tabulated_together_and_a_run_given_twice_must_agree(tmp_path: Path) -> None:
    """--from-lines: the tables of runs made apart (seeds 1-2 first, seed 3 later), without running anything;
    a (policy, seed) in both files with the same figures counts once, with other figures it is an error, not a
    silent pick."""
    import subprocess

    first = tmp_path / "first.out"
    later = tmp_path / "later.out"
    lines = [json.dumps(_doc(p, seed, 100 + seed, 10.0 * seed, 3.8)) for seed in (1, 2) for p in ("fleet", "cheapest")]
    first.write_text('{"machine": "x86_64"}\n' + "\n".join(lines) + "\n\n| a table | 1 |\n")
    again = _doc("fleet", 2, 102, 20.0, 3.8)
    again["wall_s"] = 99.0                                     # timings may differ, figures may not
    later.write_text("\n".join(json.dumps(d) for d in (again, _doc("fleet", 3, 97, 5.0, 3.8),
                                                       _doc("cheapest", 3, 99, 5.0, 3.8))) + "\n")
    docs, seeds = bench_simulate.from_lines([("first", first.read_text()), ("later", later.read_text())])
    assert seeds == [1, 2, 3] and [d["seed"] for d in docs["fleet"]] == [1, 2, 3] and len(docs["cheapest"]) == 3
    bench = Path(__file__).resolve().parents[1] / "bench"
    r = subprocess.run([sys.executable, str(bench / "bench_simulate.py"), "--from-lines", str(first), str(later)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert "Mean over seeds 1, 2, 3" in r.stdout and "| jobs completed | 100 [97-102] | 101 [99-102] |" in r.stdout
    assert "| jobs completed | -1 [-2 to +0], 0/1 of 3 |" in r.stdout              # 0, 0, -2
    docs, seeds = bench_simulate.from_lines([("first", first.read_text()),
                                             ("more", json.dumps(_doc("fleet", 3, 97, 5.0, 3.8)))])
    head = bench_simulate.tables(docs, seeds).splitlines()[2]
    assert head == "| metric | `fleet` | `cheapest` (seeds 1, 2) |"      # no mean read as over seeds not run
    clash = _doc("fleet", 3, 98, 5.0, 3.8)
    (tmp_path / "clash.out").write_text(json.dumps(clash) + "\n")
    r = subprocess.run([sys.executable, str(bench / "bench_simulate.py"), "--from-lines", str(later),
                        str(tmp_path / "clash.out")], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 1 and "policy fleet, seed 3 is given twice with different figures" in r.stderr
    assert "Traceback" not in r.stderr
    cut = tmp_path / "cut.out"                                  # a run killed while writing its line
    cut.write_text('{"machine": "x86_64"}\n' + json.dumps(clash)[:40] + "\n")
    for given, said in ((cut, f"{cut}:2: not a whole JSON line"), (tmp_path / "none.out", "cannot be read")):
        r = subprocess.run([sys.executable, str(bench / "bench_simulate.py"), "--from-lines", str(given)],
                           capture_output=True, text=True, timeout=120, check=False)
        assert r.returncode in (1, 2) and said in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_the_row_tools_charge_the_runs_own_priority_row() -> None:
    """bench/inverted.py charges the priority row to waiting jobs and bench/withheld.py the withheld row; each wraps
    the engine's `Watch.look` and must pass on the row's condition (remedy.py), or its run measures another row.
    vision may use 16 H100s (onprem-sjc's owned nodes only), three research jobs of 4 GPUs run 5 hours and a
    production job of 16 waits an hour in. Within budget, preempting the research could start it: the row counts
    (`fifo` never preempts). With a budget pace of $70 an hour it costs $80 even with the research's spend freed:
    nothing counts, in the run and in both tools' runs alike."""
    def trace_with(budget: int) -> Trace:
        files = base_files()
        files["policies/teams.yaml"] = TEAMS.replace(
            "nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 16, borrowing_limit: 0}").replace(
            "budget_monthly_usd: 5000000", f"budget_monthly_usd: {budget}").encode()
        del files["fleet/clusters/gke-usc1.yaml"]
        return trace(*(line(f"low{i}", 0, 5, count=4, priority="research") for i in range(3)),
                     line("prod", 60, 1, count=16, priority="production"), files=files)

    for budget, counted in ((5000000, True), (70 * 730, False)):
        tr = trace_with(budget)
        plain, _ = run(tr, "fifo", 0.5)
        assert (plain.c.inverted_acc_h > 0) == counted, (budget, plain.c.inverted_acc_h)
        sim = Engine(tr, FaultModel.off(), 1, 0.5, 60)
        per_job, _, _ = inverted.watch(sim)
        sim.run(make("fifo", sim))
        assert sim.c.inverted_acc_h == plain.c.inverted_acc_h
        assert abs(sum(per_job.values()) - plain.c.inverted_acc_h) < 1e-6
        sim = Engine(tr, FaultModel.off(), 1, 0.5, 60)
        withheld.watch(sim)
        sim.run(make("fifo", sim))
        assert sim.c.inverted_acc_h == plain.c.inverted_acc_h


def test_the_start_accuracy_probe_measures_each_told_start_against_its_placement(monkeypatch: Any) -> None:
    """vision's four research jobs fill onprem-sjc's four nodes for 2 hours; at 30 minutes three jobs of all four
    nodes (1 hour each) arrive and wait: placed at hours 2, 3 and 4 in turn. `bench/start_accuracy.py` records the
    start each was told when it first waited and the hour a plan placed it, and how late that came: its figures
    are the run's (the jobs' starts) and the plans' own."""
    import start_accuracy

    from reconciler.plan import planner

    monkeypatch.setattr(planner, "plan_with_state", planner.plan_with_state)    # the probe wraps it: put back
    files = base_files()
    del files["fleet/clusters/gke-usc1.yaml"]
    tr = trace(*(line(f"run{i}", 0, 2, count=8) for i in range(4)),
               *(line(f"w{i}", 30, 1, count=32) for i in range(3)), files=files)
    sim = Engine(tr, FaultModel.off(), 1, 0.5, 60)
    told = start_accuracy.watch(sim)
    sim.run(make("fleet", sim))
    waited = sorted(told.first)
    assert waited == ["vision/w0", "vision/w1", "vision/w2"], told.first
    for job in waited:
        at, expected = told.first[job]
        start = sim.by_id[job].first_start_s
        assert at == 0.5 and expected is not None and start is not None
        assert 0 <= start / 3600 - told.placed[job] < 0.05, (job, start, told.placed[job])
        assert told.late(job) == told.placed[job] - (0.5 + expected)
    assert [round(told.placed[j], 1) for j in waited] == [2.0, 3.0, 4.0]
    (row,) = start_accuracy.summary(told, {j.id: j.cls for j in sim.jobs})
    late = sorted(told.late(j) or 0.0 for j in waited)
    assert row["waited"] == row["told and placed"] == 3 and row["told none"] == row["never placed"] == 0
    assert row["median late (h)"] == round(late[1], 2) and row["over 1 h late"] == sum(x > 1 for x in late)


def test_the_preemption_probe_counts_each_preemption_carried_out_and_what_followed_it(monkeypatch: Any) -> None:
    """Four research jobs of vision fill onprem-sjc's four nodes for 5 hours; at 30 minutes a production job of all
    four nodes arrives: it preempts them (waiting 4.5 hours costs more than their restarts) and starts once they
    stopped. `bench/preempt_victims.py` counts every preemption the engine carried out (the run's own count), each
    once for its pair, its preemptor started within the hour; no victim stopped twice."""
    import preempt_victims

    from reconciler.plan import victims
    from reconciler.simulate import engine, loop

    for owner, name in ((victims, "cheaper_to_wait"), (loop, "step"), (loop.FleetLoop, "step"),
                        (engine.Engine, "stop"), (engine.Engine, "_try_start"), (loop.SimActuator, "stop")):
        monkeypatch.setattr(owner, name, getattr(owner, name))     # the probe wraps them: put back
    files = base_files()
    del files["fleet/clusters/gke-usc1.yaml"]
    tr = trace(*(line(f"low{i}", 0, 5, count=8, priority="research") for i in range(4)),
               line("prod", 30, 1, count=32, priority="production"), files=files)
    pr = preempt_victims.watch()
    sim, doc = run(tr, "fleet", 0.5)
    assert sim.by_id["vision/prod"].first_start_s is not None
    got = preempt_victims.summary(pr, {**doc, "_lost_per_run": 0.0}, int(0.5 * 86400))
    assert got["carried_out"] == doc["preemptions"] == sim.c.preemptions == 4
    assert got["by"]["churn"] == {"started within 1 h": {"n": 4, "lost_acc_h": got["by"]["churn"]["started within 1 h"]
                                                         ["lost_acc_h"]}}
    assert got["by"]["preemptor class"]["production"]["n"] == 4 and got["by"]["victim class"]["research"]["n"] == 4
    assert got["victims stopped more than once"] == 0 and got["most stops of one victim"] == 1
    again = got["waited again"]["victim of a lower class"]     # research stopped for production
    assert list(got["waited again"]) == ["victim of a lower class"] and again["n"] == 4
    restarts = [t for e in pr.done for t in pr.starts[e["victim"]] if t > e["t_s"]]
    assert again["started again"] == len(restarts) and again["waited at least their restart"] <= len(restarts)


def test_the_preemption_probe_labels_a_victim_stopped_again_by_the_same_preemptor() -> None:
    """The livelock's signature (docs/benchmarks.md, thirty-first session): a victim stopped for a preemptor that
    did not start, restarted, and stopped again for it; a preemptor that starts hours later, or never."""
    import preempt_victims

    pr = preempt_victims.Probe()
    pr.done = [{"t_s": 0, "victim": "v", "by": "p"}, {"t_s": 100, "victim": "w", "by": "q"},
               {"t_s": 2000, "victim": "v", "by": "p"}, {"t_s": 3000, "victim": "v", "by": "r"}]
    pr.starts.update({"p": [9000], "r": [3000 + 3600]})
    preempt_victims.churn(pr, 86400)
    assert [e["churn"] for e in pr.done] == ["started later", "never started", "again", "started within 1 h"]


def test_an_arrival_jitter_given_with_a_generated_trace_is_refused_not_ignored() -> None:
    """--arrival-jitter-minutes moves a given trace's arrivals. With a generated trace (whose arrivals the seed
    draws) it was accepted and ignored, by bench_simulate.py and by the one-seed tools alike, so a run said to be
    moved was not. Now such a jitter is refused with one line; left out, it is the default for a given trace and 0
    for a generated one; 0 is accepted with either."""
    import subprocess

    assert bench_simulate.jitter_of(None, True) == bench_simulate.JITTER_MINUTES
    assert bench_simulate.jitter_of(None, False) == 0.0 and bench_simulate.jitter_of(0.0, False) == 0.0
    assert bench_simulate.jitter_of(2.5, True) == 2.5
    bench = Path(__file__).resolve().parents[1] / "bench"
    for script in ("bench_simulate.py", "trace_wait.py"):
        r = subprocess.run([sys.executable, str(bench / script), "--jobs", "20", "--days", "1",
                            "--arrival-jitter-minutes", "5"], capture_output=True, text=True, timeout=120)
        assert r.returncode in (1, 2) and "Traceback" not in r.stderr, (script, r.stderr)
        assert "moves the arrivals of a given trace" in r.stderr, (script, r.stderr)


def test_the_over_quota_probe_records_each_placement_that_raises_the_accelerators_over_quota() -> None:
    """`bench/over_quota.py` wraps `Watch.change`: a placement that takes vision past what its cohort can lend it
    is an episode (its hour, team, accelerator, accelerators placed, accelerators over after it, and the team's use
    against its nominal); one within quota and a release are not. The rule's own figure is unchanged."""
    import over_quota

    tr = trace(line("a", 0, 1, count=8))
    sim = Engine(tr, FaultModel.off(), 1, 0.5, 60)
    episodes = over_quota.watch(sim)
    sim.watch.change("vision", "nvidia-h100-80gb", 8, 0.0)
    assert episodes == [] and sim.watch.over_quota == 0
    sim.watch.change("vision", "nvidia-h100-80gb", 200, 0.0)
    (e,) = episodes
    assert (e["team"], e["accelerator"], e["placed"], e["use"], e["nominal"]) == ("vision", "nvidia-h100-80gb", 200,
                                                                                  208, 64)
    assert e["over"] == sim.watch.over_quota > 0
    sim.watch.change("vision", "nvidia-h100-80gb", -200, 0.0)
    assert len(episodes) == 1 and sim.watch.over_quota == 0
