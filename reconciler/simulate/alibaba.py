"""Importer for the Alibaba GPU-cluster trace `cluster-trace-gpu-v2023` (Weng et al., "Beware of
Fragmentation", USENIX ATC'23; github.com/alibaba/clusterdata, folder cluster-trace-gpu-v2023). Pure.

Its pod lists (`csv/openb_pod_list_*.csv`) have the columns name, cpu_milli, memory_mib, num_gpu, gpu_milli,
gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time (times in seconds). Each GPU pod
becomes one trace line, mapped onto the fleet:

- arrival: `creation_time` minus the earliest one; true runtime: `deletion_time - scheduled_time` (from
  creation when never scheduled); pods without a positive runtime, and CPU-only pods (`num_gpu` 0), are
  skipped and counted;
- size: `num_gpu` GPUs (a GPU-sharing pod, `gpu_milli` < 1000, takes one whole GPU: Fleet does not share);
- allowed GPU types (`gpu_spec`, e.g. `V100M16|V100M32`; empty: any) through `gpu_map` (Alibaba type -> a
  fleet accelerator; every unmapped type goes to the fleet's GPU accelerator with the most capacity): one
  option per distinct accelerator, in the order given;
- QoS to priority class: LS (latency-sensitive) -> the fleet's second-highest class (its highest is kept
  for what the fleet itself marks critical), kind inference; Burstable -> the default class, kind training;
  BE (best effort) -> a class that requires spot if there is one (else the lowest), kind batch. A team's
  `max_priority` caps it;
- team: none in the trace; a stable hash of the pod name picks one of the teams with quota for the first
  accelerator (weighted by that quota), so the same pod always lands on the same team.
"""

from __future__ import annotations

import csv
import io
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..models import Job
from ..problems import Problem
from ..validate import Validated
from .trace import trace_line

COLUMNS = ("name", "num_gpu", "gpu_milli", "gpu_spec", "qos", "creation_time", "deletion_time", "scheduled_time")


@dataclass
class Imported:
    lines: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=lambda: {"cpu_only": 0, "no_runtime": 0, "too_large": 0})
    problems: list[Problem] = field(default_factory=list)


def _float(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if x == x else None


def import_pods(path: str, text: str, v: Validated, gpu_map: Mapping[str, str] | None = None) -> Imported:
    out = Imported()
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        out.problems.append(Problem(path, 1, 1, "the file is empty", hint="give an openb_pod_list_*.csv file"))
        return out
    header = [h.strip() for h in rows[0]]
    if header and header[0] == "":
        header[0] = "index"               # pandas' unnamed index column, as the published CSVs have it
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        out.problems.append(Problem(path, 1, 1, "missing column(s): " + ", ".join(missing), "header",
                                    "the pod list of cluster-trace-gpu-v2023 has the columns " + ", ".join(COLUMNS)))
        return out
    col = {c: header.index(c) for c in COLUMNS}
    gpu_pools = [p for p in v.pools if p.shape is None and p.kind == "gpu" and p.max > 0]
    if not gpu_pools:
        out.problems.append(Problem(path, 1, 1, "the fleet has no GPU pool to map the trace's pods onto",
                                    hint="add a GPU pool to fleet/clusters/"))
        return out
    capacity: dict[str, int] = {}
    for p in gpu_pools:
        capacity[p.accelerator] = capacity.get(p.accelerator, 0) + p.max * p.unit_accelerators
    default_acc = sorted(capacity, key=lambda a: (-capacity[a], a))[0]
    node = {a: max(p.unit_accelerators for p in gpu_pools if p.accelerator == a) for a in capacity}
    classes = _classes(v)
    parsed: list[tuple[float, dict[str, object], float]] = []
    for n, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < len(header):
            out.problems.append(Problem(path, n, 1, f"the row has {len(row)} fields, the header {len(header)}",
                                        hint="each row needs every column of the header"))
            continue
        gpus = _float(row[col["num_gpu"]])
        created, deleted = _float(row[col["creation_time"]]), _float(row[col["deletion_time"]])
        scheduled = _float(row[col["scheduled_time"]])
        if gpus is None or created is None:
            out.problems.append(Problem(path, n, 1, "num_gpu and creation_time must be numbers", "num_gpu",
                                        "check the row against the trace's format"))
            continue
        if gpus <= 0:
            out.skipped["cpu_only"] += 1
            continue
        start = scheduled if scheduled is not None and scheduled > 0 else created
        if deleted is None or deleted <= start:
            out.skipped["no_runtime"] += 1
            continue
        spec = [s for s in row[col["gpu_spec"]].strip().split("|") if s and s.lower() != "nan"]
        accs = list(dict.fromkeys((gpu_map or {}).get(s, default_acc) for s in spec)) or [default_acc]
        count = max(1, int(gpus))
        if any(count > node[a] and count % node[a] for a in accs if a in node):
            out.skipped["too_large"] += 1
            continue
        qos = row[col["qos"]].strip()
        name = _name(row[col["name"]].strip(), n)
        team = _team(v, name, accs[0])
        if team is None:
            out.skipped["too_large"] += 1
            continue
        cls, kind, spot = classes.get(qos, classes["Burstable"])
        doc: dict[str, object] = {
            "name": name, "team": team, "priority": _capped(v, team, cls), "kind": kind,
            "options": [{"accelerator": a, "count": count} for a in accs], "spot": spot,
            "duration_hours": round((deleted - start) / 3600, 4),
            "checkpoint_minutes": 0 if kind == "inference" else 30, "image": "registry.example/alibaba/pod:1"}
        parsed.append((created, doc, (deleted - start) / 3600))
    first = min((c for c, _, _ in parsed), default=0.0)
    for created, doc, hours in sorted(parsed, key=lambda t: (t[0], str(t[1]["name"]))):
        out.lines.append(trace_line(Job.model_validate(doc), (created - first) / 60, hours))
    return out


def _name(raw: str, line: int) -> str:
    clean = "".join(ch if ch.isalnum() else "-" for ch in raw.lower()).strip("-")[:63].strip("-")
    return clean or f"pod-{line}"


def _classes(v: Validated) -> dict[str, tuple[str, str, str]]:
    prio = v.loaded.priorities
    assert prio is not None
    ordered = sorted(prio.classes, key=lambda c: (-c.value, c.name))
    high = ordered[1].name if len(ordered) > 1 else ordered[0].name
    spot = next((c.name for c in ordered if c.spot == "required"), ordered[-1].name)
    best_effort_spot = "required" if any(c.name == spot and c.spot == "required" for c in ordered) else "allowed"
    return {"LS": (high, "inference", "never"), "Burstable": (prio.default, "training", "never"),
            "BE": (spot, "batch", best_effort_spot)}


def _capped(v: Validated, team: str, cls: str) -> str:
    prio, teams = v.loaded.priorities, v.loaded.teams
    assert prio is not None and teams is not None
    t = next(t for t in teams.teams if t.name == team)
    if t.max_priority is None:
        return cls
    value = {c.name: c.value for c in prio.classes}
    return t.max_priority if value[cls] > value[t.max_priority] else cls


def _team(v: Validated, name: str, acc: str) -> str | None:
    teams = v.loaded.teams
    assert teams is not None
    weighted = [(t.name, t.quota[acc].nominal) for t in sorted(teams.teams, key=lambda t: t.name)
                if acc in t.quota and t.quota[acc].nominal > 0]
    total = sum(w for _, w in weighted)
    if not total:
        return None
    pick = zlib.crc32(name.encode()) % total
    for team, w in weighted:
        if pick < w:
            return team
        pick -= w
    return weighted[-1][0]
