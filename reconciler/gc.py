"""`fleet gc`: the job files whose work is over, which can go. Pure: the CLI observes (or reads `--observed`)
and removes the files (`--write`); .github/workflows/gc.yml turns the removal into a pull request.

A job can go when it finished with the spec its file has now (plan/live.py `done`: a Workload Finished, a
terminal JobSet, or a completion record, observe/completions.py, with the file's `fleet.dev/spec-digest`):
`succeeded` (its work is done; the record keeps it from running again even if the file stays) or `failed`
after its restarts (it will not run again until the file changes; deleting the file withdraws it). Removing
the file changes nothing that runs: the plan already leaves such jobs out. Only the job's own objects count
(in its team's namespace, observe/owners.py): a look-alike elsewhere never makes a running job's file "can go".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from .observe.model import Snapshot
from .observe.owners import owned_snapshot
from .plan.live import live_inputs
from .validate import Validated


@dataclass(frozen=True, slots=True)
class Finished:
    job: str
    file: str                       # jobs/<team>/<name>.yaml
    result: str                     # succeeded | failed
    clusters: tuple[str, ...]       # where it was seen finishing (records or Workloads)


def collect(v: Validated, snap: Snapshot, now: datetime | None = None) -> tuple[Finished, ...]:
    """Every job of the repository whose work is over (module docstring), by job id."""
    snap = owned_snapshot(v, snap).snapshot
    done = live_inputs(v, snap, now).done
    seen: dict[str, set[str]] = {j: set() for j in done}
    for c in snap.clusters:
        names = {r.job for r in c.completions} | {js.job_id for js in c.jobsets if js.job_id}
        for j in names & seen.keys():
            seen[j].add(c.name)
    return tuple(Finished(j, f"jobs/{j}.yaml", done[j], tuple(sorted(seen[j]))) for j in sorted(done))


def to_text(items: tuple[Finished, ...], removed: bool = False) -> str:
    if not items:
        return "no finished or failed job files to remove\n"
    verb = "removed" if removed else "can go"
    lines = [f"{f.file}: {f.result} on {', '.join(f.clusters) or 'a cluster'}: {verb}" for f in items]
    return "\n".join(lines) + f"\n{len(items)} job file(s) {verb}" + ("" if removed else
                                                                    " (`fleet gc --write` removes them)") + "\n"


def to_json(items: tuple[Finished, ...]) -> str:
    return json.dumps({"jobs": [{"job": f.job, "file": f.file, "result": f.result, "clusters": list(f.clusters)}
                                for f in items]}, indent=2) + "\n"
