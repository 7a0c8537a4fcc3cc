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
