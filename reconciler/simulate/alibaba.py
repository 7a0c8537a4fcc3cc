"""Importer for the Alibaba GPU-cluster trace `cluster-trace-gpu-v2023` (Weng et al., "Beware of
Fragmentation", USENIX ATC'23; github.com/alibaba/clusterdata, folder cluster-trace-gpu-v2023). Pure.

Its pod lists (`csv/openb_pod_list_*.csv`) have the columns name, cpu_milli, memory_mib, num_gpu, gpu_milli,
gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time (times in seconds). Each GPU pod
becomes one trace line, mapped onto the fleet:

- every number finite, not negative, and not absurd (`num_gpu` at most `MAX_POD_GPUS`, times at most ten
  years): else a located problem for the row (file, line, column name), never an internal error;
- arrival: `creation_time` minus the earliest one; true runtime: `deletion_time - scheduled_time`; pods
  that never ran (no `scheduled_time`, or `pod_phase` Pending: the published lists leave it empty for pods
  deleted before binding), pods without a positive runtime, and CPU-only pods (`num_gpu` 0), are skipped
  and counted;
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
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from ..models import Job
from ..problems import Problem
from ..validate import Validated
from .trace import MAX_TRACE_MINUTES, trace_line

COLUMNS = ("name", "num_gpu", "gpu_milli", "gpu_spec", "qos", "creation_time", "deletion_time", "scheduled_time")


@dataclass
class Imported:
    lines: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=lambda: {"cpu_only": 0, "never_ran": 0, "no_runtime": 0,
                                                             "too_large": 0})
    problems: list[Problem] = field(default_factory=list)


MAX_POD_GPUS = 100_000
"""More GPUs than any pod of any cluster asks for (the trace's largest asks for 8): a larger `num_gpu` is a
corrupt row, not a job to simulate."""
MAX_TIME_S = MAX_TRACE_MINUTES * 60
"""Times are seconds from the trace's start: beyond ten years (the simulator's horizon) a value is corrupt."""
TIMES = ("creation_time", "deletion_time", "scheduled_time")


class _Bad(Exception):
    """A row's value that cannot be imported: the column, and what is wrong with it."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column, self.message = column, message


def _float(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if x == x else None


def _value(row: list[str], col: Mapping[str, int], name: str, *, required: bool = False) -> float | None:
    """The number in column `name` (None when empty or NaN, as the published CSVs leave unknown times), or
    `_Bad`: not a number where one is required, infinite, negative, or absurdly large."""
    text = row[col[name]].strip()
    x = _float(text)
    if x is None:
        if required or (text and text.lower() != "nan"):
            raise _Bad(name, f"`{name}` is {text[:40]!r}, not a number")
        return None
    if not math.isfinite(x):
        raise _Bad(name, f"`{name}` is {text[:40]!r}, not a finite number")
    if x < 0:
        raise _Bad(name, f"`{name}` is {text[:40]}, below 0")
    limit = MAX_POD_GPUS if name == "num_gpu" else MAX_TIME_S
    if x > limit:
        what = "GPUs" if name == "num_gpu" else "seconds (ten years)"
        raise _Bad(name, f"`{name}` is {text[:40]}, over {limit:,} {what}: not a real pod")
    return x


def import_pods(path: str, text: str, v: Validated, gpu_map: Mapping[str, str] | None = None) -> Imported:
    out = Imported()
    reader = csv.reader(io.StringIO(text))
    try:
        rows = list(reader)
    except csv.Error as e:       # e.g. a field over the csv module's limit of 131,072 characters
        out.problems.append(Problem(path, reader.line_num, 1, f"this row cannot be read as CSV: {e}",
                                    hint="give an openb_pod_list_*.csv file of cluster-trace-gpu-v2023 as published"))
        return out
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
    col_phase = header.index("pod_phase") if "pod_phase" in header else None
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
    parsed: list[tuple[float, dict[str, object], float, int]] = []
    for n, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < len(header):
            out.problems.append(Problem(path, n, 1, f"the row has {len(row)} fields, the header {len(header)}",
                                        hint="each row needs every column of the header"))
            continue
        try:
            gpus = _value(row, col, "num_gpu", required=True)
            created = _value(row, col, "creation_time", required=True)
            deleted, scheduled = _value(row, col, "deletion_time"), _value(row, col, "scheduled_time")
        except _Bad as e:
            out.problems.append(Problem(path, n, 1, e.message, e.column,
                                        f"check the row against the trace's format: GPUs 0 to {MAX_POD_GPUS:,}, "
                                        f"times in seconds 0 to {MAX_TIME_S:,}"))
            continue
        assert gpus is not None and created is not None
        if gpus <= 0:
            out.skipped["cpu_only"] += 1
            continue
        phase = row[col_phase].strip() if col_phase is not None else ""
        if scheduled is None or phase == "Pending":        # never bound to a node: it never ran
            out.skipped["never_ran"] += 1
            continue
        start = max(scheduled, created)
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
        parsed.append((created, doc, (deleted - start) / 3600, n))
    first = min((c for c, _, _, _ in parsed), default=0.0)
    for created, doc, hours, n in sorted(parsed, key=lambda t: (t[0], str(t[1]["name"]))):
        try:
            job = Job.model_validate(doc)
        except ValidationError as e:      # a value the job model refuses: the row's problem, never a crash
            first_error = e.errors()[0]
            where = ".".join(str(x) for x in first_error["loc"])
            out.problems.append(Problem(path, n, 1, f"the pod makes no valid job: `{where}`: {first_error['msg']}",
                                        where, "check the row against the trace's format"))
            continue
        out.lines.append(trace_line(job, (created - first) / 60, hours))
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
