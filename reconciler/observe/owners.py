"""Whose objects are whose: a snapshot split into the objects that are teams' jobs, and impostors. Pure.

    split(snapshot, namespaces) -> Owned(snapshot, impostors)       namespaces: team -> its namespace

Fleet's labels (`fleet.dev/team`, `fleet.dev/job`) say which job an object claims to be, but anyone who may
create objects in some namespace can write any label. The namespace is what the cluster guards (a tenant has
rights in its own team namespace only), so an object counts as team T's job only in T's namespace
(`policies/teams.yaml`: `namespace`, default the team's name: `Team.queue_namespace`), the one render writes
T's objects to. That holds for JobSets, Deployments, LeaderWorkerSets and pods with Fleet's labels, and for the
Workloads of the JobSets it rejects. A Workload counts for a JobSet only when its owner reference (Kueue sets
it: the JobSet, with its uid) names that JobSet's uid, where both are known: a Workload left from an earlier
JobSet of the same name is not this one's.

An object with Fleet's labels anywhere else (another team's namespace, a namespace of no team, a team that
`policies/teams.yaml` does not have) is an impostor: kept out of the owned snapshot, so nothing plans,
decides, records a completion or counts usage from it, and reported (`fleet status`, the metric
`fleet_impostor_objects`, a note in the reconcile loop's cycle), never acted on.

Every consumer of a snapshot that meets the repository takes the owned one: the reconcile step (reconcile/
step.py, before planning and deciding; what it records and deletes comes from that snapshot), planning from
what runs (plan/live.py), `fleet status`, `fleet gc` and the completion records (observe/kube.py). Splitting an
owned snapshot again changes nothing and returns it as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .model import ClusterObservation, JobSet, Pod, ServiceWorkload, Snapshot

ImpostorKind = Literal["JobSet", "Deployment", "LeaderWorkerSet", "Pod"]
MAX_NOTES = 10           # impostors named one by one in a cycle's notes; the rest are counted


@dataclass(frozen=True, slots=True)
class Impostor:
    """An object with Fleet's labels outside the namespace of the team they name."""

    cluster: str
    kind: ImpostorKind
    namespace: str
    name: str
    job: str                   # the `team/job` its labels claim
    expected: str | None       # the namespace of that team; None: no such team in policies/teams.yaml

    def line(self) -> str:
        where = (f"only {self.expected} holds that team's jobs" if self.expected is not None
                 else f"team `{self.job.partition('/')[0]}` is not in policies/teams.yaml")
        return (f"impostor on {self.cluster}: {self.kind} {self.namespace}/{self.name} carries the labels of "
                f"{self.job} but {where}: ignored, never acted on")


@dataclass(frozen=True)
class Owned:
    snapshot: Snapshot                     # the teams' objects only
    impostors: tuple[Impostor, ...] = ()   # by cluster, kind, namespace, name


def team_namespaces(teams: Any) -> dict[str, str]:
    """team -> its namespace, from a `TeamsDoc` (None: no team at all)."""
    return {t.name: t.queue_namespace for t in teams.teams} if teams is not None else {}


def split(snap: Snapshot, namespaces: Mapping[str, str]) -> Owned:
    """The snapshot with only the objects in their team's namespace, and the impostors (module docstring)."""
    clusters: list[ClusterObservation] = []
    impostors: list[Impostor] = []
    changed = False
    for c in snap.clusters:
        owned, found = _cluster(c, namespaces)
        changed |= owned is not c
        clusters.append(owned)
        impostors += found
    impostors.sort(key=lambda i: (i.cluster, i.kind, i.namespace, i.name))
    return Owned(snap.model_copy(update={"clusters": tuple(clusters)}) if changed else snap, tuple(impostors))


def owned_snapshot(v: Any, snap: Snapshot) -> Owned:
    """`split` with the namespaces of a `Validated` repository's teams."""
    return split(snap, team_namespaces(v.loaded.teams))


def _theirs(team: str | None, job: str | None, namespace: str, namespaces: Mapping[str, str]) -> bool | None:
    """None: no Fleet job claimed (labels incomplete); else whether the object sits in that team's namespace."""
    if not team or not job:
        return None
    return namespaces.get(team) == namespace


def _cluster(c: ClusterObservation, namespaces: Mapping[str, str]) -> tuple[ClusterObservation, list[Impostor]]:
    found: list[Impostor] = []

    def keep(objs: Iterable[Any], kind: ImpostorKind | None = None) -> tuple[Any, ...]:
        out = []
        for o in objs:
            mine = _theirs(o.team, o.job, o.namespace, namespaces)
            if mine is False:
                found.append(Impostor(c.name, kind or o.kind, o.namespace, o.name, f"{o.team}/{o.job}",
                                      namespaces.get(o.team)))
            else:
                out.append(o)
        return tuple(out)

    jobsets: tuple[JobSet, ...] = keep(c.jobsets, "JobSet")
    services: tuple[ServiceWorkload, ...] = keep(c.services)
    pods: tuple[Pod, ...] = keep(c.pods, "Pod")
    last_running = tuple(js for js in c.last_running
                         if _theirs(js.team, js.job, js.namespace, namespaces) is not False)
    rejected = {(i.namespace, i.name) for i in found if i.kind == "JobSet"}
    uids = {(js.namespace, js.name): js.uid for js in jobsets}
    workloads = tuple(w for w in c.workloads
                      if not (w.jobset and ((w.namespace, w.jobset) in rejected
                                            or _other_uid(uids.get((w.namespace, w.jobset)), w.jobset_uid))))
    if (len(jobsets), len(services), len(pods), len(workloads), len(last_running)) == \
            (len(c.jobsets), len(c.services), len(c.pods), len(c.workloads), len(c.last_running)):
        return c, found
    return c.model_copy(update={"jobsets": jobsets, "services": services, "pods": pods, "workloads": workloads,
                                "last_running": last_running}), found


def _other_uid(jobset_uid: str | None, owner_uid: str | None) -> bool:
    """The Workload's owner reference names another JobSet than the one of that name (both uids known)."""
    return jobset_uid is not None and owner_uid is not None and jobset_uid != owner_uid


def notes(impostors: tuple[Impostor, ...]) -> tuple[str, ...]:
    """The reconcile cycle's notes on impostors: the first `MAX_NOTES` one by one, then a count."""
    out = [i.line() for i in impostors[:MAX_NOTES]]
    if len(impostors) > MAX_NOTES:
        out.append(f"{len(impostors) - MAX_NOTES} more impostor object(s) ignored (`fleet status` lists them)")
    return tuple(out)
