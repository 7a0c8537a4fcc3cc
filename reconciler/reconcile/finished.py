"""What the loop knows of a job that may have finished, for `decide` (rule 2) and `pools` (rule 4). Pure.

- `earlier_spec`: a finished copy of another spec than the file's now. The plan runs such a job again
  (plan/live.py: another digest is another run), and its finished JobSet goes first, since a JobSet that
  exists is never applied again (apply/jobs.py, `create_only`).
- `maybe_finished`: why a job with no running copy might have finished unseen. It is not started, and no pool
  grows for it, until the records are read.
"""

from __future__ import annotations

from ..observe.model import Snapshot
from .model import Copy, JobFacts


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
