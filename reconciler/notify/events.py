"""Which job events happened: from the previous and the current snapshot and the plan. Pure.

Each event carries an identity `key` built from what identifies that occurrence in the cluster, never from
the cycle that saw it: `started:rl/x@gke-use5:<the run's start>`, `preempted:rl/x@gke-use5:<eviction count>`,
`moved:rl/x->gke-usc1/h100:<units>`, `waiting:rl/x:<since>`. So "at most once per event" is a set of keys:
an event is new when its key is neither among the previous snapshot's events nor among the keys already sent
(`State.sent`, which the sender keeps across restarts). What the state remembers is bounded: a key is kept
while its event is still visible (or its cluster could not be read this cycle: nothing is known there), and
forgotten after.

The events:
- started: a copy of the job runs (Workload admitted with pods ready; a service with a ready replica);
- finished / failed: the Workload (or the JobSet's terminal state) says so;
- preempted: the Workload's `Preempted` evictions counted up (a new eviction is a new event);
- moved: the plan moves the job (placement status `moved`) to a pool: one event per destination;
- waiting: the job has waited (queued on a cluster since its Workload was created, or pending in the plan
  since the first cycle that saw it so) longer than its priority class's queue-wait objective (slos.yaml).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ..observe.model import ClusterObservation, Snapshot
from ..plan.types import Plan
from ..suggest import unit_list
from ..validate import Validated
from .model import EventKind, NotificationsDoc


@dataclass(frozen=True, order=True)
class JobEvent:
    key: str
    kind: EventKind
    job: str
    cluster: str | None
    text: str

    @property
    def team(self) -> str:
        return self.job.split("/", 1)[0]


@dataclass(frozen=True)
class State:
    """What the sender remembers: the keys sent, those to send again (`ROUTE|KEY`: the route whose webhook could
    not be reached; the routes that took it are not sent it twice), and since when each plan-pending job has
    waited."""

    sent: frozenset[str] = frozenset()
    pending_since: Mapping[str, datetime] = field(default_factory=dict)
    unsent: frozenset[str] = frozenset()


def happened(v: Validated, previous: Snapshot | None, current: Snapshot, plan: Plan, state: State,
             now: datetime) -> tuple[list[JobEvent], State]:
    """The events to send (new since `previous`, never sent), sorted; and the state to keep, in which they
    count as sent (the sender sends each once: module docstring)."""
    pending_since = {j: state.pending_since.get(j, now) for j in sorted(p.job for p in plan.pending)}
    seen = visible(v, current, plan, pending_since, now)
    # what the previous snapshot showed of the clusters was decided last cycle; the plan's events (moves) and
    # the waits are computed from this cycle's plan and clock, so only `state.sent` says whether they went out
    before = {e.key for obs in previous.clusters if obs.status != "unreachable"
              for e in _cluster_events(obs)} if previous is not None else set()
    owed = {unsent_key(u) for u in state.unsent}
    new = sorted(e for e in seen if (e.key not in before and e.key not in state.sent) or e.key in owed)
    unread = {c.name for c in current.clusters if c.status != "ok"}
    kept = {k for k in state.sent if k in {e.key for e in seen} or _cluster_of(k) in unread}
    keys = {e.key for e in seen}
    return new, State(frozenset(kept | {e.key for e in new}), pending_since,
                      frozenset(u for u in state.unsent if unsent_key(u) in keys))


def unsent_key(entry: str) -> str:
    """The event key of a `State.unsent` entry `ROUTE|KEY` (a bare key, from an older memory: every route)."""
    return entry.split("|", 1)[1] if "|" in entry else entry


def unsent_route(entry: str) -> str | None:
    """The route that still owes the event of a `State.unsent` entry (None: every route)."""
    return entry.split("|", 1)[0] if "|" in entry else None


def routed(doc: NotificationsDoc | None, events: list[JobEvent]) -> list[tuple[str, str, JobEvent]]:
    """(route name, webhook_env, event) for each route that carries each event, in order."""
    if doc is None:
        return []
    return [(r.name, r.webhook_env, e) for e in events for r in doc.routes
            if (not r.teams or e.team in r.teams) and e.kind in r.events]


def slack_message(event: JobEvent) -> dict[str, str]:
    """The Slack-compatible body: `text` is what every such webhook shows (Slack, Mattermost, Rocket.Chat)."""
    return {"text": f"[fleet] {event.text}"}


def visible(v: Validated, snap: Snapshot | None, plan: Plan, pending_since: Mapping[str, datetime],
            now: datetime) -> list[JobEvent]:
    """Every event the snapshot and the plan show now (sent or not)."""
    out: list[JobEvent] = []
    if snap is not None:
        for obs in snap.clusters:
            if obs.status != "unreachable":
                out += _cluster_events(obs)
    for p in plan.placements:
        if p.status == "moved":
            where = f"{p.cluster}/{p.pool}"
            out.append(JobEvent(f"moved:{p.job}->{where}:{unit_list(p.units)}", "moved", p.job, p.cluster,
                                f"{p.job} moves to {where}" + (f": {p.reason}" if p.reason else "")))
    out += _waiting(v, snap, pending_since, now)
    return out


def _cluster_events(obs: ClusterObservation) -> list[JobEvent]:
    out: list[JobEvent] = []
    owned = {(w.namespace, w.jobset): w for w in obs.workloads if w.jobset}
    at = f"@{obs.name}"
    for js in obs.jobsets:
        job = js.job_id
        if job is None:
            continue
        w = owned.get((js.namespace, js.name))
        phase = w.phase() if w is not None else {"Completed": "succeeded", "Failed": "failed"}.get(
            js.terminal_state or "", "queued" if js.suspended else "running")
        run = _stamp(js.created_at)
        if phase == "running":
            admitted = w.condition("Admitted") if w is not None else None
            run = _stamp(admitted.since if admitted is not None and admitted.since else js.created_at)
            out.append(JobEvent(f"started:{job}{at}:{run}", "started", job, obs.name, f"{job} started on {obs.name}"))
        elif phase in ("succeeded", "failed"):
            kind: EventKind = "finished" if phase == "succeeded" else "failed"
            word = "finished" if phase == "succeeded" else "failed"
            out.append(JobEvent(f"{kind}:{job}{at}:{run}", kind, job, obs.name, f"{job} {word} on {obs.name}"))
        preempted = sum(e.count for e in w.evictions if e.reason == "Preempted") if w is not None else 0
        if preempted:
            out.append(JobEvent(f"preempted:{job}{at}:{run}:{preempted}", "preempted", job, obs.name,
                                f"{job} was preempted on {obs.name} ({preempted} time(s) in this run)"))
    for sw in obs.services:
        if sw.job_id is not None and sw.ready_replicas:
            out.append(JobEvent(f"started:{sw.job_id}{at}:{_stamp(sw.created_at)}", "started", sw.job_id, obs.name,
                                f"{sw.job_id} serves on {obs.name} ({sw.ready_replicas}/{sw.replicas} ready)"))
    return out


def _waiting(v: Validated, snap: Snapshot | None, pending_since: Mapping[str, datetime],
             now: datetime) -> list[JobEvent]:
    """Jobs waiting longer than their class's queue-wait objective (the strictest, if several)."""
    limits: dict[str, float] = {}
    for o in v.loaded.slos.objectives if v.loaded.slos else ():
        if o.queue_wait is not None:
            limits[o.priority_class] = min(limits.get(o.priority_class, o.queue_wait.under_minutes),
                                           o.queue_wait.under_minutes)
    default = v.loaded.priorities.default if v.loaded.priorities else None
    since: dict[str, datetime] = dict(pending_since)
    for obs in snap.clusters if snap is not None else ():
        for w in obs.workloads:
            if w.phase() in ("queued", "evicted") and w.created_at is not None and w.jobset:
                job = f"{w.namespace}/{w.jobset}"
                job = next((js.job_id for js in obs.jobsets if js.name == w.jobset and js.namespace == w.namespace
                            and js.job_id), job)
                since[job] = min(since.get(job, w.created_at), w.created_at)
    out = []
    for job, t in sorted(since.items()):
        spec = v.job_by_id.get(job)
        limit = limits.get((spec.priority or default or "") if spec else "")
        waited = (now - t).total_seconds() / 60
        if limit is not None and waited > limit:
            out.append(JobEvent(f"waiting:{job}:{_stamp(t)}", "waiting", job, None,
                                f"{job} has waited {waited:.0f} min, over its class's {limit:g} min objective"))
    return out


def _stamp(t: datetime | None) -> str:
    return t.isoformat() if t is not None else "-"


def _cluster_of(key: str) -> str | None:
    """The cluster of a key `kind:team/job@cluster:...`, if it names one."""
    at = key.split(":", 2)[1] if key.count(":") >= 2 else ""
    return at.split("@", 1)[1] if "@" in at else None
