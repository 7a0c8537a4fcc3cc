"""Tenants cannot steer the reconcile loop (issue 21 items 1 and 2): whole cycles against local Kubernetes API
servers (tests/kube_api.py) where a tenant, with rights only in its own team namespace (`lang`), plants decoy
objects carrying another team's labels (`vision/train`), and where the completion records' ConfigMap fails or
holds a bad key."""

from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any

from kube_api import KubeCluster
from kube_objects import job_objects
from test_reconcile import Rig, fleet_files, running, servers, slice_nodes

from reconciler.observe.kube import observe_repo
from reconciler.observe.model import Snapshot

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

