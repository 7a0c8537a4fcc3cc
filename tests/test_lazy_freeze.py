"""Issue 22 item 5: the improvement phase (reconciler/plan/improve.py) judges each run by `state_key`, read from
its state, and freezes only the plan it keeps (summary.freeze: the pending jobs' reasons, the per-cluster quotas
and the pools' plans). These check that this changes no plan: the key read from the state is the key of the
frozen plan, and every plan is the one freezing each run's plan at once gives, byte for byte."""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler import pipeline
from reconciler.catalog import load_catalog
from reconciler.plan import improve
from reconciler.plan import plan as plan_greedy
from reconciler.plan.greedy import place_all
from reconciler.plan.improve import FFD, SIZE, AsOf, finish, plan_key, polish, state_key
from reconciler.plan.live import LiveInputs, Running
from reconciler.plan.state import FAIR, Fleet, PlanState, Strategy
from reconciler.plan.summary import freeze
from reconciler.plan.types import Plan
from reconciler.sources import read_worktree
from reconciler.validate import Validated

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from generate import generate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from builders import PRIORITIES, TEAMS

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 11, 23, 8, tzinfo=UTC)
CAT = load_catalog()


def fleets() -> list[tuple[str, Validated, Plan | None, LiveInputs | None]]:
    """The example fleet and two small generated ones (the improvement phase runs on them), from git and from what
    runs: every second placed job of the plan from git running, with some minutes behind it."""
    out: list[tuple[str, Validated, Plan | None, LiveInputs | None]] = [
        ("example", pipeline.check(read_worktree(ROOT), CAT), None, None)]
    for size in ((3, 24, 4, 80, 3), (4, 30, 5, 100, 5)):
        out.append((f"generated {size}", pipeline.check({k: t.encode() for k, t in generate(*size).items()}, CAT),
                    None, None))
    for name, v, _, _ in list(out):
        first = plan_greedy(v)
        kinds = {j.id: j.kind for j in v.loaded.jobs}
        running = {p.job: Running(p.job, p.cluster, p.pool, p.units) for p in first.placements[::2]
                   if kinds.get(p.job) != "inference"}
        minutes = {j: 23.0 * (i % 7) for i, j in enumerate(sorted(running))}
        out.append((f"{name}, from what runs", v, None, LiveInputs(NOW, running, run_minutes=minutes)))
    return out


def runs(v: Validated, base: Plan | None, live: LiveInputs | None) -> list[PlanState]:
    """One greedy run per strategy the improvement phase tries (a re-pack leads with the default run's jobs)."""
    if live is not None:
        from reconciler.plan.live import live_base, live_validated
        v = live_validated(v, live)
        base = live_base(v, base, live)
    fleet = Fleet.of(v, live)
    out = []
    for strategy in (FAIR, SIZE, FFD, None):
        if strategy is None:
            strategy = Strategy(name="repack", order="fair", lead=tuple(sorted(out[0].live)))
        st = PlanState(fleet, base, strategy)
        place_all(st)
        out.append(st)
    return out


def test_the_key_read_from_a_runs_state_is_the_key_of_its_frozen_plan() -> None:
    checked = 0
    for name, v, base, live in fleets():
        for st in runs(v, base, live):
            assert state_key(st, 7) == plan_key(st, freeze(st), 7), (name, st.strategy.name)
            ranked = finish(st, 7)                               # after eject-and-insert too
            assert ranked[0] == plan_key(st, freeze(st), 7), (name, st.strategy.name)
            ranked = polish(ranked)                              # and after the cost moves and compaction
            assert isinstance(ranked[1], Plan) and ranked[0] == plan_key(st, ranked[1], 7), (name, st.strategy.name)
            checked += 1
    assert checked == 24


