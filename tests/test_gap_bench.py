"""bench/gap.py: its parts add up, and watching a run changes nothing in it (its figures are bench_simulate.py's)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import bench_simulate
import gap


@pytest.mark.parametrize("policy", ["cheapest", "fleet"])
def test_the_decomposition_adds_up_and_is_that_of_the_plain_run(policy: str) -> None:
    s = bench_simulate.Setup(repo=bench_simulate.ROOT, jobs=120, days=1, load=0.9, interval=300, restart_minutes=None,
                             trace=None, alibaba=None, from_day=0, size_to_trace=False, size_load=0.9)
    m = gap.measure(s, 1, policy)
    plain = bench_simulate.run_one(s, 1, policy)
    for key in ("cost_usd", "accelerator_hours_completed", "lost_accelerator_hours", "goodput", "preemptions"):
        assert m["result"][key] == plain[key], key
    assert m["paid"] == pytest.approx(m["idle"] + m["starting"] + m["running"])
    assert m["running"] == pytest.approx(m["busy (engine)"])
    assert m["running"] == pytest.approx(m["kept"] + m["lost"] + m["at risk at the end"])
    assert m["at risk at the end"] >= -1e-6 and m["idle"] >= -1e-6
    assert sum(v["paid"] for v in m["by kind"].values()) == pytest.approx(m["paid"])
    work = [v for k, v in m["work"].items() if k.startswith("class ")]
    assert sum(v.get("completed", 0.0) for v in work) == pytest.approx(m["completed"])
