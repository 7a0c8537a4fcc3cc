"""Job rules for the workloads of issue 26 (Ray, job groups, elastic gangs), part of stage 3. Pure.

- `framework: ray` runs on GPU/Trainium options (a Ray head and workers of whole nodes or one shared node);
  TPU Ray clusters need a CPU head pool Fleet does not model. A RayJob (training/batch) needs `command`, its
  entrypoint; a RayService (inference) needs `command: [serve, run, MODULE:APP]`, the Serve application it
  deploys (Ray's `serve run` CLI; a Python import path), and scales inside one Ray cluster, so it has no
  `replicas`.
- `workers: {min, max}` (an elastic gang) is for training jobs, min <= max; each option is one unit: a TPU
  option is one slice (`slices: 1`), a GPU option one whole node (`count` = the node's accelerators). The
  planner sees the job at `min` units (`elastic_options`) and grows it afterwards (plan/workloads.py).
- `group:` members (one team's jobs naming the group) share one priority class and one `group_scope`.
- An inference service (not Ray) has a Deployment or LeaderWorkerSet named after the job, or one per pool
  `<job>-<pool>` where its replicas run on several pools of a cluster (render/service.py): two jobs of one
  namespace whose names could come out equal that way are refused (`check_workload_names`), and so is a
  LeaderWorkerSet name `<job>-<pool>` too long for the StatefulSets LWS makes of it (`check_lws_names`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace

from .kube_rules import child_jobs
from .models import Cluster, Job, Team
from .reporter import Reporter
from .resolve import ResolvedOption, ResolvedPool

SERVE_RUN = ("serve", "run")
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
IMPORT_PATH = re.compile(f"{_DOTTED}:{_DOTTED}")
"""A Python import path `pkg.module:attr` (the attribute may be dotted): what Ray Serve imports, and what render
writes as plain text into the RayService's `serveConfigV2` YAML (render/ray.py), where a space, `: `, `#` or a
newline would change or break it."""


def serve_import_path(job: Job) -> str | None:
    """The Serve application (`MODULE:APP`) of a Ray inference job's `command: [serve, run, MODULE:APP]`."""
    cmd = job.command
    if len(cmd) == 3 and cmd[:2] == SERVE_RUN and IMPORT_PATH.fullmatch(cmd[2]):
        return cmd[2]
    return None


def check_workload_job(r: Reporter, path: str, job: Job, options: tuple[ResolvedOption, ...] | None,
                       node_sizes: dict[str, set[int]]) -> tuple[ResolvedOption, ...] | None:
    """Check one job's framework and workers; return its options as the planner places them (an elastic job
    at `workers.min` units), or None when they cannot be resolved."""
    if job.framework == "ray":
        _check_ray(r, path, job)
    if job.workers is None:
        return options
    w = job.workers
    ok = True
    if job.kind != "training":
        r.add(path, ("workers",), f"elastic gangs are training jobs; this is a {job.kind} job",
              "remove `workers`, or set `kind: training`")
        ok = False
    if w.min > w.max:
        r.add(path, ("workers", "min"), f"workers.min {w.min} is above workers.max {w.max}",
              "set min <= max")
        ok = False
    for i, opt in enumerate(job.options):
        if opt.slices != 1:
            r.add(path, ("options", i, "slices"), "an elastic job's option is one unit (one slice); "
                  "`workers` says how many", "remove `slices` and set `workers: {min: M, max: N}` in slices")
            ok = False
        sizes = node_sizes.get(opt.accelerator, set())
        if opt.topology is None and opt.count is not None and sizes and opt.count not in sizes \
                and not any(o.shape for o in (options or ()) if o.index == i):
            r.add(path, ("options", i, "count"), f"an elastic job's option is one unit, a whole node; {opt.count} "
                  f"{opt.accelerator} is not the accelerators of a node of any pool",
                  "use `count: " + " or ".join(str(s) for s in sorted(sizes)) + "` (per node)")
            ok = False
    if not ok or options is None:
        return None if not ok else options
    return elastic_options(options, w.min)


def elastic_options(options: tuple[ResolvedOption, ...], units: int) -> tuple[ResolvedOption, ...]:
    """Per-unit options scaled to `units` units (slices for TPU options, nodes otherwise)."""
    return tuple(replace(o, slices=units, count=o.count * units) if o.shape is not None else
                 replace(o, count=o.count * units) for o in options)


def _check_ray(r: Reporter, path: str, job: Job) -> None:
    for i, opt in enumerate(job.options):
        if opt.topology is not None or opt.accelerator.startswith("tpu"):
            r.add(path, ("options", i, "accelerator"), "Fleet runs Ray clusters on GPU and Trainium pools; a TPU "
                  "Ray cluster needs a CPU head pool that Fleet does not manage",
                  "use a GPU option, or remove `framework: ray` (a JobSet runs TPU multislice jobs)")
    if job.kind == "inference":
        if serve_import_path(job) is None:
            r.add(path, ("command",), "a Ray inference job is a RayService: its `command` names the Serve "
                  "application, a Python import path", "write `command: [serve, run, MODULE:APP]` (as Ray's "
                  "`serve run` takes it), e.g. `[serve, run, my_pkg.serving:app]`")
        if job.replicas != 1:
            r.add(path, ("replicas",), "a RayService scales its Serve replicas inside one Ray cluster",
                  "remove `replicas` (size the cluster with the option's count)")
    elif not job.command:
        r.add(path, ("command",), "a RayJob needs its entrypoint", "add `command: [python, -m, my.entrypoint]`")


