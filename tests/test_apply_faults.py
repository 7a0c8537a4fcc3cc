"""Defects a hunt found in `fleet apply`. Each test fails before its fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kube_keys
import pytest
from kube_api import KubeCluster, _fields_v1, _leaves
from kube_objects import job_objects, serving
from test_apply_live import CHAT, fleet_cli, sent
from test_apply_live import fleet as fleet
from test_jobs_apply import MANIFEST

from reconciler.apply import jobs

from builders import shared_file


def test_a_service_moved_between_pools_of_one_cluster_is_not_deleted_after_its_new_copy_is_applied(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`vision/chat` serves as Deployment `chat` on pool `h100-old` of a cluster; the reviewed plan moves it to
    another pool of the same cluster, where render names it `chat` again. Apply patches `chat` (the new copy)
    and then deletes `chat` by name as "the old copy on a pool the plan left": the service is gone."""
    repo, cs = fleet
    (repo / "jobs/vision/chat.yaml").write_text(CHAT)
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--format", "json", "--out", str(tmp_path / "pr"))[0] == 0
    [p] = [p for p in json.loads((tmp_path / "pr/plan.json").read_text())["placements"] if p["job"] == "vision/chat"]
    where = cs["gke" if p["cluster"] == "gke-usc1" else "sjc"]
    where.add(serving("vision", "chat", "h100-old", name="chat"))       # one pool in the cluster: named `chat`
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    writes = [(r.method, r.path.rsplit("/", 1)[-1]) for r in where.requests if r.method in ("PATCH", "DELETE")
              and "/deployments/" in r.path]
    assert writes[0] == ("PATCH", "chat")
    # the new copy must survive the apply: it is the object the plan wants on the new pool
    assert ("vision", "chat") in where.objects["deployments"], (writes, out)
    assert where.objects["deployments"][("vision", "chat")]["metadata"]["labels"]["fleet.dev/pool"] == p["pool"]


def _as_a_real_api_server_records(body: dict[str, Any]) -> dict[str, Any]:
    """The live object after Fleet applied `body`, with the managedFields a real API server writes: its
    field manager strips apiVersion, kind and metadata.{name,namespace,...} from every entry
    (k8s.io/apiserver .../fieldmanager/internal/stripmeta.go `NewStripMetaManager`)."""
    stripped = {("f:apiVersion",), ("f:kind",), ("f:metadata", "f:name"), ("f:metadata", "f:namespace")}
    paths = sorted(p for p, _ in _leaves(body, kube_keys.root("jobsets")) if p not in stripped)
    live = json.loads(json.dumps(body))
    live["metadata"].update(uid="u-1", resourceVersion="7", managedFields=[
        {"manager": "fleet", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": _fields_v1(paths)}])
    return live


def test_an_object_that_already_has_fleets_values_is_unchanged_as_a_real_api_server_records_it() -> None:
    """docs/operations.md: "An object whose fields already have Fleet's values is not sent at all, so a rerun
    sends nothing". Against a real API server `unchanged` is never true: it expects Fleet to own
    f:apiVersion, f:kind, f:metadata.f:name and f:metadata.f:namespace, which no API server records."""
    body = jobs.applied_configuration(MANIFEST, None)
    live = _as_a_real_api_server_records(body)
    again = jobs.applied_configuration(MANIFEST, live)
    assert jobs.unchanged(again, live)


def test_a_move_to_a_cluster_that_cannot_be_reached_does_not_stop_the_old_copy(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The reviewed plan moves vision/train from gke-usc1 to onprem-sjc; at apply time onprem-sjc does not
    answer. Apply deletes the running copy on gke-usc1 and cannot create the new one: the job is stopped and
    runs nowhere."""
    repo, cs = fleet
    cs["gke"].add(*job_objects("vision", "train", "v5p-4x4x4", phase="running"))
    job = repo / "jobs/vision/train.yaml"
    job.write_text(job.read_text().replace("  - accelerator: tpu-v5p\n    topology: 4x4x4\n    slices: 2\n", ""))
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--format", "json", "--out", str(tmp_path / "pr"))[0] == 0
    cs["sjc"].refuse()
    _, out, _ = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                          str(tmp_path / "pr/plan.json"))
    assert not sent(cs["gke"], "DELETE"), out


def test_a_service_object_replaced_since_it_was_observed_is_not_deleted(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """DESIGN 4b: Fleet "writes or deletes only objects it observed (by namespace, name and UID)". A JobSet's
    deletion carries the observed uid as a precondition; a Deployment's does not (ServiceWorkload has no uid),
    so a look-alike made under that name since the observation (here: without Fleet's labels) is deleted."""
    repo, cs = fleet
    (repo / "jobs/vision/chat.yaml").write_text(CHAT)
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--format", "json", "--out", str(tmp_path / "pr"))[0] == 0
    [p] = [p for p in json.loads((tmp_path / "pr/plan.json").read_text())["placements"] if p["job"] == "vision/chat"]
    where = cs["gke" if p["cluster"] == "gke-usc1" else "sjc"]
    where.add(serving("vision", "chat", "h100-old", name="chat-h100-old"))
    snap = tmp_path / "snap.json"
    assert fleet_cli(capsys, "observe", "--repo", str(repo), "--format", "json", "--out", str(snap))[0] == 0
    # since then: the old copy went, and the team made a Deployment of its own under that name
    where.objects["deployments"].pop(("vision", "chat-h100-old"))
    mine = serving("vision", "chat", "h100-old", name="chat-h100-old")
    mine["metadata"]["uid"] = "uid-someone-elses"
    mine["metadata"]["labels"] = {"app": "notebook"}
    where.add(mine)
    _, out, _ = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--observed", str(snap),
                          "--reviewed", str(tmp_path / "pr/plan.json"))
    assert ("vision", "chat-h100-old") in where.objects["deployments"], out


def test_a_services_second_apply_sends_nothing_as_a_real_api_server_keys_its_port(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str]) -> None:
    """docs/operations.md: "a rerun sends nothing". A real API server merges a container's `ports` by
    `containerPort` and `protocol` and a Service's by `port` and `protocol` (their schemas' list-map keys), not
    by `name`; Fleet keyed every list of named items by `name`, so the named port of a service (and a job's
    `volumeMounts`, keyed by `mountPath`) never matched the server's `managedFields`: every apply re-sent it."""
    shared_file(f"schemas/{kube_keys.CRD_FILES['jobsets']}")      # the pod template's list keys come from it
    repo, cs = fleet
    (repo / "jobs/vision/chat.yaml").write_text(CHAT)
    assert fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")[0] == 0
    where = next(c for c in cs.values() if c.objects["deployments"])
    fields = where.objects["deployments"][("vision", "chat")]["metadata"]["managedFields"][0]["fieldsV1"]
    [container] = fields["f:spec"]["f:template"]["f:spec"]["f:containers"].values()
    assert 'k:{"containerPort":8080,"protocol":"TCP"}' in container["f:ports"]     # the server's keys, as served
    before = len(where.requests)
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    assert "Deployment vision/chat: unchanged" in out and "Service vision/chat: unchanged" in out, out
    assert {r.method for r in where.requests[before:]} == {"GET"}, [(r.method, r.path) for r in where.requests]
