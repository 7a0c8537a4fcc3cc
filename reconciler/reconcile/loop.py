"""`fleet reconcile`: the live loop. Each cycle, in order:

    1. observe     every cluster (observe/kube.py): Workloads, JobSets, Nodes; failures are facts; a cluster
                   that has not answered everything within the cycle's deadline (`observe_deadline_s`, half an
                   interval) is `slow`: skipped this cycle as an unreachable one is, the others go on
    2. load        the fleet repository at the configured branch head (or the work tree), validated
    3. plan        pipeline.plan from git and the snapshot; clusters lost for `cluster_lost_after_minutes`
                   are marked down first, so their jobs fail over; the previous cycle's plan is the base
    4. decide      reconcile.decide: the plan against what runs -> actions, and the memory for next cycle
                   (3 and 4 are `reconcile.step.step`, the cycle `fleet simulate` runs as well)
    5. elect       the Lease in `lease_cluster` (one writer; lease.py: expiry on this process's monotonic
                   clock `ticks`, never the holder's timestamps); without one only `--once` runs
    6. act         reconcile.act.execute with the cluster actuator, unless dry-run, paused or not leader
                   (first, the completion records of finished jobs: observe/completions.py); `LeaseGuard`
                   renews the Lease every third of it before an action or request, and cuts each request's
                   timeouts to what is left of it, so a slow cluster's writes cannot outlive the Lease
    7. record      one JSON line per action (what, where, why, commit, observation time, outcome), and the
                   memory (to `--memory FILE` when given, so `--once` runs continue where the last one left);
                   the leader sends the cycle's job events (notify/: policies/notifications.yaml), once each

EFFECT (network, files, clock through `clock` and `ticks`). The clocks and the observer are injected, so tests
drive whole cycles against local API servers at times they choose, without sleeping.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import pipeline, sources
from ..catalog import load_catalog
from ..gcpause import CyclePause
from ..load import ParseCache
from ..notify.send import Notifier
from ..observe.deadline import timeouts_within
from ..observe.model import Snapshot
from ..plan.types import Placement, Plan
from ..problems import FleetError, RejectedError, UsageError
from ..render import kueue_config, pool_and_kueue_docs
from ..safeio import append_line, write_file
from ..validate import Validated
from .act import Result, execute
from .decide import Action, Decision, Knobs, LoopMemory, pool_targets, settle
from .kubeio import TIMEOUT_S, Client, Fence
from .lease import LeaseGuard, Observation
from .manifests import job_manifests
from .step import step

LAYER_OF = {"resize": "infra", "kueue": "kueue", "stop": "jobs", "move": "jobs", "start": "jobs"}
LAYERS = ("infra", "kueue", "jobs", "robots")


@dataclass
class Config:
    repo: Path
    rev: str | None = None                  # git revision of the branch head (None: the work tree)
    kubeconfig: str | None = None
    interval_s: float | None = None         # None: reconcile.interval_seconds
    once: bool = False
    dry_run: bool = False
    paused: bool = False
    layers: tuple[str, ...] = LAYERS
    identity: str = "fleet-reconciler"
    memory_file: Path | None = None
    log_file: Path | None = None            # the JSON lines are appended here too
    json_lines: bool = False                # the terminal gets the JSON lines instead of sentences
    observe_deadline_s: float | None = None  # per cluster, per cycle; None: half the interval (at least 5 s)


@dataclass
class CycleReport:
    at: datetime
    commit: str
    leader: bool
    writes: bool
    decision: Decision | None
    results: tuple[Result, ...] = ()
    errors: tuple[str, ...] = ()
    lines: list[str] = field(default_factory=list)
    interval_s: float = 60.0
    timings: dict[str, float] = field(default_factory=dict)     # wall seconds per stage
    cpu_timings: dict[str, float] = field(default_factory=dict)  # CPU seconds per stage (this process)
    robots: list[Any] = field(default_factory=list)   # robots.layer.DeploymentResult per deployment


Observer = Callable[[Mapping[str, bytes], str | None, datetime], Snapshot]
Recorder = Callable[[Mapping[str, bytes], Snapshot, str | None], Snapshot]
EngineFactory = Callable[[], Any]


class Reconciler:
    """The loop's state between cycles: its memory and the last plan (stickiness for queued work)."""

    def __init__(self, config: Config, *, clock: Callable[[], datetime], say: Callable[[str], None],
                 observer: Observer | None = None, engine: EngineFactory | None = None,
                 metrics: Any = None, ticks: Callable[[], float] = time.monotonic) -> None:
        self.config, self.clock, self.say = config, clock, say
        self.ticks = ticks                    # monotonic seconds: the Lease's expiry and renewals (never `clock`)
        self.metrics = metrics                # observability.metrics.FleetMetrics, or None
        self.observer = observer
        self.engine_factory = engine
        self.memory = read_memory(config.memory_file)
        self.notifier = Notifier(config.memory_file.with_suffix(".notified.json") if config.memory_file else None, say)
        self.last_plan: Plan | None = None
        self.last_snapshot: Snapshot | None = None
        self.recorder: Recorder | None = None    # None: the cluster writer, on the cycle's loaded repository
        self._engine: Any = None
        self._checked: tuple[str, Validated] | None = None
        self._kueue: tuple[tuple[tuple[str, bytes], ...], dict[str, list[str]]] | None = None   # `_kueue_config`
        self._parses = ParseCache()            # each file's parse by its bytes: a merge re-reads what it changed
        self._engine_tried = False
        self._lease_held: tuple[str, str | None] | None = None   # (cluster, context) of a Lease this one holds
        self._lease_seen: Observation | None = None   # the Lease's record as last read, and since when (ticks)
        self._renewed_at = 0.0                # ticks before the last successful take or renewal
        self._gc = CyclePause()

    # --- one cycle ---------------------------------------------------------------------------------------------
    def cycle(self) -> CycleReport:
        """One cycle (module docstring), the collector paused while it runs (gcpause.CyclePause)."""
        with self._gc.run():
            return self._cycle()

    def _cycle(self) -> CycleReport:
        now = self.clock()
        cfg = self.config
        timings: dict[str, float] = {}
        cpu_timings: dict[str, float] = {}
        lap, lap_cpu = time.perf_counter(), time.process_time()

        def took(stage: str) -> None:
            nonlocal lap, lap_cpu
            t, c = time.perf_counter(), time.process_time()
            timings[stage] = timings.get(stage, 0.0) + t - lap
            cpu_timings[stage] = cpu_timings.get(stage, 0.0) + c - lap_cpu
            lap, lap_cpu = t, c

        # 2. load (before observing: the clusters to observe are the repository's)
        files = sources.read_revision(cfg.repo, cfg.rev) if cfg.rev else sources.read_worktree(cfg.repo)
        commit = _commit(cfg.repo, cfg.rev)
        catalog = load_catalog()
        head = self._check(files, catalog)
        if not head.ok:
            msg = (f"the repository at {cfg.rev or 'the work tree'} ({commit}) has {len(head.errors)} validation "
                   "error(s): nothing planned, nothing done (`fleet validate` lists them)")
            self._log({"event": "error", "time": now.isoformat(), "commit": commit, "message": msg})
            return CycleReport(now, commit, False, False, None, errors=(msg,))
        knobs = Knobs.of(head.loaded.placement)
        took("load")
        # 1. observe
        # (the repository loaded once a cycle: observing and recording use the validated load's clusters)
        seen = self.observer(files, cfg.kubeconfig, now) if self.observer else \
            _observe(head, cfg.kubeconfig, now, self._observe_deadline_s(knobs))
        # 3. plan from what runs and 4. decide: the cycle `fleet simulate` runs too (reconcile/step.py)
        thought = step(head, seen, self.memory, last_snapshot=self.last_snapshot, last_plan=self.last_plan,
                       knobs=knobs, now=now, kueue=self._kueue_config(files, head, catalog), lap=took)
        snapshot, planned, decision = thought.snapshot, thought.plan, thought.decision
        # 5. elect (a dry run or a paused loop writes nothing, not even the Lease)
        paused = cfg.paused or knobs.paused
        leader, why = (False, "writing nothing: " + ("dry run" if cfg.dry_run else "paused")) \
            if cfg.dry_run or paused else self._elect(head, knobs, now)
        writes = leader and not cfg.dry_run and not paused
        mode = "dry-run" if cfg.dry_run else "paused" if paused else "" if leader else "not leader"
        chosen = tuple(a for a in decision.actions if LAYER_OF[a.kind] in cfg.layers)
        report = CycleReport(now, commit, leader, writes, decision, interval_s=knobs.interval_seconds,
                             timings=timings, cpu_timings=cpu_timings)
        took("elect")
        self._header(report, snapshot, planned, decision, why, mode)
        # 6. act: completion records first (a finished job stays finished whatever happens to its objects)
        if writes:
            snapshot = self.recorder(files, snapshot, cfg.kubeconfig) if self.recorder else \
                _record_completions(head, snapshot, cfg.kubeconfig)
            took("completions")
        if writes and chosen:
            acting = replace(decision, actions=chosen)
            lease_s = self._lease_s(knobs)
            guard = LeaseGuard(None, lambda: self._elect(head, knobs, self.clock())[0], lease_s / 3,
                               ticks=self.ticks, since=self._renewed_at, lasts_s=lease_s) \
                if knobs.lease_cluster else None
            actuator = self._actuator(head, planned, decision, snapshot, now, catalog,
                                      guard.fence if guard else None)
            if guard is not None:
                guard.inner = actuator
            guarded = guard if guard is not None else actuator
            try:
                results = execute(acting, guarded, on_result=lambda r: self._record(r, report, snapshot))
            finally:
                actuator.close()
                if guard is not None:   # the guard and the actuator refer to each other (its clients ask the
                    guard.inner = None  # fence): a cycle only the collector would free, rendered specs and all
            report.results = results
            unfinished = [r.action for r in results if r.status != "done"]
            refused = [(r.action, r.message) for r in results if r.status == "failed" and r.action.kind == "resize"]
            unfinished += [a for a in decision.actions if a not in chosen]
        else:
            for a in decision.actions:
                self._record(Result(a, mode or "not in --layers" if a in chosen else "not in --layers"), report,
                             snapshot)
            unfinished = list(decision.actions)
            refused = []
        took("act")
        if "robots" in cfg.layers and head.loaded.deployments:   # robots/ and deployments/ (robots/layer.py)
            from ..robots.layer import observation, robots_layer

            report.robots = robots_layer(head.loaded, now, write=writes, log=self._log, tell=self._tell)
            snapshot = snapshot.model_copy(update={"robots": observation(report.robots, head.loaded, now)})
            took("robots")
        # 7. record (a refused resize stays asked: it is asked again after a backoff, not in every cycle)
        self.memory = settle(self.memory, decision.memory, unfinished, refused=refused)
        if writes:
            self.last_plan = planned
            self.notifier.cycle(head, self.last_snapshot, snapshot, planned, now)   # job events, once each
        self.last_snapshot = snapshot
        if cfg.memory_file is not None:
            write_file(cfg.memory_file, self.memory.model_dump_json(indent=1) + "\n")
        if self.metrics is not None:
            self._measure(report, head, snapshot, planned, sum(timings.values()))
        took("record")
        return report

    def run(self, sleep: Callable[[float], None] = time.sleep) -> None:
        """Cycles until interrupted (Ctrl-C, SIGTERM as KeyboardInterrupt), each `interval` after the last began."""
        while True:
            began = self.clock()
            try:
                report = self.cycle()
            except UsageError:
                raise                        # a setting to fix (e.g. no Lease): stop, with the message
            except (FleetError, OSError) as e:   # git, the repository or a file failed: the next cycle retries
                message = getattr(e, "message", None) or str(e)
                self._log({"event": "error", "time": began.isoformat(), "message": message})
                self._tell(f"cycle failed: {message}; trying again next interval")
                report = CycleReport(began, "", False, False, None, errors=(message,))
            interval = self.config.interval_s or report.interval_s
            spent = (self.clock() - began).total_seconds()
            sleep(max(0.0, interval - spent))

    # --- the parts -----------------------------------------------------------------------------------------------
    def _check(self, files: Mapping[str, bytes], catalog: Any) -> Validated:
        """`pipeline.check`, reused while the files are the same bytes (between merges the repository does not
        change, and loading and validating 10,000 job files is seconds of every cycle); when they differ, only
        the files whose bytes changed are parsed again (`load.ParseCache`), the validation runs whole."""
        digest = hashlib.sha256()
        for path in sorted(files):
            digest.update(hashlib.sha256(path.encode()).digest() + hashlib.sha256(files[path]).digest())
        key = digest.hexdigest()
        if self._checked is None or self._checked[0] != key:
            self._checked = (key, pipeline.check(files, catalog, self._parses))
        return self._checked[1]

    def _kueue_config(self, files: Mapping[str, bytes], head: Validated, catalog: Any) -> dict[str, list[str]] | None:
        """`render.kueue_config` of the repository, again only when a file outside `jobs/` changed (the fleet
        and the policies decide it; jobs come and go between merges)."""
        key = tuple((path, data) for path, data in sorted(files.items()) if not path.startswith("jobs/"))
        if self._kueue is None or self._kueue[0] != key:
            try:
                self._kueue = (key, kueue_config(head, catalog))
            except RejectedError as e:    # a render refusal validation missed: the cycle goes on, quotas tracked
                self.say(f"warning: {e.message}; the Kueue objects git decides are not tracked until it is "
                         f"fixed (hint: {e.hint})")
                return None
        return self._kueue[1]

    def _elect(self, head: Validated, knobs: Knobs, now: datetime) -> tuple[bool, str]:
        from .lease import acquire

        if knobs.lease_cluster is None:
            if not self.config.once:
                raise UsageError("`fleet reconcile` without --once needs a leader Lease: no `reconcile.lease_cluster` "
                                 "in policies/placement.yaml",
                                 "set reconcile.lease_cluster to the management cluster (deploy/ creates its RBAC), "
                                 "or run `fleet reconcile --once` from one place only (the scheduled workflow)")
            return True, ("warning: no reconcile.lease_cluster: no other writer is fenced; run `fleet reconcile "
                          "--once` from one place only")
        cluster = next((c for c in head.loaded.clusters if c.name == knobs.lease_cluster), None)
        if cluster is None or cluster.kubernetes is None:     # validate refuses a Slurm lease_cluster
            return False, (f"reconcile.lease_cluster `{knobs.lease_cluster}` is not a cluster of fleet/clusters/: "
                           "not leader, writing nothing")
        lease_s = self._lease_s(knobs)
        # the GET and PUT of a renewal take at most a third of the Lease (LeaseGuard's margin)
        client = Client(cluster.name, cluster.kubernetes.context, self.config.kubeconfig,
                        timeout_s=timeouts_within(lease_s / 6, TIMEOUT_S))
        started = self.ticks()
        try:
            got = acquire(client, self.config.identity, now, lease_s, ticks=self.ticks, seen=self._lease_seen)
        finally:
            client.close()
        self._lease_seen = got.seen
        self._lease_held = (cluster.name, cluster.kubernetes.context) if got.leader else None
        if got.leader:
            self._renewed_at = started
        message = got.message
        if got.fresh and self.config.once:
            message += ("; this --once run has no earlier reading of the Lease, so it cannot tell a live holder "
                        "from one that stopped: it writes nothing this run (the holder's own --once run gives "
                        "it back when it ends; a running reconciler takes over one left unchanged for its "
                        "duration)")
        return got.leader, message

    def release_lease(self) -> None:
        """After a `--once` cycle that held the Lease: give it back (lease.release), so another reconciler
        need not wait for it to expire; one someone else took meanwhile is not touched."""
        held, self._lease_held = self._lease_held, None
        if held is None:
            return
        from .lease import release

        client = Client(held[0], held[1], self.config.kubeconfig)
        try:
            message = release(client, self.config.identity, self.clock())
        finally:
            client.close()
        self._tell(f"  {message}")
        self._log({"event": "lease", "time": self.clock().isoformat(), "message": message})

    def _lease_s(self, knobs: Knobs) -> int:
        """How long the Lease lasts unrenewed: 2.5 intervals (one slow cycle does not hand it over)."""
        return max(15, int((self.config.interval_s or knobs.interval_seconds) * 2.5))

    def _observe_deadline_s(self, knobs: Knobs) -> float:
        """How long one cluster may take to be read in a cycle: `observe_deadline_s`, else half an interval (at
        least 5 s), so a slow cluster neither delays the others' failover nor the renewal of the Lease."""
        if self.config.observe_deadline_s is not None:
            return self.config.observe_deadline_s
        return max(5.0, (self.config.interval_s or knobs.interval_seconds) / 2)

    def _actuator(self, head: Validated, planned: Plan, decision: Decision, snapshot: Snapshot, now: datetime,
                  catalog: Any, fence: Fence | None = None) -> Any:
        from ..slurm.act import beside
        from .kube_act import ClusterActuator

        clients = {c.name: Client(c.name, c.kubernetes.context, self.config.kubeconfig, fence=fence)
                   for c in head.loaded.clusters if c.kubernetes is not None}
        sized = pool_targets(planned, decision, snapshot)
        teams = head.loaded.teams
        namespaces = {t.name: t.namespace or t.name for t in teams.teams} if teams else {}
        engine = self._pulumi() if any(a.kind in ("resize", "kueue") for a in decision.actions) else None
        placed: dict[tuple[str, str], tuple[Placement, ...]] = {}   # (job, cluster): a spread service's pools
        for p in planned.placements:
            placed[(p.job, p.cluster)] = (*placed.get((p.job, p.cluster), ()), p)

        def objects(action: Action) -> list[dict[str, Any]]:
            mine = placed.get((action.job or "", action.cluster), ())
            return job_manifests(head, mine[0], catalog, mine) if mine else []

        stacks = {f"{a.cluster}-{'infra' if a.kind == 'resize' else 'kueue'}" for a in decision.actions
                  if a.kind in ("resize", "kueue")}
        kube = ClusterActuator(clients, lambda: pool_and_kueue_docs(head, sized, catalog, stacks), objects,
                               namespaces, engine, self.config.identity, now)
        return beside(kube, head, planned)      # Slurm clusters: their own actuator (slurm/act.py)

    def _pulumi(self) -> Any:
        if not self._engine_tried:
            self._engine_tried = True
            try:
                self._engine = self.engine_factory() if self.engine_factory else _pulumi_engine(self.config.repo)
            except UsageError as e:
                self.say(f"warning: {e.message}; pools and Kueue objects are not changed (hint: {e.hint})")
        return self._engine

    def _header(self, report: CycleReport, snapshot: Snapshot, planned: Plan, decision: Decision, why: str,
                mode: str) -> None:
        reachable = sum(c.status != "unreachable" for c in snapshot.clusters)
        self._tell(f"cycle at {report.at.isoformat()}: commit {report.commit}, {reachable}/{len(snapshot.clusters)} "
                 f"clusters read, {planned.counts().line()}, "
                 f"{len(decision.actions)} action(s)" + (f" ({mode}: nothing written)" if mode else ""))
        self._tell(f"  {why}")
        for c in snapshot.clusters:
            if c.status == "unreachable" and c.problems:
                self._tell(f"  cluster {c.name} cannot be read: {c.problems[0].message}")
                if c.problems[0].hint:
                    self._tell(f"    hint: {c.problems[0].hint}")
        for note in decision.notes:
            self._tell(f"  note: {note}")
        for p in decision.progress:
            self._tell(f"  moves out of {p.cluster}: {p.moved} this cycle, {p.remaining} to go, done in about "
                     f"{p.eta_cycles} cycle(s) ({p.eta_minutes:g} min)")
        self._log({"event": "cycle", "time": report.at.isoformat(), "observed_at": snapshot.observed_at.isoformat(),
                   "commit": report.commit, "leader": report.leader, "mode": mode or "write",
                   "actions": len(decision.actions), "lost_clusters": list(decision.lost_clusters),
                   "notes": list(decision.notes)})

    def _record(self, r: Result, report: CycleReport, snapshot: Snapshot) -> None:
        a = r.action
        verb = {"done": "", "failed": "FAILED ", "skipped": "SKIPPED "}.get(r.status, f"[{r.status}] ")
        line = f"  {verb}{a.describe()}" + (f" -- {r.message}" if r.message else "")
        report.lines.append(line)
        self._tell(line)
        if r.hint and r.status == "failed":
            self._tell(f"    hint: {r.hint}")
        self._log({"event": "action", "time": report.at.isoformat(), "observed_at": snapshot.observed_at.isoformat(),
                   "commit": report.commit, "status": r.status, "message": r.message,
                   **action_record(a)})

    def _measure(self, report: CycleReport, head: Validated, snapshot: Snapshot, planned: Plan,
                 duration_s: float) -> None:
        """The cycle in the metrics: gauges from the repository, snapshot and plan; the actions done, by kind;
        preemptions, migrations and failovers by priority class (or lost cluster); the work they lost."""
        m = self.metrics
        m.update(head, snapshot, planned, report.at)
        done = [r.action for r in report.results if r.status == "done"]
        ok = not report.errors and all(r.status != "failed" for r in report.results)
        m.cycle(duration_s, ok, [a.kind for a in done], now=report.at)
        prio = head.loaded.priorities
        of = {j.id: j.priority or (prio.default if prio else "") for j in head.loaded.jobs}
        lost = report.decision.lost_clusters if report.decision else ()
        for a in done:
            cls = of.get(a.job or "", "unknown")
            if a.kind == "stop" and a.reason.startswith("preempted"):
                m.preemption(cls)
            elif a.kind == "move":
                m.migration(cls)
            elif a.kind == "start" and lost and getattr(planned.placement_of(a.job or ""), "status", "") == "moved":
                m.failover(lost[0] if len(lost) == 1 else "several")
            if a.lost_accelerator_hours:
                m.lost_work(cls, a.lost_accelerator_hours)
        for r in report.robots:           # robots/layer.py: each rollout transition
            for ev in r.outcome.events if r.outcome else ():
                m.robots.event(r.fleet, r.deployment, ev.kind)

    def _tell(self, line: str) -> None:
        if not self.config.json_lines:
            self.say(line)

    def _log(self, doc: dict[str, Any]) -> None:
        line = json.dumps(doc, sort_keys=True)
        if self.config.log_file is not None:
            append_line(self.config.log_file, line)
        if self.config.json_lines:
            self.say(line)


