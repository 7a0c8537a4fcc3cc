"""Durable completion records of Slurm jobs (slurm/records.py): slurmctld forgets a finished job after MinJobAge,
so its finish is written into the lease cluster's `fleet-completions-slurm` (a Kubernetes stand-in here,
tests/kube_api.py) and read back, and the next cycles do not submit the job again. The Slurm side is slurmrestd's
answers parsed as slurm/observe.py parses them (the forgetting is an answer without the job); a real slurmctld
is in tests/test_slurm_e2e.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kube_api import KubeCluster, clusters, write_kubeconfig
from test_slurm import files, node, sjob

from reconciler import pipeline
from reconciler.catalog import load_catalog
from reconciler.models import spec_digest
from reconciler.observe.fleetwide import record_completions_loaded
from reconciler.observe.kube import observe, targets
from reconciler.observe.model import Snapshot
from reconciler.reconcile.model import Knobs, LoopMemory
from reconciler.reconcile.step import step
from reconciler.slurm import observe as slurm_observe
from reconciler.slurm import records
from reconciler.validate import Validated

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
CM = ("fleet-system", "fleet-completions-slurm")


@pytest.fixture(scope="module")
def head() -> Validated:
    v = pipeline.check(files(**{"policies/placement.yaml": "reconcile: {lease_cluster: gke}\n"}), load_catalog())
    assert v.ok, v.errors
    return v


@pytest.fixture
def gke(tmp_path: Path) -> Iterator[tuple[KubeCluster, str]]:
    with clusters("gke") as api:
        yield api["gke"], str(write_kubeconfig(tmp_path / "kubeconfig", {"ctx-gke": api["gke"].url}))


def seen(v: Validated, kubeconfig: str, *jobs: dict[str, Any]) -> Snapshot:
    """One observation as `fleet observe` makes it: the Kubernetes cluster read, slurmrestd's answers parsed, then
    the Slurm records read from the lease cluster."""
    hpc = next(c for c in v.loaded.clusters if c.name == "hpc")
    snap = observe(targets(v.loaded.clusters, v.loaded.locate), kubeconfig, NOW)
    slurm = slurm_observe.parse(hpc, {"nodes": [node(f"n{i}") for i in range(1, 5)]}, {"jobs": list(jobs)},
                                {"vision": "vision"})
    snap = snap.model_copy(update={"clusters": tuple(sorted((*snap.clusters, slurm), key=lambda c: c.name))})
    return records.read(snap, v.loaded, kubeconfig)


def starts(v: Validated, snap: Snapshot) -> tuple[list[str], tuple[str, ...]]:
    out = step(v, snap, LoopMemory(), last_snapshot=None, last_plan=None, knobs=Knobs.of(v.loaded.placement), now=NOW)
    return [a.job or "" for a in out.decision.actions if a.kind == "start"], out.decision.notes


def finished(v: Validated) -> dict[str, Any]:
    digest = spec_digest(next(j for j in v.loaded.jobs if j.id == "vision/train"))
    return {**sjob(41, "COMPLETED", f"fleet.dev/job=vision/train fleet.dev/pool=h100 fleet.dev/spec-digest={digest}"),
            "end_time": 1795562000}


def test_a_finished_slurm_job_is_recorded_and_not_submitted_again_once_slurmctld_forgets_it(
        head: Validated, gke: tuple[KubeCluster, str]) -> None:
    api, kubeconfig = gke
    assert "vision/train" in starts(head, seen(head, kubeconfig))[0]     # never ran: the cycle starts it
    done = record_completions_loaded(head.loaded, seen(head, kubeconfig, finished(head)), kubeconfig)
    cm = api.objects["configmaps"][CM]
    assert list(cm["data"]) == ["hpc.vision.train"]
    assert json.loads(cm["data"]["hpc.vision.train"])["result"] == "succeeded"
    assert [m["manager"] for m in cm["metadata"]["managedFields"]] == ["fleet-completions-slurm"]
    assert ("fleet-system", "fleet-completions") not in api.objects["configmaps"]   # gke's own records: untouched
    assert [r.job for r in done.cluster("hpc").completions] == ["vision/train"]     # type: ignore[union-attr]
    writes = len([r for r in api.requests if r.method == "PATCH"])
    record_completions_loaded(head.loaded, seen(head, kubeconfig, finished(head)), kubeconfig)
    assert len([r for r in api.requests if r.method == "PATCH"]) == writes          # recorded: no second write
    forgotten = seen(head, kubeconfig)                                              # MinJobAge passed
    hpc = forgotten.cluster("hpc")
    assert hpc is not None and not hpc.jobsets and [r.job for r in hpc.completions] == ["vision/train"]
    assert "vision/train" not in starts(head, forgotten)[0]


def test_when_the_slurm_records_cannot_be_read_no_job_that_may_have_finished_starts(
        head: Validated, gke: tuple[KubeCluster, str]) -> None:
    api, kubeconfig = gke
    api.faults["configmaps"] = 500
    snap = seen(head, kubeconfig)
    hpc = snap.cluster("hpc")
    assert hpc is not None and hpc.completions_unknown is not None and hpc.status == "degraded"
    assert "fleet-completions-slurm" in hpc.problems[-1].message
    started, notes = starts(head, snap)
    assert "vision/train" not in started
    assert any("vision/train waits" in n and "hpc" in n for n in notes)
    record_completions_loaded(head.loaded, seen(head, kubeconfig, finished(head)), kubeconfig)
    assert not [r for r in api.requests if r.method == "PATCH"]                       # unknown: nothing written


def test_slurm_records_are_the_slurm_clusters_own_and_a_bad_key_costs_only_its_job(
        head: Validated, gke: tuple[KubeCluster, str]) -> None:
    """gke's own `fleet-completions` stays gke's, another Slurm cluster's keys are not hpc's, and a key of hpc that
    holds no record makes its job wait (reported), not start."""
    api, kubeconfig = gke
    record = json.dumps({"digest": "d", "result": "succeeded", "finished_at": None})
    api.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fleet-completions",
                                                                    "namespace": "fleet-system"},
             "data": {"vision.eval": record}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CM[1], "namespace": "fleet-system"},
             "data": {"other.vision.x": record, "hpc.vision.y": record, "hpc.vision.train": "not json"}})
    snap = seen(head, kubeconfig)
    hpc, k8s = snap.cluster("hpc"), snap.cluster("gke")
    assert hpc is not None and k8s is not None
    assert [r.job for r in k8s.completions] == ["vision/eval"]
    assert [r.job for r in hpc.completions] == ["vision/y"] and hpc.unreadable_records == ("vision/train",)
    assert "key `hpc.vision.train`" in hpc.problems[-1].message
    started, notes = starts(head, snap)
    assert "vision/train" not in started and any("vision/train waits" in n for n in notes)
