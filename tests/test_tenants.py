"""Tenants cannot steer the reconcile loop (issue 21 items 1 and 2): whole cycles against local Kubernetes API
servers (tests/kube_api.py) where a tenant, with rights only in its own team namespace (`lang`), plants decoy
objects carrying another team's labels (`vision/train`), and where the completion records' ConfigMap fails or
holds a bad key."""

from __future__ import annotations

import json
import urllib.request
from copy import deepcopy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kube_api import TOKEN, KubeCluster
from kube_objects import job_objects
from test_reconcile import Rig, fleet_files, running, servers, slice_nodes

from reconciler import gc
from reconciler.catalog import load_catalog
from reconciler.models import DIGEST_ANNOTATION, spec_digest
from reconciler.observability.metrics import FleetMetrics
from reconciler.observe.completions import CONFIGMAP, NAMESPACE
from reconciler.observe.fleetwide import observe_repo
from reconciler.observe.model import ClusterObservation, JobSet, Pod, Snapshot, Workload
from reconciler.pipeline import check, plan
from reconciler.sources import read_worktree
from reconciler.status import status
from reconciler.status.render import to_text

__all__ = ["servers"]     # the fixture, used by name


def decoy(team_ns: str, name: str, claims: str, pool: str = "v5p", phase: str = "running",
          **kw: Any) -> list[dict[str, Any]]:
    """A JobSet and its Workload in the tenant's namespace `team_ns`, labelled as the job `claims` (team/job)."""
    team, job = claims.split("/")
    objs = job_objects(team, job, pool, phase=phase, **kw)
    js, wl = objs
    js["metadata"].update(name=name, namespace=team_ns, uid=f"uid-decoy-{name}")
    js["metadata"]["annotations"] = {"fleet.dev/units": "0"}
    wl["metadata"].update(name=f"jobset-{name}-0a1b2", namespace=team_ns)
    wl["metadata"]["ownerReferences"][0].update(name=name, uid=f"uid-decoy-{name}")
    return [js, wl]


def deletes(c: KubeCluster) -> list[str]:
    return [r.path for r in c.requests if r.method == "DELETE"]


def test_a_decoy_in_a_tenant_namespace_never_gets_the_real_job_deleted(tmp_path: Path,
                                                                       servers: dict[str, KubeCluster]) -> None:
    """Attack: `lang` labels a JobSet in its own namespace as vision/train on another cluster's pool. The old loop
    planned vision/train where the decoy runs and deleted the real JobSet (a path built from the job id) as a
    stale copy, every cycle."""
    a, b = servers["a"], servers["b"]
    slice_nodes(a, 0)
    slice_nodes(b, 0)
    a.add(*running("vision", "train", admitted=0))
    b.add(*decoy("lang", "innocent", "vision/train", admitted=0))
    rig = Rig(tmp_path, servers, fleet_files())
    loop = rig.reconciler()
    for minute in (0, 1, 2):
        rig.at(minute)
        report = loop.cycle()
        assert report.writes
        assert [r.action.kind for r in report.results if r.action.kind != "kueue"] == []
    assert ("vision", "train") in a.objects["jobsets"]                  # the real one runs on
    assert ("lang", "innocent") in b.objects["jobsets"]                 # the decoy is not acted on either
    assert deletes(a) == [] and deletes(b) == []
    assert [r for r in rig.writes("b") if "/namespaces/lang/" in r.path] == []
    said = "\n".join(rig.lines)
    assert "impostor on b: JobSet lang/innocent carries the labels of vision/train but only vision holds that " \
           "team's jobs" in said
    cycle = [r for r in rig.records() if r["event"] == "cycle"][-1]
    assert any("impostor on b" in note for note in cycle["notes"])


