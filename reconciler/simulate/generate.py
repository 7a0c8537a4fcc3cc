"""A seeded generator of realistic traces for a fleet (`fleet simulate --generate N`). Pure.

The workload is shaped after what the published traces of ML clusters report; the numbers below are this
generator's own choices (there is no public LLM-era job trace in this environment to fit them to), and each
says which finding it follows:

- Job mix (`CATEGORIES`). Acme (Hu et al., "Characterization of Large Language Model Development in the
  Datacenter", NSDI'24): evaluation jobs are the majority of jobs and short, pretraining jobs are few but
  take most of the GPU time. Helios (Hu et al., "Characterization and Prediction of Deep Learning Workloads
  in Large-Scale GPU Datacenters", SC'21): most jobs ask for few GPUs, a small share are multi-node, and
  durations are heavy-tailed over four orders of magnitude. Here: 55% evaluation/batch (1-8 accelerators,
  median 0.75 h), 8% debugging (1-8, median 0.3 h), 30% fine-tuning and research training (8-128, median
  5 h), 4% pretraining (256-1024, median 48 h), 3% inference services (1-8 per replica, 2-4 replicas, 72 h).
  Durations are log-normal around those medians (sigma 1.0: heavy-tailed, as both papers report), capped at
  14 days.
- Arrivals: a Poisson process with a diurnal swing (Helios reports submissions peaking in the working day
  and falling at night; here the rate follows 1 + 0.5 sin(2 pi (h - 8) / 24) around its mean).
- Load: durations are scaled so the expected accelerator-hours of the trace are `load` times what the
  fleet can give its teams over the trace's span (default 0.9): per accelerator, its pools at `max`, capped
  at the teams' summed nominal quota (capacity beyond quota is idle for any quota-bound policy).
- Runtime estimates: `actual_hours` is `duration_hours` times a uniform 0.5-1.1 (users over-estimate;
  Philly and Helios both report requested time limits far above actual runtimes).
- Priorities: 20% production, 60% research, 20% opportunistic (spot), within each team's ceiling; inference
  services of a team allowed `critical` are critical.

With `workloads` > 0 (issue 26), that share of eligible jobs is of the new kinds: batch jobs on GPUs run as
Ray (`framework: ray`); training jobs of two or more units become elastic gangs (`workers`: a quarter of
their units to all of them, one unit per option, the same duration at all of them); and as many training
jobs get a companion job of the same
team and class in one `group:` (an RL learner and its actors). 0 (the default) gives the traces it always did.

Every option is derived from a pool of the fleet (its accelerator and slice shape or node size) and every
count respects the team's quota ceiling, so a generated trace validates clean against the same fleet.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..models import Job, JobOption
from ..resolve import ResolvedPool
from ..validate import Validated
from ..validate_jobs import quota_ceiling
from .trace import trace_line


@dataclass(frozen=True)
class Category:
    name: str
    share: float            # of jobs
    kind: str               # training | batch | inference
    min_acc: int
    max_acc: int
    median_hours: float
    checkpoint_minutes: float


CATEGORIES = (
    Category("eval", 0.55, "batch", 1, 8, 0.75, 15),
    Category("debug", 0.08, "training", 1, 8, 0.3, 10),
    Category("finetune", 0.30, "training", 8, 128, 5.0, 30),
    Category("pretrain", 0.04, "training", 256, 1024, 48.0, 30),
    Category("serve", 0.03, "inference", 1, 8, 72.0, 0),
)
SIGMA = 1.0
MAX_HOURS = 14 * 24.0
IMAGE = "registry.example/ml/sim:1"
T = TypeVar("T")


@dataclass(frozen=True)
class _Shape:
    pool: ResolvedPool
    count: int              # accelerators per gang
    topology: str | None
    slices: int


def _shapes(pool: ResolvedPool, lo: int, hi: int) -> list[_Shape]:
    """The gang shapes one pool offers between lo and hi accelerators."""
    out: list[_Shape] = []
    if pool.shape is not None:
        for slices in (1, 2, 4):
            n = pool.unit_accelerators * slices
            if slices <= pool.max and lo <= n <= hi:
                out.append(_Shape(pool, n, pool.shape, slices))
        return out
    node = pool.unit_accelerators
    for n in (1, 2, 4, node, 2 * node, 4 * node, 8 * node, 16 * node, 32 * node, 64 * node, 128 * node):
        if lo <= n <= hi and (n <= node or n // node <= pool.max):
            out.append(_Shape(pool, n, None, 1))
    return sorted({(s.count, s.topology, s.slices): s for s in out}.values(), key=lambda s: s.count)


def _classes(v: Validated, team: str) -> list[str]:
    """The classes a team may use, highest first (ceiling from teams.yaml)."""
    prio = v.loaded.priorities
    teams = v.loaded.teams
    assert prio is not None and teams is not None
    ordered = sorted(prio.classes, key=lambda c: (-c.value, c.name))
    t = next(t for t in teams.teams if t.name == team)
    if t.max_priority is not None:
        ceiling = next(c.value for c in prio.classes if c.name == t.max_priority)
        ordered = [c for c in ordered if c.value <= ceiling]
    return [c.name for c in ordered]


def _usable_capacity(v: Validated) -> float:
    """Accelerators the fleet can give its teams: per accelerator, the pools at their max, but no more than
    the teams' nominal quotas add up to (Kueue and the planner admit within quota, so capacity beyond it is
    idle for any quota-bound policy; a load measured against the pools alone would overload the quotas)."""
    cap: dict[str, int] = {}
    for p in v.pools:
        if p.status in ("active", "cordoned"):
            cap[p.accelerator] = cap.get(p.accelerator, 0) + p.max * p.unit_accelerators
    teams = v.loaded.teams
    nominal: dict[str, int] = {}
    for t in teams.teams if teams is not None else ():
        for acc, q in t.quota.items():
            nominal[acc] = nominal.get(acc, 0) + q.nominal
    return float(sum(min(n, nominal.get(acc, 0)) for acc, n in cap.items()))


KINDS = frozenset({"ray", "elastic", "group"})


def generate(v: Validated, jobs: int, days: float, seed: int, load: float = 0.9,
             workloads: float = 0.0, kinds: frozenset[str] = KINDS) -> list[str]:
    """`jobs` trace lines over `days` for the fleet of `v` (its pools, teams, classes), seeded."""
    rng = random.Random(seed)
    wrng = random.Random(seed + 7919)      # issue 26's kinds draw apart: the rest of the trace stays the same
    teams = v.loaded.teams
    prio = v.loaded.priorities
    assert teams is not None and prio is not None
    pools = [p for p in v.pools if p.status in ("active", "cordoned") and p.max > 0]
    spot_class = {c.name for c in prio.classes if c.spot == "required"}
    regions = sorted({p.region for p in pools})
    team_weight = {t.name: float(sum(q.nominal for q in t.quota.values())) for t in teams.teams}
    team_names = sorted(n for n, w in team_weight.items() if w > 0)
    drafts: list[tuple[int, Job, float, float]] = []
    menu: dict[tuple[str, str, str], list[_Shape]] = {}
    for i in range(jobs):
        cat = _pick(rng, CATEGORIES, [c.share for c in CATEGORIES])
        team = _pick(rng, team_names, [team_weight[n] for n in team_names])
        classes = _classes(v, team)
        wanted = _priority(rng, cat, classes, spot_class)
        spot = "required" if wanted in spot_class else rng.choice(["never", "never", "allowed"])
        key = (cat.name, team, spot)
        if key not in menu:
            menu[key] = [s for p in pools for s in _shapes(p, cat.min_acc, cat.max_acc)
                         if _fits_team(teams, team, s, spot, 1 if cat.kind != "inference" else 4)]
        shapes = menu[key]
        if not shapes:
            shapes = [s for p in pools for s in _shapes(p, 1, 8) if _fits_team(teams, team, s, spot, 1)]
            cat = CATEGORIES[0]
        if not shapes:
            continue
        first = rng.choice(shapes)
        options = [_option(first)]
        alternatives = [s for s in shapes if s.pool.accelerator != first.pool.accelerator]
        if alternatives and rng.random() < 0.3:
            options.append(_option(rng.choice(alternatives), round(rng.uniform(0.5, 0.9), 2)))
        hours = min(MAX_HOURS, cat.median_hours * math.exp(rng.gauss(0.0, SIGMA)))
        doc: dict[str, object] = {
            "name": f"{cat.name}-{i:05d}", "team": team, "priority": wanted, "kind": cat.kind,
            "options": options, "spot": spot, "duration_hours": round(hours, 3),
            "checkpoint_minutes": cat.checkpoint_minutes, "image": IMAGE}
        if cat.kind == "inference":
            doc["replicas"] = rng.randint(2, 4)
            doc["port"] = 8080
        if rng.random() < 0.2:
            doc["data_region"] = rng.choice(regions)
        extra = _workloads(wrng, doc, first, cat, teams, spot, kinds) if workloads and wrng.random() < workloads \
            else []
        job = Job.model_validate(doc)
        drafts.append((first.count * job.replicas, job, hours, rng.uniform(0.5, 1.1)))
        drafts += [(first.count, Job.model_validate(d), hours, wrng.uniform(0.5, 1.1)) for d in extra]
    return _timed(rng, drafts, v, days, load)


def _timed(rng: random.Random, drafts: list[tuple[int, Job, float, float]], v: Validated, days: float,
           load: float) -> list[str]:
    """Arrival times (diurnal Poisson) and the duration scale that makes the trace's expected load `load`."""
    capacity_h = _usable_capacity(v) * days * 24
    work_h = sum(h * acc for acc, _, h, _ in drafts) or 1.0
    scale = load * capacity_h / work_h
    span = days * 24 * 60
    arrivals = sorted(_arrival(rng, span) for _ in drafts)
    lines = []
    for at, (_, job, hours, ratio) in zip(arrivals, drafts, strict=True):
        duration = min(MAX_HOURS, max(0.05, hours * scale))
        job = job.model_copy(update={"duration_hours": round(duration, 3)})
        lines.append(trace_line(job, at, round(duration * ratio, 4)))
    return lines


