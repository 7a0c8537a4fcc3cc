"""Pausing the cyclic garbage collector around the big pure stages.

Loading 10,000 files and planning 10,000 jobs allocate millions of small, acyclic objects that reference
counting frees; with a large live heap (the loaded repository), the collector's repeated full scans of it
cost 30-40% of the run (bench/bench_validate.py, bench/bench_plan.py). The stages create no reference
cycles that matter, and the previous state is restored on exit, even on error.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class CyclePause:
    """The collector for a loop that runs the same big stages again and again over a large live heap (the reconcile
    loop: the repository's 10,000 parsed files, the last plan and snapshot stay between cycles): paused for the
    whole of each run, then one collection of what the run allocated (the young generations: the cycles it made
    are freed there), and a full collection every `full_every` runs, so cyclic garbage among older objects is
    still freed. Left running, the collector scanned that heap four times in each steady cycle (1.4 s of 4.5 s
    CPU at 10,000 jobs, bench/bench_reconcile.py); one full scan costs about 0.5 s."""

    def __init__(self, full_every: int = 10) -> None:
        self.full_every = full_every
        self.runs = 0

    @contextlib.contextmanager
    def run(self) -> Iterator[None]:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            self.runs += 1
            # collected while still paused: enabled first, the collector started on its own at the next
            # allocation and scanned every object the run made, which this collection then scanned again
            try:
                gc.collect(2 if self.runs % self.full_every == 0 else 1)
            finally:
                if was_enabled:
                    gc.enable()