def action_record(a: Action) -> dict[str, Any]:
    """The JSON fields of an action in the log: what, where, why (and the lost work)."""
    doc = a.model_dump(exclude_defaults=True)
    doc["what"] = doc.pop("kind")
    doc["where"] = f"{a.cluster}/{a.pool}" if a.pool else a.cluster
    doc["why"] = doc.pop("reason")
    return doc


def _observe(head: Validated, kubeconfig: str | None, now: datetime, deadline_s: float) -> Snapshot:
    if not head.loaded.clusters:      # a repository of robots only (robots/, deployments/): no cluster to read
        return Snapshot(observed_at=now, clusters=())
    from ..observe.fleetwide import observe_loaded

    return observe_loaded(head.loaded, kubeconfig, now, deadline_s=deadline_s)


def _record_completions(head: Validated, snap: Snapshot, kubeconfig: str | None) -> Snapshot:
    if not head.loaded.clusters:
        return snap
    from ..observe.fleetwide import record_completions_loaded

    return record_completions_loaded(head.loaded, snap, kubeconfig)


def _pulumi_engine(repo: Path) -> Any:
    from ..apply.engine import PulumiEngine

    return PulumiEngine.for_repo(repo, on_output=lambda line: None)


def _commit(repo: Path, rev: str | None) -> str:
    try:
        reader = sources.RevisionReader(repo)
        sha = reader.resolve(rev or "HEAD")
    except UsageError:
        return "(no commit)"
    return sha if rev else f"{sha} + work tree"


def read_memory(path: Path | None) -> LoopMemory:
    if path is None or not path.exists():
        return LoopMemory()
    try:
        return LoopMemory.model_validate_json(path.read_bytes())
    except ValueError as e:
        raise UsageError(f"{path}: not the reconciler's memory ({' '.join(str(e).split())[:200]})",
                         "delete the file: the next cycle observes everything again (idle and unreachable "
                         "clocks restart)") from None
