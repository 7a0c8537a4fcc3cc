"""The loop re-applies Kueue when a team's quota moves between the flavors of one cluster (reconcile/decide.py
rule 5 with `render.quota_digests`): the plan's per-cluster parts can stay the same while render splits a part
over the cluster's pools otherwise, and a live ClusterQueue that keeps the old split admits less than the plan
placed there. The builders' fleet: gke-usc1 sells H100s in two flavors (`h100`, `h100-spot`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.catalog import load_catalog
from reconciler.observe.model import ClusterObservation, Snapshot
from reconciler.pipeline import check
from reconciler.reconcile.decide import Knobs, LoopMemory, decide
from reconciler.reconcile.step import step
from reconciler.render import quota_digests, render_quotas
from reconciler.validate import Validated

from builders import TEAMS, job, with_files

NOW = datetime(2026, 11, 23, 0, 0, tzinfo=UTC)
SMALL = {"jobs/vision/small.yaml": job("small", count=8)}
BIG = {**SMALL, "jobs/vision/big.yaml": job("big", count=32)}      # 4 H100 nodes: only gke-usc1/h100 has room


def fleet(files: dict[str, str]) -> Validated:
    v = check(with_files(files), load_catalog())
    assert v.ok, v.errors
    return v


def empty(minutes: float) -> Snapshot:
    return Snapshot(observed_at=NOW + timedelta(minutes=minutes), clusters=tuple(
        ClusterObservation(name=n, status="ok") for n in ("gke-usc1", "onprem-sjc")))


def h100_split(v: Validated, cluster: str = "gke-usc1") -> dict[str, int]:
    from reconciler.plan import plan
    return {f.flavor: f.nominal for f in render_quotas(v, plan(v))
            if (f.cluster, f.team, f.accelerator) == (cluster, "vision", "nvidia-h100-80gb")}


def test_a_split_that_moves_between_flavors_of_one_cluster_updates_its_kueue_once() -> None:
    before, after = fleet(SMALL), fleet(BIG)
    assert h100_split(before) == {"h100": 20, "h100-spot": 20}
    assert h100_split(after) == {"h100": 32, "h100-spot": 8}      # the cluster's part (40) is the same
    first = step(before, empty(0), LoopMemory(), last_snapshot=None, last_plan=None, knobs=Knobs(), now=NOW)
    assert {a.cluster for a in first.decision.actions if a.kind == "kueue"} == {"gke-usc1", "onprem-sjc"}
    second = step(after, empty(1), first.decision.memory, last_snapshot=first.snapshot, last_plan=first.plan,
                  knobs=Knobs(), now=NOW + timedelta(minutes=1))
    assert [q for q in first.plan.quotas if q.cluster == "gke-usc1"] == [
        q for q in second.plan.quotas if q.cluster == "gke-usc1"]
    (kueue,) = [a for a in second.decision.actions if a.kind == "kueue"]
    assert kueue.cluster == "gke-usc1"
    assert kueue.reason == "1 quota(s) changed: vision nvidia-h100-80gb split over the cluster's flavors moved"
    third = step(after, empty(2), second.decision.memory, last_snapshot=second.snapshot, last_plan=second.plan,
                 knobs=Knobs(), now=NOW + timedelta(minutes=2))
    assert [a for a in third.decision.actions if a.kind == "kueue"] == []


def test_a_memory_without_digests_applies_each_cluster_once_then_nothing() -> None:
    """A memory written before the digests were kept (its lines are the parts only) cannot tell whether a split
    moved unseen: each cluster is applied once, saying why, and then nothing while nothing changes."""
    from reconciler.plan import plan
    v = fleet(BIG)
    p = plan(v)
    digests = quota_digests(v, p)
    fresh = decide(p, empty(0), LoopMemory(), Knobs(), NOW, flavors=digests)
    older = LoopMemory(quotas={c: [x for x in lines if " flavors " not in x]
                               for c, lines in fresh.memory.quotas.items()})
    assert older.quotas != fresh.memory.quotas
    upgraded = decide(p, empty(1), older, Knobs(), NOW, flavors=digests)
    kueue = [a for a in upgraded.actions if a.kind == "kueue"]
    assert [a.cluster for a in kueue] == ["gke-usc1", "onprem-sjc"]
    assert all(a.reason == "the quotas' split over the cluster's flavors is tracked now (an earlier version did "
               "not re-apply it when it moved): applied once" for a in kueue)
    assert upgraded.memory.quotas == fresh.memory.quotas
    assert [a for a in decide(p, empty(2), upgraded.memory, Knobs(), NOW, flavors=digests).actions
            if a.kind == "kueue"] == []


def test_a_team_whose_quota_leaves_a_cluster_is_named_in_the_reason() -> None:
    """A quota entry that is gone (its team no longer has quota there) is a change too, and the reason says
    which, not an empty list."""
    from reconciler.plan.types import Cost, Plan, QuotaPlan
    two = Plan((), (), (), (), (QuotaPlan("a", "lang", "tpu-v5p", 8, None, None),
                                QuotaPlan("a", "vision", "tpu-v5p", 64, None, None)), Cost(0, 0, 0))
    one = Plan((), (), (), (), (QuotaPlan("a", "vision", "tpu-v5p", 64, None, None),), Cost(0, 0, 0))
    seen = Snapshot(observed_at=NOW, clusters=(ClusterObservation(name="a", status="ok"),))
    d = decide(two, seen, LoopMemory(), Knobs(), NOW, flavors={"a": ["lang tpu-v5p flavors 1", "vision tpu-v5p "
                                                                     "flavors 2"]})
    (a,) = decide(one, seen, d.memory, Knobs(), NOW, flavors={"a": ["vision tpu-v5p flavors 2"]}).actions
    assert a.reason == "1 quota(s) changed: lang tpu-v5p no longer has quota here"


def test_the_reason_names_a_changed_part_once_and_an_upgrade_moves_no_split() -> None:
    """A part that changes changes its digest too: the reason names the part, not also a moved split. Against an
    older memory (no digests) with one part changed, the other teams' new digests are no move either."""
    from reconciler.plan import plan
    v = fleet(BIG)
    p = plan(v)
    cut = fleet({**BIG, "policies/teams.yaml": TEAMS.replace("nvidia-h100-80gb: {nominal: 64}",
                                                             "nvidia-h100-80gb: {nominal: 48}")})
    q = plan(cut)
    d = decide(p, empty(0), LoopMemory(), Knobs(), NOW, flavors=quota_digests(v, p))
    (a,) = [a for a in decide(q, empty(1), d.memory, Knobs(), NOW, flavors=quota_digests(cut, q)).actions
            if a.kind == "kueue" and a.cluster == "gke-usc1"]
    assert "vision nvidia-h100-80gb nominal=" in a.reason and "split over" not in a.reason, a.reason
    older = LoopMemory(quotas={c: [x for x in lines if " flavors " not in x] for c, lines in d.memory.quotas.items()})
    (b,) = [a for a in decide(q, empty(1), older, Knobs(), NOW, flavors=quota_digests(cut, q)).actions
            if a.kind == "kueue" and a.cluster == "gke-usc1"]
    assert b.reason == a.reason
