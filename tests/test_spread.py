"""Replica spread (issue 11, defect 6; reconciler/plan/spread.py): inference replicas over zones or clusters."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import yaml

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan import Plan, plan
from reconciler.plan.exact import plan_exact
from reconciler.plan.explain import explain_doc
from reconciler.plan.markdown import to_markdown
from reconciler.plan.planner import plan_with_state
from reconciler.plan.summary import freeze
from reconciler.plan.types import Placement, Preemption, plan_from_dict
from reconciler.render import render
from reconciler.sources import read_worktree

from builders import GKE, with_files

CAT = load_catalog()
ROOT = Path(__file__).resolve().parents[1]
GKE_DOWN = {"fleet/clusters/gke-usc1.yaml": GKE + "status: down\n"}


def serve(name: str = "serve", replicas: int = 3, count: int = 2, spread: str | None = None) -> str:
    lines = [f"name: {name}", "team: vision", "priority: production", "kind: inference",
             f"options:\n  - {{accelerator: nvidia-h100-80gb, count: {count}}}", f"replicas: {replicas}",
             "image: img:1", "port: 8000"]
    if spread is not None:
        lines.append(f"spread: {spread}")
    return "\n".join(lines) + "\n"


def files(jobs: dict[str, str], changes: dict[str, str | None] | None = None) -> dict[str, bytes]:
    out: dict[str, str | bytes | None] = {"jobs/vision/train.yaml": None}
    out.update({f"jobs/vision/{k}.yaml": v for k, v in jobs.items()})
    out.update(changes or {})
    return with_files(out)


def run(jobs: dict[str, str], changes: dict[str, str | None] | None = None, base: Plan | None = None) -> Plan:
    v = check(files(jobs, changes), CAT)
    assert v.ok, v.errors
    return plan(v, base)


def where(x: Placement) -> tuple[str, str, tuple[int, ...]]:
    return x.cluster, x.pool, x.units


def clusters(p: Plan, job: str) -> list[str]:
    return [x.cluster for x in p.placements_of(job)]


def test_inference_replicas_spread_over_clusters_by_default_and_not_with_spread_none() -> None:
    # Owned on-prem nodes are the cheapest place for all three replicas; by default they still spread, so that
    # losing one cluster does not take the whole service (before: every replica in onprem-sjc/h100-owned).
    p = run({"serve": serve(), "solo": serve("solo", spread="none")})
    assert clusters(p, "vision/serve") == ["gke-usc1", "onprem-sjc"]
    assert sum(len(x.units) for x in p.placements_of("vision/serve")) == 3     # one node per replica (2 GPUs)
    assert not any(x.not_spread for x in p.placements)
    assert clusters(p, "vision/solo") == ["onprem-sjc"]
    assert len(p.placement_of("vision/solo").units) == 3                       # type: ignore[union-attr]
    keys = [(x.job, x.cluster, x.pool) for x in p.placements]
    assert keys == sorted(keys)
    assert plan_from_dict(yaml.safe_load(p.to_json())).to_json() == p.to_json()   # the JSON round-trips
    assert "3 jobs placed" not in to_markdown(p) and "2 jobs placed" in to_markdown(p)
    # the exact mode follows the same rule
    v = check(files({"serve": serve()}), CAT)
    assert clusters(plan_exact(v, time_limit_s=5.0), "vision/serve") == ["gke-usc1", "onprem-sjc"]


def test_each_cluster_renders_its_replicas_as_one_workload_and_a_service() -> None:
    v = check(files({"serve": serve()}), CAT)
    p = plan(v)
    out = render(v, p, CAT)
    replicas = 0
    for c in ("gke-usc1", "onprem-sjc"):
        deployment, service = yaml.safe_load_all(out[f"{c}/services/vision.serve.yaml"])
        assert (deployment["kind"], deployment["metadata"]["name"]) == ("Deployment", "serve")
        assert service["kind"] == "Service"
        replicas += deployment["spec"]["replicas"]
    assert replicas == 3


def test_no_room_elsewhere_places_anyway_and_says_so() -> None:
    p = run({"serve": serve()}, GKE_DOWN)
    (only,) = p.placements_of("vision/serve")
    assert (only.cluster, len(only.units)) == ("onprem-sjc", 3)
    assert "all 3 placed replicas run in cluster onprem-sjc" in only.not_spread
    assert p.to_dict()["placements"][0]["not_spread"] == only.not_spread
    assert "Replicas not spread" in to_markdown(p)


def test_an_explicit_spread_is_a_rule_replicas_wait_rather_than_share_the_only_cluster() -> None:
    p = run({"serve": serve(spread="cluster")}, GKE_DOWN)
    (only,) = p.placements_of("vision/serve")
    assert len(only.units) == 1
    (pending,) = p.pending
    assert pending.job == "vision/serve"
    assert "2 of 3 replicas wait; the others run" in pending.reasons
    rule = "spread: cluster: the job's other replicas run in cluster onprem-sjc"
    assert any(r.startswith(rule) for r in pending.reasons)


def test_spread_replicas_stay_put_and_explain_lists_every_pool() -> None:
    v = check(files({"serve": serve()}), CAT)
    base, st = plan_with_state(v)
    head = plan(v, base)
    assert [x.status for x in head.placements_of("vision/serve")] == ["kept", "kept"]
    assert list(map(where, head.placements_of("vision/serve"))) == list(map(where, base.placements_of("vision/serve")))
    doc = explain_doc(base, st, "vision/serve")
    assert (doc["replicas"], doc["spread"]) == (3, "zone")
    assert [g["cluster"] for g in doc["placed"]["groups"]] == ["gke-usc1", "onprem-sjc"]
    assert "replicas spread over zones" in doc["rule"]


def test_example_safety_classifier_keeps_to_its_data_region_unless_its_file_states_a_spread() -> None:
    # Issue 11 defect 6 spread the critical safety-classifier by default, so that losing gke-use5 did not take
    # the whole service; but its one replica away ran in gke-use4 (us-east4), outside the job's data_region
    # us-east5. Issue 20: the default spread yields to the data region. us-east5 has one cluster, so every
    # replica runs there (flagged, saying why) and all fail over when it goes down. `spread: cluster` in the
    # job file is a rule: one replica then runs elsewhere and stays there when gke-use5 goes down.
    tree = read_worktree(ROOT)
    base = plan(check(tree, CAT))
    job = "serving/safety-classifier"
    assert clusters(base, job) == ["gke-use5"]
    (only,) = base.placements_of(job)
    assert not only.outside_data_region and len(only.units) == 4
    assert "no pool outside it in the job's data_region us-east5 could take one" in only.not_spread
    key = "fleet/clusters/gke-use5.yaml"
    down = dict(tree)
    down[key] = tree[key].replace(b"status: active", b"status: down")
    head = plan(check(down, CAT), base)
    assert "gke-use5" not in clusters(head, job)
    assert sum(len(x.units) for x in head.placements_of(job)) == 4
    assert job not in {p.job for p in head.pending}

    path = "jobs/serving/safety-classifier.yaml"
    tree[path] = tree[path] + b"spread: cluster\n"
    base = plan(check(tree, CAT))
    assert len(set(clusters(base, job))) >= 2
    outside = [x for x in base.placements_of(job) if x.cluster != "gke-use5"]
    assert outside and all(x.outside_data_region for x in outside)
    tree[key] = tree[key].replace(b"status: active", b"status: down")
    head = plan(check(tree, CAT), base)
    assert "gke-use5" not in clusters(head, job)
    now = {(x.cluster, x.pool): set(x.units) for x in head.placements_of(job)}
    assert all(set(x.units) <= now[(x.cluster, x.pool)] for x in outside)   # they keep serving, on their units


def test_a_service_given_more_or_fewer_replicas_starts_or_stops_them_and_moves_nothing() -> None:
    """vision's `serve` runs 1 replica; its file raises `replicas` to 3. Before, every pool group of the head
    plan was `moved` (no reason given: the job had been placed in the base), the diff listed a move
    ("re-placed"), the PR comment's headline said a running job moves and its disruption table named it, and
    the loop's notifier announced "vision/serve moves to ...". Nothing that runs stops: the groups are `kept`
    where the running replica stays and `new` elsewhere, and the diff lists a start of the replicas added,
    priced at what they add. Lowered back to 1, the replicas removed stop and the one left stays. A replica
    that does leave its place is still a move."""
    from reconciler.notify.events import visible
    from reconciler.pipeline import change, plan_markdown

    one, three = (check(files({"serve": serve(replicas=n, count=8)}), CAT) for n in (1, 3))
    c = change(three, one)
    [before] = c.base.plan.placements_of("vision/serve") if c.base else []
    groups = {(x.cluster, x.pool): x.status for x in c.head.plan.placements_of("vision/serve")}
    assert groups[(before.cluster, before.pool)] == "kept" and "moved" not in groups.values(), groups
    assert c.diff is not None
    [start] = c.diff.jobs
    assert (start.job, start.change, start.before) == ("vision/serve", "start", f"{before.cluster}/{before.pool}")
    assert start.detail == "replicas added; those placed before stay where they are"
    md = plan_markdown(c)
    assert "**No running job stops, moves or is preempted.**" in md and "Disruption" not in md
    assert not [e for e in visible(three, None, c.head.plan, {}, datetime.now(UTC)) if e.kind == "moved"]
    added = sum(x.hourly_usd for x in c.head.plan.placements_of("vision/serve")) - before.hourly_usd
    assert "| vision/serve | production | " in md and f"| {added:.2f} |" in md
    # lowered back to 1: the replicas removed stop (16 H100s of 24), the one left stays where it was: a stop of
    # replicas, not a move (before: `moved`, "re-placed", "Moves 1 running job", all 24 accelerators, "service down")
    down_to_one = change(one, three)
    [left] = down_to_one.head.plan.placements_of("vision/serve")
    assert left.status == "kept" and down_to_one.diff is not None
    [stop] = down_to_one.diff.jobs
    assert (stop.change, stop.detail) == ("stop", "replicas removed; those left stay where they are")
    md = plan_markdown(down_to_one)
    assert "**Stops 1 running job (1 production)" in md
    assert "| production | vision/serve | stops | " in md
    assert "| 16 | none given | unknown (fewer replicas serve) |" in md
    # a replica that leaves its cluster (gke-usc1 down) is still a move, with the reason
    down = check(files({"serve": serve(replicas=3, count=8)}, GKE_DOWN), CAT)
    moved = change(down, three)
    assert moved.diff is not None and [(j.job, j.change) for j in moved.diff.jobs] == [("vision/serve", "move")]


def test_an_elastic_gang_that_resizes_is_still_a_move_not_replicas_started_or_stopped() -> None:
    """An elastic gang shrunk from 4 units to 2 (its units went to a production job) restarts whole from its last
    checkpoint: the diff says `move`, all 32 accelerators. Only a service (the loop scales it by replica count)
    has groups that grow or shrink in place; the first form of that rule also read this resize as a `stop` of 16
    accelerators, and the resize back as a `start` with no disruption."""
    from test_workloads import elastic_fleet, gpu_job

    from reconciler.pipeline import change, plan_markdown

    b = check(elastic_fleet(), CAT)
    h = check(elastic_fleet(**{"jobs/vision/big.yaml": gpu_job(
        "big", "vision", 16, "priority: production\ndata_region: sjc\ndata_residency: required\n")}), CAT)
    for c, ran in ((change(h, b), 32), (change(b, h), 16)):     # shrunk, then grown back: what ran restarts
        assert c.diff is not None
        assert [(j.change, j.detail) for j in c.diff.jobs if j.job == "vision/elastic"] == [("move", "re-placed")]
        assert f"| research | vision/elastic | moves | onprem-sjc/h100-owned | onprem-sjc/h100-owned | {ran} |" in \
            plan_markdown(c)


def test_a_service_moving_off_a_draining_cluster_counts_only_the_replicas_that_leave() -> None:
    """`serve` runs 3 replicas of 2 H100s, 1 on gke-usc1 and 2 on onprem-sjc; onprem-sjc is set draining. The loop
    scales the service pool by pool: gke-usc1 goes to 3 and onprem-sjc's 2 stop once those are ready, so 4
    accelerators move and the replica on gke-usc1 stays. Before, the PR comment's disruption table counted all
    6 as moving."""
    from reconciler.pipeline import change, plan_markdown

    from builders import ONPREM

    spread = {"serve": serve(replicas=3, count=2)}
    c = change(check(files(spread, {"fleet/clusters/onprem-sjc.yaml": ONPREM + "status: draining\n"}), CAT),
               check(files(spread), CAT))
    assert c.base is not None and c.diff is not None
    assert sorted((x.cluster, len(x.units)) for x in c.base.plan.placements_of("vision/serve")) == [
        ("gke-usc1", 1), ("onprem-sjc", 2)]
    assert [(j.change, j.detail) for j in c.diff.jobs] == [("move", "cluster onprem-sjc is draining")]
    assert "| production | vision/serve | moves | gke-usc1/h100, onprem-sjc/h100-owned | gke-usc1/h100 | 4 |" in \
        plan_markdown(c)


def test_a_replica_placed_again_in_another_pool_beside_its_sibling_keeps_its_preemption() -> None:
    """A service's group where the base had it is `kept` whatever its replica count, so a replica preempted on one
    pool and placed again beside a sibling on another (a move) sits in a `kept` group. Its preemption stands (the
    loop stops it with its preemptor's other victims); only a victim that is no spread replica, placed again where
    it runs, is withdrawn (summary.freeze). Before this was told apart, the record was dropped and the loop moved
    the replica at once (traced on generated seed 1)."""
    v = check(files({"serve": serve(replicas=2, spread="cluster")}), CAT)
    assert v.ok, v.errors
    base = plan(v)
    pools = {x.pool_key for x in base.placements}
    assert len(pools) == 2
    _, st = plan_with_state(v, base)
    one, other = sorted((st.live[r] for r in ("vision/serve#0", "vision/serve#1")), key=lambda lv: lv.info.id)
    st.evict(one.info.id)
    units = other.pool.find(one.gang, 1, dry_run=False)
    assert units is not None
    st.commit(one.info, other.pool, one.option, units, kept=False)
    st.outcome.preemptions.append(Preemption(one.info.id, one.info.id, "reclaiming for a test", None))
    frozen = freeze(st)
    assert [x.status for x in frozen.placements] == ["kept"]
    assert [x.job for x in frozen.preemptions] == ["vision/serve"]
