"""Defaults yield to the job file (issue 20 item 6): no best-effort default (the default replica spread, a
cheaper pool, preemption's fewest victims) takes work out of the job's `data_region`, in the greedy and in
the exact solver alike; `fleet validate` warns when a stated `spread:` cannot be met inside the region."""

from __future__ import annotations

import pytest

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan import Plan, plan
from reconciler.plan.exact import plan_exact
from reconciler.problems import Problem, Severity
from reconciler.validate import Validated

from builders import with_files

CAT = load_catalog()

# An EU cluster (dearer than the US ones, one zone) beside the base fleet's gke-usc1 (us-central1-a) and
# onprem-sjc (owned H100 nodes, already paid).
EU = """\
name: gke-euw4
provider: gcp
region: europe-west4
zone: europe-west4-a
kubernetes: {cluster: ml-euw4}
labels: {data-residency: eu}
pools:
  - name: h100
    accelerator: nvidia-h100-80gb
    max: 4
    hourly_usd: 120.0
"""


def service(name: str = "eu-serve", replicas: int = 3, extra: str = "") -> str:
    return (f"name: {name}\nteam: vision\npriority: production\nkind: inference\n"
            f"options:\n  - {{accelerator: nvidia-h100-80gb, count: 8}}\nreplicas: {replicas}\n"
            f"data_region: europe-west4\nimage: img:1\nport: 8000\n{extra}")


def fleet(jobs: dict[str, str], changes: dict[str, str | None] | None = None) -> dict[str, bytes]:
    out: dict[str, str | None] = {"fleet/clusters/gke-euw4.yaml": EU, "jobs/vision/train.yaml": None}
    out.update({f"jobs/vision/{k}.yaml": v for k, v in jobs.items()})
    out.update(changes or {})
    return with_files(out)


def regions(p: Plan, job: str) -> dict[str, int]:
    """Replicas (one 8-GPU node each) per cluster."""
    found: dict[str, int] = {}
    for x in p.placements_of(job):
        found[x.cluster] = found.get(x.cluster, 0) + len(x.units)
    return found


def solve(v: Validated, solver: str) -> Plan:
    return plan(v) if solver == "greedy" else plan_exact(v, time_limit_s=5.0)


@pytest.mark.parametrize("solver", ["greedy", "exact"])
def test_the_default_spread_keeps_an_eu_service_in_its_data_region(solver: str) -> None:
    # The user's defect: the default zone spread put a replica of an EU service in the US (the greedy in
    # onprem-sjc, the exact solver too) because europe-west4 has one zone. Every replica now runs in
    # europe-west4, flagged as not spread, saying why.
    v = check(fleet({"eu-serve": service()}), CAT)
    assert v.ok, v.errors
    p = solve(v, solver)
    assert regions(p, "vision/eu-serve") == {"gke-euw4": 3}
    (only,) = p.placements_of("vision/eu-serve")
    assert not only.outside_data_region
    assert "no pool outside it in the job's data_region europe-west4 could take one" in only.not_spread
    assert not p.pending


@pytest.mark.parametrize("solver", ["greedy", "exact"])
def test_the_default_spread_still_spreads_inside_the_region_and_goes_out_only_when_it_is_full(solver: str) -> None:
    # A second EU zone: the replicas spread over the region's two zones, never out of it. With room for only
    # two replicas in the region (data_residency: preferred), the third runs outside, as any job would.
    eu_b = EU.replace("gke-euw4", "gke-euw4b").replace("europe-west4-a", "europe-west4-b")
    v = check(fleet({"eu-serve": service()}, {"fleet/clusters/gke-euw4b.yaml": eu_b}), CAT)
    p = solve(v, solver)
    got = regions(p, "vision/eu-serve")
    assert set(got) == {"gke-euw4", "gke-euw4b"} and sum(got.values()) == 3
    assert not any(x.not_spread or x.outside_data_region for x in p.placements_of("vision/eu-serve"))
    small = EU.replace("max: 4", "max: 2")
    v = check(fleet({"eu-serve": service()}, {"fleet/clusters/gke-euw4.yaml": small}), CAT)
    got = regions(solve(v, solver), "vision/eu-serve")
    assert got["gke-euw4"] == 2 and sum(got.values()) == 3


def test_a_stated_spread_rule_does_not_yield_and_required_residency_waits() -> None:
    # `spread: zone` in the job file is a rule: the replicas spread even out of the region (data_residency
    # preferred), or wait (data_residency: required).
    v = check(fleet({"eu-serve": service(extra="spread: zone\n")}), CAT)
    for p in (plan(v), plan_exact(v, time_limit_s=5.0)):
        assert regions(p, "vision/eu-serve")["gke-euw4"] >= 1 and len(regions(p, "vision/eu-serve")) >= 2
    v = check(fleet({"eu-serve": service(extra="spread: zone\ndata_residency: required\n")}), CAT)
    p = plan(v)
    assert regions(p, "vision/eu-serve") == {"gke-euw4": 1}
    (pending,) = p.pending
    assert "2 of 3 replicas wait; the others run" in pending.reasons


