"""`fleet observe`'s fast path (issue 12's benchmark): pages decoded pruned in pydantic-core give exactly what
decoding them in full gives; a page the fast path refuses is still read object by object; the snapshot is
written cluster by cluster with the same bytes; a snapshot file is read without the Kubernetes client."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kube_api import clusters, write_kubeconfig
from kube_objects import cond, job_objects, node
from pydantic import BaseModel

from reconciler.observe.files import read_snapshot, write_snapshot
from reconciler.observe.kube import Target, observe
from reconciler.observe.model import ClusterObservation, Snapshot
from reconciler.observe.parse import parse_jobset, parse_node, parse_workload
from reconciler.observe.wire import decode_page

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 11, 23, 4, 0, tzinfo=UTC)
PHASES = ("running", "queued", "admitted", "succeeded", "failed", "evicted")
PARSE = {"workloads": parse_workload, "jobsets": parse_jobset, "nodes": parse_node}


def _objects() -> dict[str, list[dict[str, Any]]]:
    pairs = [job_objects("vision", f"j-{p}", "v5p-s", p) for p in PHASES]
    nodes = [node("n0", node_pool="v5p-4x4x4-s3"), node("n1", ready=False, unschedulable=True),
             node("n2", pool="h100", node_pool="gpu", eks=True, accel="gpu",
                  extra=(cond("AcceleratedHardwareReady", False, "NvidiaXidError", 10),))]
    return {"jobsets": [js for js, _ in pairs], "workloads": [wl for _, wl in pairs], "nodes": nodes}


@pytest.mark.parametrize("kind", ["workloads", "jobsets", "nodes"])
def test_a_pruned_page_parses_exactly_as_the_full_one(kind: str) -> None:
    objs = _objects()[kind]
    body = json.dumps({"kind": "List", "metadata": {"continue": "tok-2"}, "items": objs}).encode()
    got = decode_page(kind, body)  # type: ignore[arg-type]
    assert got is not None
    items, cont = got
    assert cont == "tok-2"
    assert [PARSE[kind](o) for o in items] == [PARSE[kind](o) for o in objs]
    assert all("apiVersion" not in o and "kind" not in o for o in items)            # the rest is skipped
    if kind == "workloads":
        assert "podSets" in objs[0]["spec"] and "podSets" not in items[0]["spec"]
    assert decode_page(kind, json.dumps({"items": objs}).encode()) == (items, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("body", [b"<html>", b'{"items": {}}', b'{"metadata": {}}', b'{"items": [3]}',
                                  b'{"items": [{"metadata": "x"}]}', b'{"items": [], "metadata": []}'])
def test_the_fast_path_refuses_what_it_cannot_vouch_for(body: bytes) -> None:
    assert decode_page("workloads", body) is None


def test_a_page_the_fast_path_refuses_is_still_read_object_by_object(tmp_path: Path) -> None:
    odd = job_objects("vision", "odd", "v5e", "running")[1]
    odd["status"] = ["not", "an", "object"]
    fine = job_objects("vision", "fine", "v5e", "running")
    assert decode_page("workloads", json.dumps({"items": [fine[1], odd]}).encode()) is None
    with clusters("a") as cs:
        cs["a"].add(*fine, odd, node("n0"))
        kc = write_kubeconfig(tmp_path / "kc", {"ctx": cs["a"].url})
        (c,) = observe([Target("a", "ctx", "x")], str(kc), NOW, timeout_s=(0.5, 1.0)).clusters
    assert c.status == "degraded" and [w.jobset for w in c.workloads] == ["fine"] and len(c.nodes) == 1
    (p,) = c.problems
    assert p.kind == "invalid-object"
    assert "skipped workload vision/jobset-odd-0a1b2: field `status." in p.message


def _snapshot(n: int) -> Snapshot:
    objs = _objects()
    return Snapshot(observed_at=NOW, clusters=tuple(
        ClusterObservation(name=f"c{i}", context=f"ctx-{i}", server=f"https://c{i}", status="ok",
                           workloads=tuple(parse_workload(o) for o in objs["workloads"]),
                           jobsets=tuple(parse_jobset(o) for o in objs["jobsets"]),
                           nodes=tuple(parse_node(o) for o in objs["nodes"])) for i in range(n)))


@pytest.mark.parametrize("n", [0, 1, 3])
def test_the_snapshot_written_cluster_by_cluster_has_the_same_bytes(n: int, tmp_path: Path) -> None:
    snap = _snapshot(n)
    assert "".join(snap.json_chunks()) == snap.to_json()
    out = tmp_path / "snap.json"
    write_snapshot(out, snap)
    assert out.read_text(encoding="utf-8") == snap.to_json()
    assert read_snapshot(out) == snap
    assert [p.name for p in tmp_path.iterdir()] == ["snap.json"]       # no temporary file left


def test_status_from_a_snapshot_file_does_not_load_the_kubernetes_client(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    write_snapshot(snap, _snapshot(0))
    code = ("import sys\nfrom reconciler.cli import main\ntry:\n    main(sys.argv[1:])\nfinally:\n"
            "    print('kubernetes loaded:', 'kubernetes' in sys.modules, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, "status", "--observed", str(snap), "--format", "json"],
                       capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["observed_at"] == "2026-11-23T04:00:00+00:00"
    assert "kubernetes loaded: False" in r.stderr


def _models(m: BaseModel) -> Iterator[BaseModel]:
    yield m
    for value in m.__dict__.values():
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, BaseModel):
                yield from _models(v)


def test_parsed_models_equal_validated_ones_and_share_their_field_names() -> None:
    parsed = [PARSE[kind](o) for kind, objs in _objects().items() for o in objs]
    every = [m for p in parsed for m in _models(p)]
    assert {type(m).__name__ for m in every} >= {"Workload", "JobSet", "Node", "Condition", "Eviction",
                                                 "ReplicatedJobStatus"}
    for m in every:
        validated = type(m).model_validate(m.model_dump())
        assert (m, repr(m), m.model_dump_json()) == (validated, repr(validated), validated.model_dump_json())
        assert m.model_fields_set == validated.model_fields_set == set(type(m).model_fields)
    by_type = {type(m): m.model_fields_set for m in every}
    assert all(m.model_fields_set is by_type[type(m)] for m in every)   # one set per model, not per object