def _gone_pools(seed: int, head: bool) -> dict[str, bytes]:
    """A service of 2-4 replicas and a few jobs, whose base plan ran the replicas in two clusters that the head
    no longer has: each replica must move, with its own reason, and undone moves reorder them."""
    r = random.Random(seed)

    def cluster(name: str, zone: str, pools: list[tuple[str, int, int]]) -> str:
        return (f"name: {name}\nprovider: gcp\nregion: us-central1\nzone: {zone}\nkubernetes: {{cluster: k-{name}}}\n"
                "pools:\n" + "".join(f"  - name: {n}\n    accelerator: nvidia-h100-80gb\n    max: {mx}\n    min: {mn}\n"
                                      for n, mx, mn in pools))

    def job(name: str, team: str, prio: str, count: int, replicas: int = 1) -> str:
        serve = f"kind: inference\nreplicas: {replicas}\nport: 8000\n" if replicas > 1 else ""
        return (f"name: {name}\nteam: {team}\npriority: {prio}\noptions:\n  - {{accelerator: nvidia-h100-80gb, "
                f"count: {count}}}\nimage: img:1\n{serve}")

    pools = [("h100", r.choice([2, 3, 4, 6]), r.choice([0, 0, 1]))]
    pools += [("h100b", r.choice([2, 4]), 0)] if r.random() < .4 else []
    f = {"policies/teams.yaml": TEAMS, "policies/priorities.yaml": PRIORITIES,
         "fleet/clusters/usc1.yaml": cluster("usc1", "us-central1-a", pools)}
    if not head:
        f["fleet/clusters/gonea.yaml"] = cluster("gonea", "us-central1-b", [("h100", 8, 0), ("h100x", 8, 0)])
        f["fleet/clusters/goneb.yaml"] = cluster("goneb", "us-central1-c", [("h100", 8, 0)])
    replicas = r.choice([2, 3, 4])
    f["jobs/vision/serve.yaml"] = job("serve", "vision", r.choice(["production", "research"]), r.choice([1, 2, 4]),
                                      replicas)

    def classes(team: str) -> list[str]:
        return ["research", "production"] if team == "vision" else ["research"]

    for i in range(r.randint(0, 6)):
        t = r.choice(["vision", "lang"])
        f[f"jobs/{t}/j{i}.yaml"] = job(f"j{i}", t, r.choice(classes(t)), r.choice([1, 2, 4, 8]))
    for i in range(r.randint(0, 4) if head else 0):
        t = r.choice(["vision", "lang"])
        f[f"jobs/{t}/n{i}.yaml"] = job(f"n{i}", t, r.choice(classes(t)), r.choice([1, 2, 4, 8, 16]))
    return {k: v.encode() for k, v in f.items()}


@dataclass(frozen=True)
class _Eager(AsOf):
    """The plan frozen at once, where improve.py takes an `AsOf` (what the planner did before it froze lazily)."""

    plan: Plan

    @staticmethod
    def of(st: PlanState) -> _Eager:
        return _Eager(dict(st.outcome.waits), tuple(st.live), freeze(st))

    def freeze(self, st: PlanState) -> Plan:
        return self.plan


def test_plans_frozen_lazily_are_the_plans_frozen_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every plan, byte for byte, with each run's plan frozen when it is made (as before) and lazily. Undone moves
    change what freeze reads: a pending job placed and taken out again loses its recorded reasons, and a replica
    taken out and put back comes later in `st.live` (a moved service's placement names its first replica's
    reason: seeds 22 and 53 below gave another reason before `AsOf` kept the order; seeds 6 and 14 give other
    pending reasons when the recorded ones are not put back)."""
    cases = [(name, v, base, live) for name, v, base, live in fleets()]
    for seed in (6, 14, 22, 53):
        base = plan_greedy(pipeline.check(_gone_pools(seed, False), CAT))
        cases.append((f"gone pools {seed}", pipeline.check(_gone_pools(seed, True), CAT), base, None))
    lazy = [plan_greedy(v, base, live).to_json() for _, v, base, live in cases]
    monkeypatch.setattr(improve, "AsOf", _Eager)
    for (name, v, base, live), text in zip(cases, lazy, strict=True):
        assert plan_greedy(v, base, live).to_json() == text, name
