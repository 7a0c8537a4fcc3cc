"""`reconcile.decide`'s migration limit ranks voluntary moves by the work left on the option each copy runs
(`resolve.run_hours`: duration_hours / the relative_speed of its option there), not by the duration alone."""

from __future__ import annotations

from kube_objects import job_objects
from test_reconcile_decide import NOW, cluster, place, plan, snap

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.reconcile.decide import JobFacts, Knobs, LoopMemory, decide, job_facts

from builders import with_files

LONG = """\
name: long
team: vision
options:
  - {accelerator: nvidia-h100-80gb, count: 16}
  - {accelerator: tpu-v5p, topology: 4x4x4, relative_speed: 0.5}
  - {accelerator: tpu-v5p, topology: 4x4x4, slices: 2, relative_speed: 2}
duration_hours: 30
image: img:1
"""


def _facts() -> dict[str, JobFacts]:
    return job_facts(check(with_files({"jobs/vision/long.yaml": LONG}), load_catalog()))


def _drain(facts: dict[str, JobFacts], pool: str) -> list[tuple[str, str | None]]:
    objs = [*job_objects("vision", "train", pool, admitted=0), *job_objects("vision", "long", pool, admitted=0)]
    p = plan(place("vision/train", "onprem-sjc", "h100-owned", status="moved", reason="drain"),
             place("vision/long", "onprem-sjc", "h100-owned", (1,), status="moved", reason="drain"))
    d = decide(p, snap(cluster("gke-usc1", *objs), cluster("onprem-sjc")), LoopMemory(),
               Knobs(max_migrations_per_cycle=1), NOW, jobs=facts)
    return [(a.kind, a.job) for a in d.actions if a.kind == "move"]


def test_voluntary_moves_rank_remaining_work_on_the_option_the_copy_runs() -> None:
    facts = _facts()
    # vision/train: 24 h on its first option (v5p); on an H100 pool at relative_speed 0.5, 48 h are left.
    # vision/long: 30 h on H100 at 1.0. Before, 24 h < 30 h moved vision/train first though it has more left
    assert _drain(facts, "h100") == [("move", "vision/long")]
    # on the v5p pool vision/long runs at the slowest of its v5p options (0.5): 60 h, more than train's 24 h
    assert dict(facts["vision/long"].speeds)["tpu-v5p"] == 0.5
    assert _drain(facts, "v5p-4x4x4") == [("move", "vision/train")]
    # a pool the facts do not know: the duration as is (24 h < 30 h), as facts built by hand without speeds
    assert _drain(facts, "elsewhere") == [("move", "vision/train")]
    assert _drain({j: JobFacts("training", 30, f.duration_hours) for j, f in facts.items()}, "h100") == \
        [("move", "vision/train")]
