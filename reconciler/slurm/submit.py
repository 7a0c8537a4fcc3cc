"""A placed job as slurmrestd submits it: the v0.0.38 job-submit document and its batch script. Pure.

The document is `POST /slurm/v0.0.38/job/submit`'s body (`v0.0.38_job_submission`: `script` and `job`, a
`v0.0.38_job_properties`), with the field names of that OpenAPI schema (Slurm 22.05's slurmrestd serves it at
`/openapi/v3`):
- `name` `<team>.<job>`, `account` `account_prefix` + team, `qos` the job's priority class, `partition` the
  pool's partition, `nodes` `[n, n]` (the plan's units: a GPU pool's unit is a node), `gpus_per_node` the
  plan's accelerators per unit (a string, as the schema has it), `constraints` and `time_limit` (minutes)
  from the job's `slurm:` block (the time limit defaults to `duration_hours`
  on the option placed, `resolve.run_hours`: / its relative_speed, rounded up; before 2026-12-07 the duration
  itself, so a job placed on an option at 0.5 was killed by Slurm halfway);
- `comment` `fleet.dev/job=<team>/<job> fleet.dev/pool=<pool> fleet.dev/spec-digest=<digest>`: the first word
  is how observe finds the job again (and how Fleet tells its jobs from everyone else's); the pool and the
  spec digest tell what it was submitted as, so a finished job runs again only once its file changes;
- `requeue` true (a preempted job goes back to the queue, `restart_cnt` raised), the job's `env` plus
  `FLEET_JOB`, `FLEET_IMAGE` and a `PATH` (slurmrestd passes no environment of its own), and `/tmp` as the
  working directory (a script that needs another one changes to it).
The script is the job's `slurm.script`, or else runs the job's image command with `srun --container-image`
(the pyxis/enroot plugin NVIDIA's Slurm clusters run containers with), one task per node.
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any

from ..models import Cluster, Job, Pool, spec_digest
from ..plan.types import Placement, Plan
from ..resolve import run_hours
from ..validate import Validated
from . import SUBMITTED_TAG

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def comment(job: Job, pool: str) -> str:
    return f"{SUBMITTED_TAG}={job.id} fleet.dev/pool={pool} fleet.dev/spec-digest={spec_digest(job)}"


def parse_comment(text: str) -> dict[str, str]:
    """The `key=value` words of a comment Fleet wrote; {} for anyone else's (no `fleet.dev/job=` word)."""
    words = dict(w.split("=", 1) for w in (text or "").split() if "=" in w and w.startswith("fleet.dev/"))
    return words if "/" in words.get(SUBMITTED_TAG, "") else {}


def script(job: Job) -> str:
    head = f"#!/bin/bash\n# {SUBMITTED_TAG}={job.id}: submitted by Fleet\n"
    if job.slurm is not None and job.slurm.script is not None:
        return head + job.slurm.script.rstrip("\n") + "\n"
    command = " ".join(shlex.quote(a) for a in job.command)
    return (head + "set -euo pipefail\n"
            f"exec srun --ntasks-per-node=1 --container-image={shlex.quote(job.image)} {command}".rstrip() + "\n")


def submission(cluster: Cluster, pool: Pool, job: Job, priority: str, placement: Placement) -> dict[str, Any]:
    """The job-submit document of `job` placed on `pool` of Slurm cluster `cluster` (module docstring)."""
    assert cluster.slurm is not None and pool.partition is not None, "a Slurm pool of a valid repository"
    nodes = max(1, len(placement.units))
    props: dict[str, Any] = {
        "name": f"{job.team}.{job.name}", "account": cluster.slurm.account_prefix + job.team, "qos": priority,
        "partition": pool.partition, "nodes": [nodes, nodes], "gpus_per_node": str(placement.accelerators_per_unit),
        "comment": comment(job, pool.name), "requeue": True, "current_working_directory": "/tmp",
        "environment": {"PATH": DEFAULT_PATH, **job.env, "FLEET_JOB": job.id, "FLEET_IMAGE": job.image}}
    limit = job.slurm.time_limit_minutes if job.slurm is not None else None
    hours = run_hours(job.duration_hours, job.options[placement.option].relative_speed) \
        if placement.option < len(job.options) else job.duration_hours
    if limit is None and hours is not None:
        limit = math.ceil(hours * 60)
    if limit is not None:
        props["time_limit"] = limit
    if job.slurm is not None and job.slurm.constraint is not None:
        props["constraints"] = job.slurm.constraint
    return {"job": dict(sorted(props.items())), "script": script(job)}


def to_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def documents(v: Validated, plan: Plan) -> dict[tuple[str, str], dict[str, Any]]:
    """(cluster, job id) -> the job-submit document of every placement on a Slurm pool of the plan."""
    loaded = v.loaded
    assert loaded.priorities is not None, "a valid repository"
    clusters = {c.name: c for c in loaded.clusters if c.provider == "slurm"}
    jobs = {j.id: j for j in loaded.jobs}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for pl in plan.placements:
        cluster = clusters.get(pl.cluster)
        if cluster is None or pl.job not in jobs:
            continue
        pool = next(p for p in cluster.pools if p.name == pl.pool)
        job = jobs[pl.job]
        out[(pl.cluster, pl.job)] = submission(cluster, pool, job, job.priority or loaded.priorities.default, pl)
    return out


def files(v: Validated, plan: Plan) -> dict[str, str]:
    """`fleet render`'s Slurm files: `<cluster>/slurm/<team>.<job>.json` (the job-submit document) and `.sh`
    (its script, the same text as the document's `script`, for people to read and run by hand)."""
    out: dict[str, str] = {}
    for (cluster, job_id), doc in documents(v, plan).items():
        stem = f"{cluster}/slurm/{job_id.replace('/', '.')}"
        out[f"{stem}.json"] = to_json(doc)
        out[f"{stem}.sh"] = doc["script"]
    return out
