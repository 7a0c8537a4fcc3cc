"""`fleet apply`'s live part: what runs, the reviewed-plan check, and the jobs sent to each cluster.

EFFECT (network: each cluster's API; file system: the snapshot and plan files). The decisions are pure
(`safety`); this module reads the inputs they need and carries out what they decide:
1. `what_runs`: the snapshot (`--observed FILE`, else observed now through each cluster's context) and the
   last applied plan (`record`); a cluster nobody can reach is judged from that record.
2. `read_reviewed`: the reviewed plan, refused (`RejectedError`, naming both commits) when it was made for
   another head commit or pull request than the one applied; `check_reviewed`: the plan's disruptions of
   running work against the reviewed plan's (`safety`); raises `RejectedError` naming each job beyond what
   was reviewed.
3. `apply_jobs`: per cluster, the plan's deletions of JobSets (each with its reason; the old copy of a move
   in the foreground), then every rendered object by server-side apply (`jobs`), then the deletions of
   inference objects (a service's new copy first, then the old); a cluster that is unreachable, or whose
   context cannot be used, gets one failed result and nothing is sent to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from ..models import spec_digest
from ..observe.files import read_snapshot
from ..observe.kube import ContextError
from ..observe.model import Snapshot
from ..observe.owners import owned_snapshot
from ..plan.types import Plan
from ..problems import RejectedError
from ..render.facts import TEAM_LABEL
from ..render.pods import JOB_LABEL
from ..slurm.act import apply_slurm
from ..validate import Validated
from .jobs import ActionResult, ClusterClient, apply_object, context_failed, delete_object
from .orchestrate import select
from .record import read_last_applied, read_plan_and_review
from .safety import (
    GANGS,
    Deletion,
    Disruption,
    beyond_review,
    checkpoint_holds,
    decide,
    disruptions,
    moves_within,
    placed_pools,
    plan_decisions,
    running_jobsets,
    running_services,
    said_now,
)
from .specs import StackSpec


def what_runs(repo: Path, files: dict[str, bytes], observed: Path | None, kubeconfig: str | None,
              now: datetime, *, observe: bool = True) -> tuple[Snapshot | None, Plan | None]:
    """The snapshot (read from `observed`, or observed now unless `observe` is false) and the last applied
    plan (None if none)."""
    snap: Snapshot | None = None
    if observed is not None:
        snap = read_snapshot(observed)
    elif observe:
        from ..observe.fleetwide import observe_repo  # the Kubernetes client: only to observe now
        snap = observe_repo(files, kubeconfig, now)
    return snap, read_last_applied(repo)


REVIEWED_HINT = "pass the plan.json that `fleet plan --format json --out DIR` wrote"


def read_reviewed(path: Path, applied: str | None, pr: int | None, *, applied_given: bool) -> Plan:
    """The reviewed plan of `path`, if it was made for the commit this apply applies (`applied`: the
    `--head-commit` given, else the repository's HEAD; None outside git) and, with `pr`, for that pull
    request; else RejectedError naming both commits. A plan that names no commit is refused wherever the
    applied commit is known: nothing says which change it reviewed."""
    plan, review = read_plan_and_review(path, "the reviewed plan", REVIEWED_HINT)
    where = "--head-commit" if applied_given else "the repository's HEAD"
    if review.head != applied:
        made = f"commit {review.head}" if review.head else "no commit (it has no `review.head`)"
        this = f"commit {applied} ({where})" if applied else "a commit it cannot tell (not a git repository)"
        raise RejectedError(
            f"{path}: field `review.head`: refusing to apply: the reviewed plan was made for {made}, but this "
            f"apply applies {this}",
            "apply the plan the pull request that is being applied showed: the `fleet-plan` artifact of a "
            "successful plan run on its head commit (`fleet plan --base BASE --head-commit SHA --pr N --out DIR`),"
            " with `--head-commit` set to that pull request's head")
    if pr is not None and review.pr != pr:
        made = f"pull request #{review.pr}" if review.pr is not None else "no pull request (it has no `review.pr`)"
        raise RejectedError(
            f"{path}: field `review.pr`: refusing to apply: the reviewed plan was made for {made} (head commit "
            f"{review.head}), but this apply applies pull request #{pr} (head commit {applied})",
            "apply the plan of the pull request that was merged: the `fleet-plan` artifact of its own plan run")
    return plan


def check_reviewed(head: Validated, plan: Plan, snap: Snapshot | None, last: Plan | None,
                   reviewed: Plan | None, echo: Callable[[str], None]) -> list[Disruption]:
    """The plan's disruptions of running work, all of them within the reviewed plan's (`read_reviewed`),
    each echoed; else RejectedError naming each job beyond it (without a reviewed plan, every disruption is
    beyond it)."""
    in_git = {j.id for j in head.loaded.jobs}
    names = [c.name for c in head.loaded.clusters]
    snap = _owned(head, snap)
    live, serving = running_jobsets(snap, last, names), running_services(snap, names)
    pools, digests = {p.key: p for p in head.pools}, _digests(head)
    mine = disruptions(plan, in_git, live, serving, pools=pools, digests=digests)
    allowed = disruptions(reviewed, in_git, live, serving, pools=pools, digests=digests) \
        if reviewed is not None else []
    beyond = beyond_review(mine, allowed)
    if beyond:
        lines = "; ".join(d.line() for d in beyond)
        what = "the reviewed plan" if reviewed is not None else "a reviewed plan (none was given)"
        raise RejectedError(
            f"refusing to apply: {len(beyond)} running job(s) would stop, move or be preempted beyond {what}: "
            f"{lines}",
            "the live fleet or git changed since the plan was reviewed: plan again (`fleet plan --observed FILE "
            "--format json --out DIR`), review it, and apply with `--reviewed DIR/plan.json`" if reviewed is not None
            else "review the plan first (`fleet plan --observed FILE --format json --out DIR`) and apply it with "
                 "`--reviewed DIR/plan.json`; apply never stops running work that nobody reviewed")
    for d in mine:
        echo(f"reviewed: {d.line()}")
    return mine


def deletions_by_cluster(head: Validated, plan: Plan, snap: Snapshot | None,
                         last: Plan | None) -> dict[str, list[Deletion]]:
    """The deletions the plan decides, per cluster (`safety.decide` over what runs)."""
    in_git = {j.id for j in head.loaded.jobs}
    placed, preempted = plan_decisions(plan)
    names = [c.name for c in head.loaded.clusters]
    snap = _owned(head, snap)
    live = running_jobsets(snap, last, names)
    deletions, _ = decide(placed, preempted, in_git, live, running_services(snap, names), placed_pools(plan),
                          moves_within(plan, live, {p.key: p for p in head.pools}, _digests(head)))
    out: dict[str, list[Deletion]] = {}
    for d in deletions:
        out.setdefault(d.cluster, []).append(d)
    return out


def apply_jobs(head: Validated, job_specs: Sequence[StackSpec], snap: Snapshot | None,
               deletions: dict[str, list[Deletion]], kubeconfig: str | None, *, preview: bool,
               echo: Callable[[str], None]) -> list[ActionResult]:
    """Every cluster's deletions, then its rendered objects, by server-side apply; one result per object."""
    from ..observe.kube import targets

    by_name = {t.name: t for t in targets(head.loaded.clusters, head.loaded.locate)}
    snap = _owned(head, snap)
    results: list[ActionResult] = []
    for spec in sorted(job_specs, key=lambda s: s.cluster):
        target = by_name[spec.cluster]
        seen = snap.cluster(spec.cluster) if snap is not None else None
        if seen is None or seen.status == "unreachable":
            why = seen.problems[0] if seen is not None and seen.problems else None
            result = ActionResult(spec.cluster, "JobSet", "*", "*", "failed", preview=preview,
                                  error="not applied: the cluster is unreachable"
                                  + (f" ({why.message})" if why else ""),
                                  hint=why.hint if why else "observe it (`fleet observe`) and rerun")
            results.append(result)
            echo(result.line())
            continue
        try:
            client = ClusterClient.open(target, kubeconfig)
        except ContextError as e:
            results.append(context_failed(target, e))
            echo(results[-1].line())
            continue
        observed = {(j.namespace, j.name): j for j in seen.jobsets}
        mine = deletions.get(spec.cluster, [])
        with client:
            for d in [d for d in mine if d.kind in GANGS]:
                there = snap.cluster(d.to) if snap is not None and d.to else None
                if d.moved and d.to and d.to != spec.cluster and (there is None or there.status == "unreachable"):
                    results.append(ActionResult(spec.cluster, d.kind, d.namespace, d.name, "wait", preview=preview,
                                                reason=f"{d.reason}, but {d.to} cannot be reached: the old copy "
                                                       "keeps running until the new one can be created"))
                    echo(results[-1].line())
                    continue
                was = observed.get((d.namespace, d.name))      # the gang observed: its uid, the precondition
                results.append(delete_object(client, d.kind, d.namespace, d.name, d.reason, preview=preview,
                                             propagation="Foreground" if d.moved else "Background",
                                             uid=was.uid if was is not None else None, api_version=d.api_version))
                echo(results[-1].line())
            applied: set[tuple[str, str, str]] = set()
            gone = {(r.kind, r.namespace, r.name) for r in results
                    if r.action == "delete" and r.cluster == spec.cluster}     # a preview's would-delete
            for obj in spec.spec["objects"]:
                meta = obj["metadata"]
                js = observed.get((meta["namespace"], meta["name"])) if obj["kind"] in GANGS else None
                results.append(apply_object(client, obj, js, preview=preview,
                                            deleted=(obj["kind"], meta["namespace"], meta["name"]) in gone))
                applied.add((obj["kind"], meta["namespace"], meta["name"]))
                echo(results[-1].line())
            for d in [d for d in mine if d.kind not in GANGS]:      # a service's new copy first, then the old
                if (d.kind, d.namespace, d.name) in applied:      # the new copy has its name: moved in place
                    results.append(ActionResult(spec.cluster, d.kind, d.namespace, d.name, "keep", preview=preview,
                                                reason=f"{d.reason}: its new copy has this name and was applied "
                                                       "over it, so it is not deleted"))
                    echo(results[-1].line())
                    continue
                results.append(delete_object(client, d.kind, d.namespace, d.name, d.reason, preview=preview,
                                             api_version=d.api_version, uid=d.uid))
                echo(results[-1].line())
    return results


def _digests(head: Validated) -> dict[str, str]:
    """job -> the spec digest of its file as it is (`models.spec_digest`, which render stamps on its JobSet)."""
    return {j.id: spec_digest(j) for j in head.loaded.jobs}


def _owned(head: Validated, snap: Snapshot | None) -> Snapshot | None:
    """The teams' own objects of the snapshot (observe/owners.py): an impostor is never stopped, moved or kept."""
    return owned_snapshot(head, snap).snapshot if snap is not None else None


def split(all_specs: Sequence[StackSpec], stack: str | None, *,
          with_jobs: bool) -> tuple[list[StackSpec], list[StackSpec]]:
    """(Pulumi stacks, jobs specs) that `--stack` selects: all of both, one stack, or one cluster's jobs."""
    jobs = [s for s in all_specs if s.layer == "jobs" and with_jobs]
    if stack is not None and any(s.name == stack for s in jobs):
        return [], [s for s in jobs if s.name == stack]
    return select(all_specs, stack), jobs if stack is None else []


def after_stacks(head: Validated, plan: Plan, job_specs: Sequence[StackSpec], snap: Snapshot | None,
                 last: Plan | None, kubeconfig: str | None, *, stacks_failed: bool, preview: bool,
                 echo: Callable[[str], None]) -> list[ActionResult]:
    """The jobs, once the stacks are applied (none after a failed stack: they need its pools and queues)."""
    if not job_specs:
        return []
    if stacks_failed and not preview:
        echo("jobs: not applied: a stack failed (JobSets need their node pools and queues)")
        return []
    holds = checkpoint_holds(head, plan, _owned(head, snap))
    deletions = said_now(head, plan, _owned(head, snap), holds, deletions_by_cluster(head, plan, snap, last))
    deletions, job_specs, results = held_back(holds, deletions, job_specs, preview)
    plan, waits = without_held(head, plan, holds, preview)
    for r in (results := results + waits):
        echo(r.line())
    results += apply_jobs(head, job_specs, snap, deletions, kubeconfig, preview=preview, echo=echo)
    results += apply_slurm(head, plan, snap, deletions, preview=preview, echo=echo)   # Slurm clusters (4e)
    echo(summary(results, preview))
    return results


def without_held(head: Validated, plan: Plan, holds: Mapping[str, str],
                 preview: bool) -> tuple[Plan, list[ActionResult]]:
    """The plan whose placements apply submits to Slurm clusters (slurm/act.py), less the preemptors held to their
    victims' checkpoints (`safety.checkpoint_holds`), and one `wait` result for each left out."""
    slurm = {c.name for c in head.loaded.clusters if c.provider == "slurm"}
    held = [p for p in plan.placements if p.job in holds and p.cluster in slurm]
    if not held:
        return plan, []
    waits = [ActionResult(p.cluster, "SlurmJob", p.job.partition("/")[0], p.job.partition("/")[2], "wait",
                          preview=preview, reason=f"{holds[p.job]}; the reconcile loop submits it then") for p in held]
    return replace(plan, placements=tuple(p for p in plan.placements if p not in held)), waits


def held_back(holds: Mapping[str, str], deletions: dict[str, list[Deletion]], job_specs: Sequence[StackSpec],
              preview: bool) -> tuple[dict[str, list[Deletion]], list[StackSpec], list[ActionResult]]:
    """The deletions and objects left to send once the preemptions held to a victim's checkpoint are left to the
    reconcile loop (`safety.checkpoint_holds`): neither the victim nor its preemptor is deleted (a running preemptor
    the plan moves keeps its old copy until its new one can start, as in the loop), the preemptor's objects are not
    applied, and one `wait` result says why for each."""
    if not holds:
        return deletions, list(job_specs), []
    waits: list[ActionResult] = []
    kept: dict[str, list[Deletion]] = {}
    for cluster, mine in deletions.items():
        for d in mine:
            if d.job in holds:
                waits.append(ActionResult(cluster, d.kind, d.namespace, d.name, "wait", preview=preview,
                                          reason=f"{holds[d.job]}; the reconcile loop "
                                                 f"{'stops' if d.reason.startswith('preempted') else 'moves'} it then"))
            else:
                kept.setdefault(cluster, []).append(d)
    specs: list[StackSpec] = []
    for spec in job_specs:
        objects = []
        for obj in spec.spec["objects"]:
            meta = obj["metadata"]
            labels = meta.get("labels") or {}
            job = f"{labels.get(TEAM_LABEL)}/{labels.get(JOB_LABEL)}"
            if job in holds:
                waits.append(ActionResult(spec.cluster, obj["kind"], meta["namespace"], meta["name"], "wait",
                                          preview=preview, reason=f"{holds[job]}; the reconcile loop creates it then"))
            else:
                objects.append(obj)
        specs.append(replace(spec, spec={**spec.spec, "objects": objects}))
    return kept, specs, waits


def summary(results: Sequence[ActionResult], preview: bool) -> str:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.action] = counts.get(r.action, 0) + 1
    order = ("create", "update", "delete", "unchanged", "keep", "absent", "wait", "failed")
    verb = "would " if preview else ""
    parts = [f"{counts.get(a, 0)} {verb + a if a in ('create', 'update', 'delete') else a}" for a in order
             if counts.get(a) or a in ("create", "update", "delete", "unchanged")]
    return "jobs: " + ", ".join(parts)