def test_a_stop_deletes_the_object_observed_with_its_uid_as_precondition(tmp_path: Path,
                                                                          servers: dict[str, KubeCluster]) -> None:
    """A job whose file is gone is stopped: the DELETE names the JobSet observed and carries its uid; a JobSet
    made under the same name after the observation (another uid) is not deleted."""
    a = servers["a"]
    slice_nodes(a, 0)
    a.add(*running("vision", "old", admitted=0))
    rig = Rig(tmp_path, servers, fleet_files(jobs=("train",)))
    loop = rig.reconciler()

    def observe_then_replace(files: Any, kubeconfig: str | None, now: Any) -> Snapshot:
        snap = observe_repo(files, kubeconfig, now)
        again = deepcopy(a.objects["jobsets"][("vision", "old")])
        again["metadata"]["uid"] = "uid-made-since"
        a.add(again)                    # someone re-made vision/old between the observation and the act
        return snap

    loop.observer = observe_then_replace
    report = loop.cycle()
    (stop,) = [r for r in report.results if r.action.kind == "stop"]
    assert stop.status == "failed" and "not the one observed" in stop.message
    assert a.objects["jobsets"][("vision", "old")]["metadata"]["uid"] == "uid-made-since"    # not deleted
    (sent,) = [r for r in a.requests if r.method == "DELETE"]
    assert sent.path.endswith("/namespaces/vision/jobsets/old")
    assert sent.body["preconditions"] == {"uid": "uid-vision-old"}
    loop.observer = None
    rig.at(1)
    report = loop.cycle()                                             # observed again: now it goes
    (stop,) = [r for r in report.results if r.action.kind == "stop"]
    assert stop.status == "done" and ("vision", "old") not in a.objects["jobsets"]
    assert [r.body["preconditions"] for r in a.requests if r.method == "DELETE"][-1] == {"uid": "uid-made-since"}



# --- completion records ---------------------------------------------------------------------------------------

CM = ("fleet-system", "fleet-completions")


def digest_of(rig: Rig, job: str) -> str:
    v = check(read_worktree(rig.repo), load_catalog())
    return spec_digest(next(j for j in v.loaded.jobs if j.id == job))


def records(c: KubeCluster) -> dict[str, Any]:
    """The ConfigMap's keys, each record decoded (a value that is not one: as it is)."""
    out: dict[str, Any] = {}
    for k, v in ((c.objects["configmaps"].get(CM) or {}).get("data") or {}).items():
        try:
            out[k] = json.loads(v)
        except ValueError:
            out[k] = v
    return out


def finished(c: KubeCluster, job: str, digest: str, unit: str, ended: float = 55) -> None:
    """vision/<job> ran on `unit` of a/v5p and succeeded, its JobSet stamped with the spec's digest."""
    objs = running("vision", job, unit, phase="succeeded", admitted=0, ended=ended)
    objs[0]["metadata"]["annotations"][DIGEST_ANNOTATION] = digest
    c.add(*objs)