def test_preemption_makes_room_in_the_data_region_before_taking_fewer_victims_outside_it() -> None:
    # Nothing is free: europe-west4's two nodes run two research jobs, us-central1's two nodes one. A
    # production EU job of two nodes preempts: fewest victims (before: the one US job, and the EU job ran in
    # us-central1) no longer takes it out of its data region.
    usc1 = ("name: gke-usc1\nprovider: gcp\nregion: us-central1\nzone: us-central1-a\nkubernetes: {cluster: ml-usc1}\n"
            "pools:\n  - {name: h100, accelerator: nvidia-h100-80gb, max: 2}\n")
    eu = EU.replace("max: 4", "max: 2")

    def research(name: str, count: int, region: str) -> str:
        return (f"name: {name}\nteam: vision\npriority: research\noptions:\n  - {{accelerator: nvidia-h100-80gb, "
                f"count: {count}}}\ndata_region: {region}\nimage: img:1\n")

    running = {"eu-a": research("eu-a", 8, "europe-west4"), "eu-b": research("eu-b", 8, "europe-west4"),
               "us-a": research("us-a", 16, "us-central1")}
    changes: dict[str, str | None] = {"fleet/clusters/gke-usc1.yaml": usc1, "fleet/clusters/gke-euw4.yaml": eu,
                                      "fleet/clusters/onprem-sjc.yaml": None}
    base = plan(check(fleet(running, changes), CAT))
    assert not base.pending
    big = ("name: eu-big\nteam: vision\npriority: production\n"
           "options:\n  - {accelerator: nvidia-h100-80gb, count: 16}\ndata_region: europe-west4\nimage: img:1\n")
    head = plan(check(fleet({**running, "eu-big": big}, changes), CAT), base)
    (x,) = head.placements_of("vision/eu-big")
    assert x.cluster == "gke-euw4" and not x.outside_data_region
    assert sorted(p.job for p in head.preemptions) == ["vision/eu-a", "vision/eu-b"]


def spread_warnings(files: dict[str, bytes]) -> list[Problem]:
    v = check(files, CAT)
    assert v.ok, v.errors   # a warning, not an error: the plan still runs
    return [p for p in v.problems if p.field == "spread"]


def test_validate_warns_where_a_stated_spread_cannot_be_met_inside_the_data_region() -> None:
    # europe-west4 has one zone and one cluster: `spread: zone` or `spread: cluster` sends a replica out of it
    # (or, with data_residency: required, leaves it waiting). Located at the job's `spread:`, with a hint.
    (w,) = spread_warnings(fleet({"eu-serve": service(extra="spread: zone\n")}))
    assert (w.path, w.line, w.col, w.severity) == ("jobs/vision/eu-serve.yaml", 11, 9, Severity.WARNING)
    assert w.message == ("`spread: zone` cannot be met inside the job's data_region europe-west4: the active pools "
                         "there that can run the job are all in zone europe-west4-a, so the rule places 2 of its 3 "
                         "replicas outside europe-west4, away from the data")
    assert w.hint.startswith("add a pool in another zone of europe-west4, or remove `spread: zone`")
    (w,) = spread_warnings(fleet({"eu-serve": service(extra="data_residency: required\nspread: cluster\n")}))
    assert w.line == 12 and "all in cluster gke-euw4, so only one replica can run and the other 2 wait" in w.message
    # no warning: the default spread (best effort, it keeps to the region), or a region with two zones
    assert spread_warnings(fleet({"eu-serve": service()})) == []
    eu_b = EU.replace("gke-euw4", "gke-euw4b").replace("europe-west4-a", "europe-west4-b")
    two = {"fleet/clusters/gke-euw4b.yaml": eu_b}
    assert spread_warnings(fleet({"eu-serve": service(extra="spread: zone\n")}, two)) == []
    # a second EU cluster whose pools cannot run the job (no H100s) does not count
    tpu = eu_b.replace("accelerator: nvidia-h100-80gb", "accelerator: tpu-v5p\n    topology: 4x4x4")
    tpu = tpu.replace("    hourly_usd: 120.0\n", "")
    rule = {"eu-serve": service(extra="spread: cluster\n")}
    (w,) = spread_warnings(fleet(rule, {"fleet/clusters/gke-euw4b.yaml": tpu}))
    assert "all in cluster gke-euw4," in w.message
