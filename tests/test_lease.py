"""The Lease follows client-go (issue 21): expiry on the candidate's own clock from when it saw the record last
change, never the holder's timestamps; a slow cluster is skipped at the cycle's deadline while the others go
on; the act stage renews the Lease within it. Whole cycles against tests/kube_api.py servers, through
test_reconcile's `Rig`, with injected clocks (the only real waits: one observation deadline of 1 s, one request
cut to under a second)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kube_api import KubeCluster, Request, clusters
from test_reconcile import PLACEMENT, Rig, cluster_yaml, fleet_files, job_yaml, jobs_and_pools, running, slice_nodes

LEASE = ("fleet-system", "fleet-reconciler")
LEASES = "/apis/coordination.k8s.io/v1/namespaces/fleet-system/leases"


def holder(servers: dict[str, KubeCluster]) -> str:
    return str(servers["mgmt"].objects["leases"][LEASE]["spec"]["holderIdentity"])


@pytest.fixture
def servers() -> Iterator[dict[str, KubeCluster]]:
    with clusters("a", "b", "mgmt") as cs:
        yield cs


def test_a_client_whose_clock_runs_an_hour_fast_does_not_take_a_live_lease(
        tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    slice_nodes(servers["a"], 0)
    rig = Rig(tmp_path, servers, fleet_files())
    live = rig.reconciler("live", once=False)
    fast = rig.reconciler("fast", once=False, skew=timedelta(hours=1))
    for minute in range(6):                                  # the holder renews every minute, as it should
        rig.at(minute)
        assert live.cycle().leader
        report = fast.cycle()
        assert not report.leader and not report.writes, minute
        assert holder(servers) == "live"
    assert "held by live" in " ".join(rig.lines) and "renewTime is not trusted" in " ".join(rig.lines)


def test_a_renew_time_in_2099_holds_the_lease_only_until_it_stays_unchanged_for_its_duration(
        tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    """A holder gone for good whose clock said 2099: a running reconciler takes the Lease once the record has
    not changed for the Lease's duration on its own clock (2.5 intervals: 150 s), and not before."""
    slice_nodes(servers["a"], 0)
    servers["mgmt"].add({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                         "metadata": {"name": LEASE[1], "namespace": LEASE[0], "resourceVersion": "7"},
                         "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 15, "leaseTransitions": 3,
                                  "acquireTime": "2099-01-01T00:00:00.000000Z",
                                  "renewTime": "2099-01-01T00:00:00.000000Z"}})
    rig = Rig(tmp_path, servers, fleet_files())
    loop = rig.reconciler("r1", once=False)
    for minute in (0, 1, 2):                                 # 120 s unchanged: still the ghost's
        rig.at(minute)
        report = loop.cycle()
        assert not report.leader and rig.writes() == [], minute
    rig.at(2.5)                                              # 150 s unchanged: abandoned
    report = loop.cycle()
    assert report.leader and report.writes
    lease = servers["mgmt"].objects["leases"][LEASE]["spec"]
    assert (lease["holderIdentity"], lease["leaseTransitions"]) == ("r1", 4)
    assert [r.action.kind for r in jobs_and_pools(report)] == ["start"]
    assert any("taken over from ghost" in line for line in rig.lines)