def check_groups(r: Reporter, jobs: list[Job], paths: Mapping[str, str], classes: dict[str, str]) -> None:
    """Members of a group (one team's jobs naming it) share one priority class and one scope. `classes` is
    job id -> its resolved class name."""
    groups: dict[tuple[str, str], list[Job]] = defaultdict(list)
    for job in jobs:
        if job.group is not None:
            groups[(job.team, job.group)].append(job)
    for (_, name), members in sorted(groups.items()):
        members.sort(key=lambda j: j.id)
        first = members[0]
        for job in members[1:]:
            if classes.get(job.id) != classes.get(first.id):
                r.add(paths[job.id], ("priority",), f"group `{name}` runs at one priority: {first.id} is "
                      f"{classes.get(first.id)}, this job {classes.get(job.id)}",
                      f"set `priority: {classes.get(first.id)}` on every member")
            if job.group_scope != first.group_scope:
                r.add(paths[job.id], ("group_scope",), f"group `{name}` has one scope: {first.id} says "
                      f"{first.group_scope}, this job {job.group_scope}", "give every member the same group_scope")


def check_workload_names(r: Reporter, jobs: list[Job], paths: Mapping[str, str], teams: Mapping[str, Team],
                         clusters: tuple[Cluster, ...]) -> None:
    """No two inference services of one namespace may have a workload of one name (module docstring): job K is
    refused where `K` or `K-q` equals `J-p` for another service J of the namespace and pools p, q of one cluster.
    Only K = J + "-" + x can, so each name is split at its dashes (a few per name, not jobs x pools)."""
    pools = [{p.name for p in c.pools} for c in clusters if c.provider != "slurm"]
    served = {(teams[j.team].queue_namespace, j.name): j for j in jobs
              if j.kind == "inference" and j.framework != "ray" and j.team in teams}
    for (namespace, name), k in sorted(served.items()):
        for i in (i for i, ch in enumerate(name) if ch == "-"):
            other = served.get((namespace, name[:i]))
            clash = None if other is None else next(filter(None, (_clash(name, name[i + 1:], here)
                                                                  for here in pools)), None)
            if other is None or clash is None:
                continue
            pool, same = clash
            r.add(paths[k.id], ("name",), f"job `{k.id}` and job `{other.id}` would both have a workload `{same}` in "
                  f"namespace `{namespace}`: a service whose replicas run on several pools of a cluster has a "
                  f"Deployment or LeaderWorkerSet per pool, `<job>-<pool>`, and `{other.id}` on pool `{pool}` is "
                  f"`{same}`", "rename one of the two jobs (and its file)")
            break


def _clash(name: str, rest: str, pools: set[str]) -> tuple[str, str] | None:
    """(pool p, the shared name) where `<J>-<p>` is `name` (p = rest) or `<name>-<q>` (p = rest-q), for pools p, q
    of one cluster; None where neither."""
    if rest in pools:
        return rest, name
    for p in sorted(pools):
        if p.startswith(rest + "-") and p[len(rest) + 1:] in pools:
            return p, f"{name}-{p[len(rest) + 1:]}"
    return None


MAX_STATEFULSET_NAME = 52
"""A StatefulSet's pods carry `controller-revision-hash: <name>-<hash>` (a label value: at most 63 characters, the
hash up to 10), so Kubernetes creates no pod of a StatefulSet named longer."""


def check_lws_names(r: Reporter, path: str, job: Job, options: tuple[ResolvedOption, ...],
                    pools: Mapping[tuple[str, str | None], list[ResolvedPool]], longest_pool: int) -> None:
    """An inference service whose replicas may run on several pools of a cluster has a LeaderWorkerSet per pool
    whose replicas span hosts, named `<job>-<pool>` (render/service.py), and LWS names each group's worker
    StatefulSet `<lws>-<group>`: that name, with the job's last group index, must stay within
    MAX_STATEFULSET_NAME. `pools`: every pool by (accelerator, shape); `longest_pool`: the longest pool name."""
    last = f"-{job.replicas - 1}"
    if job.kind != "inference" or job.framework == "ray" \
            or len(job.name) + 1 + longest_pool + len(last) <= MAX_STATEFULSET_NAME:
        return
    hosts: dict[str, set[str]] = defaultdict(set)           # cluster -> pools that may hold a replica
    multi: set[tuple[str, str]] = set()                     # (cluster, pool) where a replica spans hosts
    for opt in options:
        for pool in pools.get((opt.accelerator, opt.shape), ()):
            hosts[pool.cluster].add(pool.name)
            _, slices, pods = child_jobs(opt, pool, 1)
            if slices * pods > 1:
                multi.add((pool.cluster, pool.name))
    for cluster, name in sorted(multi):
        worker = f"{job.name}-{name}{last}"
        if len(hosts[cluster]) > 1 and len(worker) > MAX_STATEFULSET_NAME:
            room = MAX_STATEFULSET_NAME - len(worker) + len(job.name)
            r.add(path, ("name",), f"on pool `{name}` of cluster `{cluster}`, one of several that may hold its "
                  f"replicas, the service is a LeaderWorkerSet `{job.name}-{name}` whose worker StatefulSets are "
                  f"named up to `{worker}` ({len(worker)} characters); Kubernetes creates no pod of a StatefulSet "
                  f"named over {MAX_STATEFULSET_NAME}", f"shorten the job name to at most {max(room, 1)} characters "
                  "(and rename the file to match), or the pool's name")
            return