def _arrival(rng: random.Random, span_minutes: float) -> float:
    """A time in [0, span) from the diurnal rate 1 + 0.5 sin(2 pi (h - 8) / 24), by rejection."""
    while True:
        t = rng.random() * span_minutes
        hour = (t / 60) % 24
        if rng.random() * 1.5 <= 1 + 0.5 * math.sin(2 * math.pi * (hour - 8) / 24):
            return round(t, 3)


def _workloads(rng: random.Random, doc: dict[str, object], first: _Shape, cat: Category, teams: object,
               spot: str, kinds: frozenset[str]) -> list[dict[str, object]]:
    """Turn the drafted job into one of issue 26's kinds (module docstring), in place; the companion jobs of a
    group it now leads."""
    gpu = first.topology is None
    units = first.slices if not gpu else first.count // first.pool.unit_accelerators
    if cat.kind == "batch" and gpu and "ray" in kinds:
        gpus = [o for o in doc["options"] if isinstance(o, JobOption) and o.topology is None]  # type: ignore[attr-defined]
        doc.update(framework="ray", command=["python", "-m", "batch"], options=gpus[:1])
        return []
    if cat.kind != "training":
        return []
    if units >= 2 and "elastic" in kinds and ("group" not in kinds or rng.random() < 0.5):
        one = _Shape(first.pool, first.count // units, first.topology, 1)
        doc.update(options=[_option(one)], workers={"min": max(1, units // 4), "max": units})
        return []
    if "group" not in kinds or not _fits_team(teams, str(doc["team"]), first, spot, 2):
        return []
    doc["group"] = f"rl-{doc['name']}"
    return [{**doc, "name": f"{doc['name']}-actors", "kind": "batch"}]


def _option(s: _Shape, speed: float = 1.0) -> JobOption:
    if s.topology is not None:
        return JobOption.model_validate({"accelerator": s.pool.accelerator, "topology": s.topology,
                                         "slices": s.slices, "relative_speed": speed})
    return JobOption.model_validate({"accelerator": s.pool.accelerator, "count": s.count, "relative_speed": speed})


def _fits_team(teams: object, team: str, s: _Shape, spot: str, replicas: int) -> bool:
    from ..models import TeamsDoc

    assert isinstance(teams, TeamsDoc)
    nominal, borrow = quota_ceiling(teams, team, s.pool.accelerator)
    if s.count * replicas > nominal + borrow:
        return False
    if spot == "required":
        return s.pool.capacity == "spot"
    if spot == "never":
        return s.pool.capacity != "spot"
    return True


def _priority(rng: random.Random, cat: Category, classes: list[str], spot_class: set[str]) -> str:
    if cat.kind == "inference":
        return classes[0]
    r = rng.random()
    non_spot = [c for c in classes if c not in spot_class]
    spot = [c for c in classes if c in spot_class]
    by_rank = non_spot[1:] if len(non_spot) > 2 else non_spot         # critical is for services
    if r < 0.2 and by_rank:
        return by_rank[0]
    if r < 0.8 or not spot:
        return by_rank[min(1, len(by_rank) - 1)]
    return spot[0]


def _pick(rng: random.Random, items: Sequence[T], weights: Sequence[float]) -> T:
    return rng.choices(items, weights=weights, k=1)[0]