def test_a_once_run_never_takes_a_held_lease_and_says_why(tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    """A `--once` run has no earlier reading of the Lease: a held one (even renewed in 2099) stays held, the run
    writes nothing and says why; a released one, or one it holds itself, it takes at once."""
    slice_nodes(servers["a"], 0)
    rig = Rig(tmp_path, servers, fleet_files())
    first = rig.reconciler("first")
    assert first.cycle().leader                              # and then it is not released (a run that died)
    rig.at(30)
    again = rig.reconciler("second").cycle()                 # a fresh --once run, half an hour later
    assert not again.leader and not again.writes and again.errors == ()
    said = " ".join(rig.lines)
    assert "held by first" in said and "this --once run has no earlier reading of the Lease" in said
    lease = servers["mgmt"].objects["leases"][LEASE]
    lease["spec"]["renewTime"] = "2099-01-01T00:00:00.000000Z"   # its clock: no effect on anyone's reading
    assert first.cycle().leader                              # the holder renews it, whatever renewTime said
    assert not rig.reconciler("fourth").cycle().leader
    first.release_lease()
    assert holder(servers) == ""
    assert rig.reconciler("third").cycle().leader            # released: the next --once run takes it at once


@pytest.fixture
def four() -> Iterator[dict[str, KubeCluster]]:
    with clusters("a", "b", "c", "mgmt") as cs:
        yield cs


def test_a_slow_cluster_is_skipped_at_the_deadline_while_another_clusters_failover_happens(
        tmp_path: Path, four: dict[str, KubeCluster]) -> None:
    """Cluster c answers every request, each 0.3 s late: read whole it takes 2 s and more (7 lists), past the
    cycle's 1 s deadline. It is marked slow and skipped (its running job kept, nothing written to it), and in
    that same cycle the job of cluster a, lost for 15 minutes, fails over to b."""
    a, b, c = four["a"], four["b"], four["c"]
    slice_nodes(a, 0)
    slice_nodes(b, 0)
    slice_nodes(c, 0)
    a.add(*running("vision", "train"))
    c.add(*running("vision", "eval"))
    files = {**fleet_files(jobs=("train", "eval")), "fleet/clusters/c.yaml": cluster_yaml("c")}
    files["jobs/vision/eval.yaml"] = job_yaml("eval")
    rig = Rig(tmp_path, four, files)
    loop = rig.reconciler(observe_deadline_s=1.0)
    assert jobs_and_pools(loop.cycle()) == []
    a.faults["*"] = 500                                      # a stops answering
    rig.at(1)
    assert jobs_and_pools(loop.cycle()) == []
    c.faults["*"] = "slow"
    c.requests.clear()
    rig.at(16)                                               # a lost: its job starts on b, c is slow
    began = time.monotonic()
    report = loop.cycle()
    took = time.monotonic() - began
    assert report.timings["observe"] < 1.8 and took < 2.5, (report.timings, took)
    assert [(r.action.kind, r.action.job, r.action.cluster, r.status) for r in jobs_and_pools(report)] == \
        [("start", "vision/train", "b", "done")]
    assert ("vision", "train") in b.objects["jobsets"] and ("vision", "eval") in c.objects["jobsets"]
    snap = loop.last_snapshot
    assert snap is not None
    seen_c = next(cl for cl in snap.clusters if cl.name == "c")
    assert seen_c.status == "unreachable" and [p.kind for p in seen_c.problems] == ["slow"]
    assert "deadline of 1 s" in seen_c.problems[0].message
    assert [r for r in c.requests if r.method != "GET"] == []
    assert any(line.startswith("  cluster c cannot be read:") and "slow" in line for line in rig.lines)


class Order(list[Request]):
    """A server's request log that also appends to one log shared by several servers, in the order sent."""

    def __init__(self, name: str, shared: list[tuple[str, Request]]) -> None:
        super().__init__()
        self.name, self.shared = name, shared

    def append(self, r: Request) -> None:
        super().append(r)
        self.shared.append((self.name, r))


def test_a_long_act_stage_renews_the_lease_before_any_write_outlives_it(
        tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    """Four starts on a cluster whose every job request takes 20 s (the loop's monotonic clock, injected):
    two minutes of writes in one act stage, against a Lease of 150 s. The Lease is renewed mid-stage, and no
    write is sent more than 100 s (two thirds of the Lease) after the renewal before it began."""
    a, mgmt = servers["a"], servers["mgmt"]
    slice_nodes(a, 0, 1, 2, 3)
    jobs = ("j1", "j2", "j3", "j4")
    rig = Rig(tmp_path, servers, fleet_files(jobs=jobs, placement=PLACEMENT))
    shared: list[tuple[str, Request]] = []
    a.requests, mgmt.requests = Order("a", shared), Order("mgmt", shared)
    loop = rig.reconciler("r1", once=False)

    def ticks() -> float:                                    # each request to a team namespace: 20 s
        return 20.0 * sum(1 for name, r in shared if name == "a" and "/namespaces/vision/" in r.path)

    loop.ticks = ticks
    report = loop.cycle()
    starts = [r for r in report.results if r.action.kind == "start"]
    assert len(starts) == 4 and all(r.status == "done" for r in starts), [r.message for r in starts]
    renewals = [i for i, (name, r) in enumerate(shared) if name == "mgmt" and r.method in ("PUT", "POST")
                and r.path.startswith(LEASES)]
    assert len(renewals) >= 3, len(renewals)                 # the election, then at least twice mid-stage
    clock = 0.0
    last_renewal = 0.0
    for i, (name, r) in enumerate(shared):
        if i in renewals:
            last_renewal = clock
        if name == "a" and "/namespaces/vision/" in r.path:
            assert clock - last_renewal <= 100.0, (i, r.method, r.path, clock, last_renewal)
            clock += 20.0


def test_a_request_is_cut_to_what_is_left_of_the_lease(servers: dict[str, KubeCluster], tmp_path: Path) -> None:
    """A hanging cluster: a request through a fenced client gives up within what is left of the Lease (here a
    second) instead of its 35 s of timeouts; a renewal falls due on the way; once one fails, nothing is sent."""
    from kube_api import write_kubeconfig

    from reconciler.reconcile.kubeio import Client
    from reconciler.reconcile.lease import LeaseGuard

    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", {f"ctx-{n}": c.url for n, c in servers.items()})
    servers["a"].faults["*"] = "hang"
    now = [0.0]
    answers = iter([True, False])
    long = LeaseGuard(None, lambda: next(answers), 50.0, ticks=lambda: now[0], since=0.0, lasts_s=150.0)
    now[0] = 60.0                                            # due: renewed, and 100 s from its start are left
    assert long.fence() == pytest.approx(100.0) and long.since == 60.0
    short = LeaseGuard(None, lambda: True, 50.0, ticks=lambda: now[0], since=59.0, lasts_s=3.0)
    client = Client("a", "ctx-a", str(kubeconfig), fence=short.fence)   # 2/3 of 3 s from 59: 1 s left at 60
    began = time.monotonic()
    reply = client.request("GET", "/api/v1/nodes")
    assert time.monotonic() - began < 2.0 and not reply.ok and "no answer" in reply.message
    fenced = Client("a", "ctx-a", str(kubeconfig), fence=long.fence)
    now[0] = 111.0                                           # due again, and this renewal fails
    sent = len(servers["a"].requests)
    reply = fenced.request("GET", "/api/v1/nodes")
    assert not reply.ok and "not sent" in reply.message and "could not renew the Lease" in reply.message
    assert len(servers["a"].requests) == sent
    client.close()
    fenced.close()


def test_a_lease_answer_that_is_no_lease_is_said_so(tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    """Found by a hunt for misleading messages: a 200 with a body that is not JSON gave "cannot read it: "."""
    servers["mgmt"].faults["leases"] = "garbage"
    rig = Rig(tmp_path, servers, fleet_files())
    report = rig.reconciler().cycle()
    assert not report.leader and not report.writes
    assert any("cannot read it: HTTP 200 with a body that is not a JSON object" in line for line in rig.lines), \
        rig.lines
