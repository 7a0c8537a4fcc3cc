"""Reading every cluster in parallel, each within the cycle's deadline (`kube.observe`).  EFFECT (threads, the
monotonic clock).

A thread per cluster (up to `workers`). Without a deadline every cluster's read is waited for (each request
still has its timeouts). With one, nothing is waited for past it: a cluster not read whole by then is `slow`,
an `unreachable` observation with a problem of kind `slow` naming what it was still reading, and the others
go on. Its thread sends no request past the deadline and cuts each request's timeouts to the time left
(`Deadline.timeouts`), so it ends soon after on its own; nothing waits for it.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol, TypeVar

from .model import ClusterObservation, ObserveProblem, Resource


class Named(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def context(self) -> str | None: ...


T = TypeVar("T", bound=Named)


@dataclass(frozen=True)
class Deadline:
    at: float                 # time.monotonic() when it passes
    seconds: float            # how long it was

    def timeouts(self, most: tuple[float, float]) -> tuple[float, float] | None:
        """The next request's (connect, read) timeouts: `most`, cut to the time left; None once it passed."""
        left = self.at - time.monotonic()
        return (min(most[0], left), min(most[1], left)) if left > 0 else None


Reader = Callable[[T, Deadline | None, MutableMapping[str, Resource]], ClusterObservation]


def read_all(targets: Sequence[T], read: Reader[T], deadline_s: float | None, workers: int,
             first: Resource) -> list[ClusterObservation]:
    """`read(target, deadline, reading)` for every target in parallel (module docstring); `reading[name]` is
    what the target's thread reads now (`first` before it began), for a slow cluster's message."""
    deadline = None if deadline_s is None else Deadline(time.monotonic() + deadline_s, deadline_s)
    reading: dict[str, Resource] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(targets))), thread_name_prefix="observe")
    with no_cycle_collection():
        try:
            futures = [pool.submit(read, t, deadline, reading) for t in targets]
            wait(futures, timeout=deadline_s)
        finally:
            pool.shutdown(wait=deadline is None, cancel_futures=True)   # a slow cluster's thread ends on its own
    return [f.result() if f.done() and not f.cancelled() else
            slow(t, reading.get(t.name, first), deadline_s or 0.0) for f, t in zip(futures, targets, strict=True)]


def slow(target: Named, resource: Resource, deadline_s: float, server: str | None = None) -> ClusterObservation:
    return ClusterObservation(name=target.name, context=target.context, server=server, status="unreachable",
                              problems=(ObserveProblem(
        resource=resource, kind="slow",
        message=f"cluster `{target.name}` (context `{target.context}`): slow: not read whole within this cycle's "
                f"deadline of {deadline_s:g} s (still reading {resource}); skipped this cycle as an unreachable "
                "cluster is (its jobs are kept until `cluster_lost_after_minutes`), the other clusters go on",
        hint="check the API server's latency and load (`kubectl get --raw /readyz`, its request metrics); a "
             "cluster that is always this slow needs a longer reconcile.interval_seconds"),))


def timeouts_within(budget_s: float, most: tuple[float, float]) -> tuple[float, float]:
    """(connect, read) timeouts whose sum is at most `budget_s`, each at most `most`'s."""
    connect = min(most[0], budget_s / 2)
    return connect, max(0.001, min(most[1], budget_s - connect))


@contextlib.contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off while reading: the snapshot's objects hold no cycles, but each of the
    hundreds of thousands allocated would trigger collections that walk every object already read, so the
    collector's cost grows with the square of the fleet (bench/bench_observe.py, 20 clusters: about half of
    the CPU). Reference counting still frees everything else; the collector is restored as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
