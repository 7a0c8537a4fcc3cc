"""Slurm jobs and nodes in the snapshot `fleet observe` writes, beside the Kubernetes clusters.

`parse` is pure: slurmrestd's v0.0.38 `/jobs/` and `/nodes/` answers -> one `ClusterObservation` in the very
objects a Kubernetes cluster is read into, so status, planning from what runs and the reconcile loop's
decisions (reconcile/step.py) are the same code for both:
- a node of a partition a pool names is a `Node` of that pool; its unit is its index among the pool's nodes
  sorted by name (like a TPU slice, a unit of its own: a job on a failed node is known and moves). `down`
  (or not responding) is not ready; `drain` (drained or draining) is cordoned; each with a condition
  (`Down` / `Drained`) whose time is the reason's (`reason_changed_at`). A node in no Fleet partition has no pool.
- a job whose comment Fleet wrote (`fleet.dev/job=<team>/<job>`: slurm/submit.py) is a `JobSet` (named after
  the job, in its team's namespace when its account is the team's, so owners.py tells impostors apart; uid the
  Slurm job id) with a `Workload` for its state: PENDING (also after a requeue) queued, RUNNING/COMPLETING
  running, SUSPENDED admitted, COMPLETED succeeded, FAILED/TIMEOUT/NODE_FAIL/OUT_OF_MEMORY/BOOT_FAIL/DEADLINE
  failed; `restart_cnt` is its requeue count and its `Preempted` evictions (a preempted job comes back
  requeued). A CANCELLED job is gone, as a deleted JobSet is. Each node it runs on is a `Pod` (what it
  occupies: observe/occupancy.py). Of several Slurm jobs of one Fleet job, the newest active one counts
  (else the newest). Jobs without Fleet's comment are not read into the snapshot: Fleet never touches them,
  and the capacity they take shows as the nodes' state, not as a job.
`observe_cluster` is the effect, EFFECT (network: slurmrestd; the token from the environment): the two GETs
(slurm/client.py), failures as facts (`unreachable`, or `degraded` when only one list failed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..load import Loaded
from ..models import Cluster
from ..observe.model import (
    ClusterObservation,
    Completion,
    Condition,
    Eviction,
    JobSet,
    Node,
    ObserveProblem,
    Pod,
    Snapshot,
    Workload,
)
from ..observe.owners import team_namespaces
from .client import Answer, SlurmClient
from .submit import parse_comment

RUNNING = {"RUNNING", "COMPLETING", "CONFIGURING", "SIGNALING", "STAGE_OUT", "RESIZING"}
FAILED = {"FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
GONE = {"CANCELLED", "REVOKED", "SPECIAL_EXIT", "PREEMPTED"}     # preempted and not requeued: ran again, not failed


def expand_hostlist(text: str) -> list[str]:
    """`gpu[01-03,07],cpu1` -> gpu01, gpu02, gpu03, gpu07, cpu1 (Slurm's hostlist syntax, one bracket group)."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?([^,]*)", text or ""):
        head, ranges, tail = m.group(1), m.group(2), m.group(3)
        if ranges is None:
            out.append(head + tail)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{head}{str(i).zfill(len(lo))}{tail}")
    return [n for n in out if n]


def _time(epoch: Any) -> datetime | None:
    return datetime.fromtimestamp(epoch, UTC) if isinstance(epoch, int) and epoch > 0 else None


def parse_nodes(cluster: Cluster, raw: list[Any]) -> tuple[Node, ...]:
    pool_of: dict[str, str] = {}
    for p in cluster.pools:          # a node in two Fleet partitions belongs to the first pool naming one
        if p.partition is not None:
            pool_of.setdefault(p.partition, p.name)
    found: list[tuple[str, str | None, dict[str, Any]]] = []
    for n in raw:
        if isinstance(n, dict) and isinstance(n.get("name"), str):
            pools = [pool_of[x] for x in n.get("partitions") or [] if x in pool_of]
            found.append((n["name"], pools[0] if pools else None, n))
    index: dict[str, int] = {}
    nodes = []
    for name, pool, n in sorted(found, key=lambda f: f[0]):
        unit = None
        if pool is not None:
            unit = index[pool] = index.get(pool, -1) + 1
        state = str(n.get("state") or "").lower()
        flags = {str(f).upper() for f in n.get("state_flags") or []}
        down = state in ("down", "unknown", "future") or "NOT_RESPONDING" in flags
        drained = state in ("drained", "draining") or "DRAIN" in flags
        reason, since = str(n.get("reason") or ""), _time(n.get("reason_changed_at"))
        problems = [Condition(type=kind, status="True", reason=state or "unknown", message=reason, since=since)
                    for kind, bad in (("Down", down), ("Drained", drained)) if bad]
        nodes.append(Node(name=name, pool=pool, unit=unit, ready=not down, unschedulable=drained,
                          problems=tuple(problems)))
    return tuple(nodes)


def parse_jobs(cluster: Cluster, raw: list[Any], namespaces: Mapping[str, str],
               nodes: tuple[Node, ...]) -> tuple[tuple[Workload, ...], tuple[JobSet, ...], tuple[Pod, ...],
                                                 tuple[Completion, ...]]:
    assert cluster.slurm is not None
    unit_of = {n.name: n.unit for n in nodes}
    chosen: dict[tuple[str, bool], dict[str, Any]] = {}
    for j in raw:
        if not isinstance(j, dict) or not isinstance(j.get("job_id"), int):
            continue
        words = parse_comment(str(j.get("comment") or ""))
        state = str(j.get("job_state") or "").upper()
        if not words or state in GONE:
            continue
        j = {**j, "_words": words, "_state": state}
        team = words["fleet.dev/job"].partition("/")[0]
        key = (words["fleet.dev/job"], str(j.get("account") or "") != cluster.slurm.account_prefix + team)
        old = chosen.get(key)
        rank = (state not in FAILED and state != "COMPLETED", j["job_id"])
        if old is None or rank > (old["_state"] not in FAILED and old["_state"] != "COMPLETED", old["job_id"]):
            chosen[key] = j
    workloads, jobsets, pods, records = [], [], [], []
    for (job_id, _), j in sorted(chosen.items()):
        team, _, name = job_id.partition("/")
        words, state = j["_words"], j["_state"]
        account = str(j.get("account") or "")
        ns = namespaces.get(team, team) if account == cluster.slurm.account_prefix + team else f"account-{account}"
        uid, submitted = str(j["job_id"]), _time(j.get("submit_time"))
        started, ended = _time(j.get("start_time")), _time(j.get("end_time"))
        on = expand_hostlist(str(j.get("nodes") or "")) if state in RUNNING else []
        units = tuple(sorted(u for n in on if (u := unit_of.get(n)) is not None))
        terminal = "Completed" if state == "COMPLETED" else "Failed" if state in FAILED else None
        jobsets.append(JobSet(namespace=ns, name=name, uid=uid, created_at=submitted, team=team, job=name,
                              pool=words.get("fleet.dev/pool"), spec_digest=words.get("fleet.dev/spec-digest"),
                              units=units or None, terminal_state=terminal))
        conds = _conditions(state, started, ended, str(j.get("state_reason") or ""))
        restarts = j.get("restart_cnt") if isinstance(j.get("restart_cnt"), int) else 0
        workloads.append(Workload(namespace=ns, name=f"slurm-{uid}", created_at=submitted, jobset=name,
                                  jobset_uid=uid, priority=j.get("priority") if isinstance(j.get("priority"), int)
                                  else None, requeue_count=restarts,
                                  evictions=(Eviction(reason="Preempted", underlying_cause="SlurmRequeue",
                                                      count=restarts),) if restarts else (),
                                  conditions=conds))
        pods += [Pod(namespace=ns, name=f"{name}-{uid}-{n}", team=team, job=name, pool=words.get("fleet.dev/pool"),
                     node=n, phase="Running", ready=True) for n in on]
        if terminal is not None and words.get("fleet.dev/spec-digest") and not ns.startswith("account-"):
            records.append(Completion(job=job_id, digest=words["fleet.dev/spec-digest"],
                                      result="succeeded" if terminal == "Completed" else "failed", finished_at=ended))
    return tuple(workloads), tuple(jobsets), tuple(pods), tuple(records)


def _conditions(state: str, started: datetime | None, ended: datetime | None, reason: str) -> tuple[Condition, ...]:
    if state == "COMPLETED" or state in FAILED:
        return (Condition(type="Finished", status="True", reason="Succeeded" if state == "COMPLETED" else "Failed",
                          message=f"Slurm job state {state}", since=ended),)
    if state in RUNNING:
        return tuple(Condition(type=t, status="True", reason="Slurm", message=f"Slurm job state {state}",
                               since=started) for t in ("Admitted", "PodsReady", "QuotaReserved"))
    if state == "SUSPENDED":
        return tuple(Condition(type=t, status="True", reason="Slurm", message="Slurm job state SUSPENDED")
                     for t in ("Admitted", "QuotaReserved"))
    return (Condition(type="QuotaReserved", status="False", reason=reason or "Pending",
                      message=f"Slurm job state {state} ({reason or 'no reason given'})"),)


def parse(cluster: Cluster, nodes_body: Any, jobs_body: Any, namespaces: Mapping[str, str],
          problems: tuple[ObserveProblem, ...] = ()) -> ClusterObservation:
    assert cluster.slurm is not None
    nodes = parse_nodes(cluster, _list(nodes_body, "nodes"))
    if isinstance(nodes_body, dict) and isinstance(nodes_body.get("nodes"), list):
        have = {n.pool for n in nodes}
        problems = (*problems, *(ObserveProblem(
            resource="nodes", kind="invalid-object", message=f"cluster {cluster.name}: pool `{p.name}`'s partition "
            f"`{p.partition}` has no node in slurmctld's answer (no such partition?)",
            hint="check `partition:` against `sinfo -s`; jobs placed there are refused by slurmctld")
            for p in cluster.pools if p.name not in have))
    workloads, jobsets, pods, records = parse_jobs(cluster, _list(jobs_body, "jobs"), namespaces, nodes)
    return ClusterObservation(name=cluster.name, server=cluster.slurm.rest_url, status="degraded" if problems
                              else "ok", problems=problems, workloads=workloads, jobsets=jobsets, nodes=nodes,
                              pods=pods, completions=records, services_read=True)


def _list(body: Any, key: str) -> list[Any]:
    got = body.get(key) if isinstance(body, dict) else None
    return got if isinstance(got, list) else []


def _problem(resource: str, a: Answer) -> ObserveProblem:
    return ObserveProblem.model_validate({"resource": resource, "kind": a.kind, "message": a.message, "hint": a.hint})


def observe_cluster(cluster: Cluster, env: Mapping[str, str], namespaces: Mapping[str, str],
                    timeout_s: float) -> ClusterObservation:
    """EFFECT: one Slurm cluster's nodes and jobs; a controller that does not answer is `unreachable`."""
    assert cluster.slurm is not None
    client = SlurmClient(cluster, env, timeout_s)
    nodes = client.request("GET", "/nodes/")
    if not nodes.ok and (nodes.kind in ("refused", "timeout", "unauthorized", "forbidden", "malformed")
                         or nodes.status >= 500):     # slurmrestd up, slurmctld silent (or refusing the token)
        return ClusterObservation(name=cluster.name, server=cluster.slurm.rest_url, status="unreachable",
                                  problems=(_problem("nodes", nodes),))
    jobs = client.request("GET", "/jobs/")
    problems = tuple(_problem(r, a) for r, a in (("nodes", nodes), ("jobsets", jobs)) if not a.ok)
    return parse(cluster, nodes.body, jobs.body, namespaces, problems)


def with_slurm(snap: Snapshot, loaded: Loaded, timeout_s: float, env: Mapping[str, str] | None = None) -> Snapshot:
    """`snap` (the Kubernetes clusters) with every Slurm cluster of `loaded` read into it (the token from `env`,
    default the process's environment), all sorted by name."""
    namespaces = team_namespaces(loaded.teams)
    mine = [observe_cluster(c, os.environ if env is None else env, namespaces, timeout_s)
            for c in loaded.clusters if c.provider == "slurm"]
    if not mine:
        return snap
    return snap.model_copy(update={"clusters": tuple(sorted((*snap.clusters, *mine), key=lambda c: c.name))})
