"""What the loop cannot know of a job: whether it finished, or whether it runs where no one can look. For
`decide` (rule 2) and `pools` (rule 4). Pure.

- `earlier_spec`: a finished copy of another spec than the file's now. The plan runs such a job again
  (plan/live.py: another digest is another run), and its finished JobSet goes first, since a JobSet that
  exists is never applied again (apply/jobs.py, `create_only`).
- `maybe_finished`: why a job with no running copy might have finished unseen. It is not started, and no pool
  grows for it, until the records are read.
- `unread_clusters`: clusters that cannot be read now and that this memory never read (a fresh memory: the
  first run, or a lost memory file). What runs there is unknown, so a job with no copy seen could be running
  there: no job that may run there starts (`may_run_on`), and no pool grows for it, until the cluster is read
  (a partial read counts where its lists of jobs were read, `jobs_read`) or counts as lost (then its jobs
  may start elsewhere, fenced, as for any lost cluster; one that answers in part is never lost). Before, a
  first run started a second copy of a job running on such a cluster, and stopped the original as "stale"
  once the cluster answered. Inference services are not held: a replica started elsewhere stops no work.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ..observe.model import ClusterObservation, Snapshot, unread_lists
from .model import Copy, JobFacts, LoopMemory

JOB_LISTS = frozenset({"workloads", "jobsets", "rayjobs", "rayservices"})


def earlier_spec(finished: list[Copy], facts: JobFacts | None) -> list[Copy]:
    """The finished copies of another spec than the file's: the plan runs the job again (plan/live.py), and they go
    first (a JobSet that exists is never applied again). No digest, or no Job in the facts: never re-run."""
    if not finished or facts is None or (now := facts.digest()) is None:
        return []
    return [c for c in finished if c.spec_digest is not None and c.spec_digest != now]


def maybe_finished(job: str, snapshot: Snapshot) -> str | None:
    """Why a job with no running copy might have finished without the snapshot knowing (None: its completion
    is known): a reachable cluster whose completion records could not be read (`completions_unknown`), or a
    record key of this job that holds no record (`unreadable_records`). A job last seen running on a cluster
    that cannot be read now (its failover) had not finished there."""
    for c in snapshot.clusters:
        if job in c.unreadable_records:
            return f"its completion record on {c.name} cannot be read"
    if any(js.job_id == job for c in snapshot.clusters for js in c.last_running):
        return None
    unknown = sorted(c.name for c in snapshot.clusters
                     if c.completions_unknown is not None and c.status != "unreachable")
    return f"the completion records of {', '.join(unknown)} could not be read" if unknown else None


def unread_clusters(snapshot: Snapshot, memory: LoopMemory, lost: Collection[str]) -> tuple[list[str], list[str]]:
    """(the clusters whose unknown state holds starts now, the memory's `read`): see the module docstring. A
    cluster that answers in part was read where its jobs' lists were; one that answers in part never counts as
    lost, so it holds until read. A memory from a version that kept no `read` has read the clusters it kept
    anything of."""
    known = set(memory.read) | set(memory.last_running) | set(memory.last_completions) | set(memory.quotas) \
        | set(memory.kueue)
    now_read = {c.name for c in snapshot.clusters if c.status != "unreachable" or jobs_read(c)}
    holding = sorted(c.name for c in snapshot.clusters if c.name not in known | now_read and c.name not in lost
                     and not _no_way_in(c))
    return holding, sorted((known & {c.name for c in snapshot.clusters}) | now_read)


def jobs_read(c: ClusterObservation) -> bool:
    """A cluster that answered in part (`partial`) whose lists of jobs were read: what runs there is known."""
    return c.partial and not set(unread_lists(c)) & JOB_LISTS


def may_run_on(job: str, unread: Sequence[str], facts: JobFacts | None, accelerators: Mapping[str, frozenset[str]],
               snapshot: Snapshot) -> list[str]:
    """The clusters of `unread` the job may run on: where a pool in git has one of its options' accelerators
    (all of them where either is not known). None for a job last seen running somewhere (a failover from a
    lost cluster): where its one copy ran is known."""
    if not unread or any(js.job_id == job for c in snapshot.clusters for js in c.last_running):
        return []
    if facts is None or facts.accelerators is None:
        return list(unread)
    return [c for c in unread if c not in accelerators or facts.accelerators & accelerators[c]]


def unseen_notes(unseen: Mapping[str, list[str]]) -> list[str]:
    """One note per set of unread clusters: the jobs that wait for them."""
    return [f"{len(jobs)} job(s) wait this cycle: {where} cannot be read and this reconciler never read it, so "
            "they may run there: not started, and no pool grows for them, until it is read or counts as lost: "
            + ", ".join(jobs[:5]) + (f" and {len(jobs) - 5} more" if len(jobs) > 5 else "")
            for where, jobs in sorted(unseen.items())]


def _no_way_in(c: ClusterObservation) -> bool:
    """A cluster whose file names no kubeconfig context: no Fleet command can have started a job there."""
    return any(p.kind == "no-context" for p in c.problems)