def apply_as(c: KubeCluster, manager: str, data: dict[str, str]) -> None:
    """Another field manager's server-side apply of keys of the records' ConfigMap (a person, another tool)."""
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP,
                                                                           "namespace": NAMESPACE},
                       "data": data}).encode()
    req = urllib.request.Request(f"{c.url}/api/v1/namespaces/{NAMESPACE}/configmaps/{CONFIGMAP}"
                                 f"?fieldManager={manager}", body, method="PATCH",
                                 headers={"Content-Type": "application/apply-patch+yaml",
                                          "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req) as reply:
        assert reply.status == 200


def collected(c: KubeCluster, job: str) -> None:
    """The JobSet and Workload of vision/<job> are gone, as Kueue's and JobSet's garbage collection leaves it."""
    for plural, name in (("jobsets", job), ("workloads", f"jobset-{job}-0a1b2")):
        c.objects[plural].pop(("vision", name))
        c._encoded[plural].pop(("vision", name))


def starts(report: Any, job: str) -> list[Any]:
    return [r for r in report.results if r.action.kind == "start" and r.action.job == job]


def test_a_decoy_finished_workload_records_nothing_and_the_job_starts(tmp_path: Path,
                                                                      servers: dict[str, KubeCluster]) -> None:
    """Attack: `lang` plants a finished Workload and a JobSet labelled vision/train with its spec digest in its own
    namespace. The old loop recorded vision/train as succeeded in fleet-system/fleet-completions: it never
    started, even once the decoy was gone."""
    a, b = servers["a"], servers["b"]
    slice_nodes(a, 0)
    slice_nodes(b, 0)
    rig = Rig(tmp_path, servers, fleet_files())
    fake = decoy("lang", "train", "vision/train", phase="succeeded", admitted=0, ended=50)
    fake[0]["metadata"]["annotations"][DIGEST_ANNOTATION] = digest_of(rig, "vision/train")
    b.add(*fake)
    loop = rig.reconciler()
    report = loop.cycle()
    assert records(a) == {} and records(b) == {}                      # nothing recorded from the decoy
    (start,) = starts(report, "vision/train")
    assert start.status == "done"
    assert ("vision", "train") in servers[start.action.cluster].objects["jobsets"]
    assert ("lang", "train") in b.objects["jobsets"]                  # the decoy itself is left alone


def test_fleet_gc_never_lists_a_running_jobs_file_because_of_a_decoy(tmp_path: Path,
                                                                     servers: dict[str, KubeCluster]) -> None:
    """The same decoy made `fleet gc` list jobs/vision/train.yaml as "can go" while the real job ran."""
    a, b = servers["a"], servers["b"]
    slice_nodes(a, 0)
    a.add(*running("vision", "train", admitted=0))
    rig = Rig(tmp_path, servers, fleet_files())
    fake = decoy("lang", "train", "vision/train", phase="succeeded", admitted=0, ended=50)
    fake[0]["metadata"]["annotations"][DIGEST_ANNOTATION] = digest_of(rig, "vision/train")
    b.add(*fake)
    files = read_worktree(rig.repo)
    snap = observe_repo(files, str(rig.kubeconfig), rig.now)
    v = check(files, load_catalog())
    assert gc.collect(v, snap) == ()
    # the job's own finished Workload (in its namespace, owned by its JobSet's uid) does make it go
    a.add(*running("vision", "train", phase="succeeded", admitted=0, ended=50))
    a.objects["jobsets"][("vision", "train")]["metadata"]["annotations"][DIGEST_ANNOTATION] = \
        digest_of(rig, "vision/train")
    a.add(a.objects["jobsets"][("vision", "train")])
    (item,) = gc.collect(v, observe_repo(files, str(rig.kubeconfig), rig.now))
    assert (item.job, item.result, item.clusters) == ("vision/train", "succeeded", ("a",))


def test_a_failed_read_of_the_records_restarts_nothing_and_erases_nothing(tmp_path: Path,
                                                                          servers: dict[str, KubeCluster]) -> None:
    """Attack: one HTTP 500 on the completions ConfigMap read. The old loop took every record as absent,
    started the finished job again, and applied the ConfigMap with force=true holding only the new record."""
    a = servers["a"]
    slice_nodes(a, 0, 1)
    rig = Rig(tmp_path, servers, fleet_files(jobs=("train", "eval")))
    train, evals = digest_of(rig, "vision/train"), digest_of(rig, "vision/eval")
    finished(a, "train", train, "0")
    a.add(*running("vision", "eval", "1", admitted=0))
    loop = rig.reconciler()
    loop.cycle()
    assert records(a)["vision.train"]["digest"] == train               # recorded by the loop
    apply_as(a, "ops", {"team.note": "kept by people"})                # another manager's key
    collected(a, "train")                                              # train's objects garbage-collected
    finished(a, "eval", evals, "1", ended=58)                          # eval finishes meanwhile

    def observe_through_one_failure(files: Any, kubeconfig: str | None, now: Any) -> Snapshot:
        a.faults["configmaps"] = 500
        try:
            return observe_repo(files, kubeconfig, now)
        finally:
            del a.faults["configmaps"]

    loop.observer = observe_through_one_failure
    rig.at(1)
    report = loop.cycle()
    assert starts(report, "vision/train") == []                       # not restarted
    assert report.decision is not None and any(
        "vision/train waits this cycle: the completion records of a could not be read" in n
        for n in report.decision.notes)
    assert set(records(a)) == {"vision.train", "team.note"}           # nothing written while unknown
    assert all(r.query.get("force") != "true" for r in a.requests if r.method == "PATCH")
    loop.observer = None
    rig.at(2)
    report = loop.cycle()                                             # read again: eval recorded, merged
    assert starts(report, "vision/train") == [] and starts(report, "vision/eval") == []
    assert set(records(a)) == {"vision.train", "vision.eval", "team.note"}
    assert records(a)["vision.train"]["digest"] == train and records(a)["team.note"] == "kept by people"
    assert all(r.query.get("force") != "true" for r in a.requests if r.method == "PATCH")
    managers = {m["manager"]: set(m["fieldsV1"]["f:data"]) for m in
                a.objects["configmaps"][CM]["metadata"]["managedFields"]}
    assert managers == {"fleet-completions": {"f:vision.train", "f:vision.eval"}, "ops": {"f:team.note"}}


def test_a_bad_key_costs_only_that_key(tmp_path: Path, servers: dict[str, KubeCluster]) -> None:
    """One malformed key made the old loop read no record at all, so the finished job started again."""
    a = servers["a"]
    slice_nodes(a, 0, 1)
    rig = Rig(tmp_path, servers, fleet_files(jobs=("train", "eval")))
    train = json.dumps({"digest": digest_of(rig, "vision/train"), "result": "succeeded", "finished_at": None})
    apply_as(a, "fleet-completions", {"vision.train": train})          # recorded earlier; its objects are gone
    apply_as(a, "people", {"vision.eval": "{not a record"})
    snap = observe_repo(read_worktree(rig.repo), str(rig.kubeconfig), rig.now)
    c = snap.cluster("a")
    assert c is not None and [r.job for r in c.completions] == ["vision/train"]
    assert c.unreadable_records == ("vision/eval",) and c.completions_unknown is None
    assert any("key `vision.eval`: not a completion record" in p.message for p in c.problems)
    report = rig.reconciler().cycle()
    assert starts(report, "vision/train") == []                       # known finished: never again
    assert starts(report, "vision/eval") == []                        # its record is unreadable: waits
    assert report.decision is not None and any(
        "vision/eval waits this cycle: its completion record on a cannot be read" in n for n in report.decision.notes)
    assert records(a)["vision.eval"] == "{not a record"               # the bad key is left as it is


# --- impostors are reported, never counted ----------------------------------------------------------------------

def test_impostors_are_named_in_fleet_status_and_the_metrics(tmp_path: Path,
                                                              servers: dict[str, KubeCluster]) -> None:
    """The decoy is a line of `fleet status` and the gauge fleet_impostor_objects, and not a job of vision's: the
    status shows vision/train running once, on a, where it runs."""
    a, b = servers["a"], servers["b"]
    slice_nodes(a, 0)
    a.add(*running("vision", "train", admitted=0))
    b.add(*decoy("lang", "innocent", "vision/train", admitted=0))
    rig = Rig(tmp_path, servers, fleet_files())
    files = read_worktree(rig.repo)
    v = check(files, load_catalog())
    snap = observe_repo(files, str(rig.kubeconfig), rig.now)
    report = status(v, snap, plan(v, observed=snap))
    assert [(j.job, j.cluster, j.phase) for j in report.jobs if j.job == "vision/train"] == [
        ("vision/train", "a", "running")]
    text = to_text(report)
    assert "cluster b: ok\n  impostor on b: JobSet lang/innocent carries the labels of vision/train but only " \
           "vision holds that team's jobs: ignored, never acted on\n" in text
    m = FleetMetrics()
    m.update(v, snap, plan(v, observed=snap), rig.now)
    assert 'fleet_impostor_objects{cluster="b"} 1.0' in m.exposition()
    assert 'fleet_impostor_objects{cluster="a"} 0.0' in m.exposition()


def test_split_keeps_the_teams_objects_and_names_the_rest() -> None:
    """Pure: labels of a team that does not exist are an impostor too; a Workload whose owner reference names
    another uid than its JobSet's is not that JobSet's; an owned snapshot splits to itself."""
    from reconciler.observe.owners import split  # here: the module is new (the other tests run without it)

    mine = JobSet(namespace="vision-ns", name="train", uid="u1", team="vision", job="train", pool="v5p")
    ghost = JobSet(namespace="ghost", name="x", uid="u2", team="ghost", job="x", pool="v5p")
    stale = Workload(namespace="vision-ns", name="w-old", jobset="train", jobset_uid="u0")
    fresh = Workload(namespace="vision-ns", name="w-new", jobset="train", jobset_uid="u1")
    pod = Pod(namespace="lang", name="p", team="vision", job="train", pool="v5p")
    c = ClusterObservation(name="a", status="ok", jobsets=(ghost, mine), workloads=(fresh, stale), pods=(pod,))
    snap = Snapshot(observed_at=datetime(2026, 11, 23, tzinfo=UTC), clusters=(c,))
    got = split(snap, {"vision": "vision-ns", "lang": "lang"})
    (kept,) = got.snapshot.clusters
    assert kept.jobsets == (mine,) and kept.workloads == (fresh,) and kept.pods == ()
    assert [(i.kind, i.namespace, i.name, i.expected) for i in got.impostors] == [
        ("JobSet", "ghost", "x", None), ("Pod", "lang", "p", "vision-ns")]
    assert "team `ghost` is not in policies/teams.yaml" in got.impostors[0].line()
    assert split(got.snapshot, {"vision": "vision-ns"}).snapshot is got.snapshot
