"""Defects found in the Slurm target (DESIGN 4e) by a hunt; each test fails before its fix. The slurmrestd
answers served here are the ones a real Slurm 22.05 slurmrestd (openapi/v0.0.38) gives, recorded against the
daemons of tests/slurm_daemons.py: an unknown job id is HTTP 500 with error_number 2017 ("Invalid job id
specified"); a slurmctld that does not answer (or a JWT it refuses: an expired one) is HTTP 500 with
error_number -1 ("Unspecified error") on every read, `/job/<id>` included; right after `DELETE /job/<id>`
the cancelled job lists as COMPLETING for a while."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from test_slurm import SLURM, check, node, sjob

from reconciler import pipeline
from reconciler.observe.model import ClusterObservation, ObserveProblem, Snapshot
from reconciler.reconcile.act import Outcome
from reconciler.reconcile.model import Action, Knobs, LoopMemory
from reconciler.reconcile.step import step
from reconciler.slurm import observe as slurm_observe
from reconciler.slurm.act import Router, SlurmActuator

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
TAG = "fleet.dev/job=vision/train fleet.dev/pool=h100 fleet.dev/spec-digest=abc"
META = {"plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
        "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}}
CONTROLLER_DOWN = (500, {"meta": META, "errors": [{"description": "Unable to find JobId=7", "error_number": -1,
                                                     "error": "Unspecified error", "source": "slurm_load_job"}],
                         "jobs": []})
NO_SUCH_JOB = (500, {"meta": META, "errors": [{"description": "Unable to find JobId=7", "error_number": 2017,
                                                 "error": "Invalid job id specified", "source": "slurm_load_job"}],
                     "jobs": []})
NODES_DOWN = (500, {"meta": META, "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []})
JOBS_DOWN = (500, {"meta": META, "errors": [{"description": "Failed while looking for jobs", "error_number": -1,
                                               "error": "Unspecified error", "source": "slurm_load_jobs"}],
                   "jobs": []})


class Rest:
    """A slurmrestd stand-in: `routes[(method, path)]` -> (status, body) (a list: answered in turn, the last kept);
    every request recorded."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Any] = {}
        self.seen: list[tuple[str, str, Any]] = []
        rest = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                path = self.path.removeprefix("/slurm/v0.0.38")
                rest.seen.append((self.command, path, body))
                got = rest.routes.get((self.command, path), (404, {"meta": META, "errors": []}))
                if isinstance(got, list):
                    got = got.pop(0) if len(got) > 1 else got[0]
                status, doc = got
                raw = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def posts(self) -> list[Any]:
        return [b for m, p, b in self.seen if (m, p) == ("POST", "/job/submit")]


@pytest.fixture
def rest() -> Iterator[Rest]:
    r = Rest()
    yield r
    r.server.shutdown()


TOKEN = "x.eyJzdW4iOiAiZmxlZXQifQ.y"      # {"sun": "fleet"}


def hpc_of(url: str) -> Any:
    v = check(**{"fleet/clusters/hpc.yaml": SLURM.replace("http://slurm-lab:6820", url)})
    return v, next(c for c in v.loaded.clusters if c.name == "hpc")


def actuator(url: str) -> SlurmActuator:
    _, hpc = hpc_of(url)
    return SlurmActuator({"hpc": hpc}, lambda a: {"job": {"name": "vision.train", "comment": TAG}, "script": "x"},
                         {"SLURM_JWT": TOKEN}, timeout_s=5)


class Kube:
    """The Kubernetes side of `Router`: records the starts it is asked for."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def start(self, action: Action) -> Outcome:
        self.started.append(action.job or "")
        return Outcome(True, "created")

    def close(self) -> None:
        return None


# --- 1. a controller that does not answer is read as "the job is gone already" ---------------------------------

def test_a_failover_off_slurm_does_not_start_a_second_copy_while_slurmctld_does_not_answer(rest: Rest) -> None:
    """A move from a Slurm cluster to Kubernetes cancels the Slurm copy first; `GET /job/7` answered with HTTP 500
    because slurmctld did not answer (error_number -1) was taken for "gone already", so the copy on Kubernetes
    was started while the Slurm job (slurmd keeps it running) still ran: two copies of one job."""
    rest.routes[("GET", "/job/7")] = CONTROLLER_DOWN
    kube = Kube()
    router = Router(kube, actuator(rest.url), {"hpc"})
    out = router.move(Action(kind="move", cluster="gke", pool="h100", job="vision/train", reason="unit failed",
                             from_cluster="hpc", from_pool="h100", from_uid="7"))
    assert kube.started == [], out
    assert not out.ok


def test_a_job_slurmctld_does_not_know_is_still_gone_already(rest: Rest) -> None:
    """(the case the 500 was meant for, which must keep working: error_number 2017, an unknown job id)"""
    rest.routes[("GET", "/job/7")] = NO_SUCH_JOB
    out = actuator(rest.url).stop(Action(kind="stop", cluster="hpc", job="vision/train", reason="file removed",
                                         from_cluster="hpc", from_uid="7"))
    assert out.ok and "gone already" in out.message


# --- 2. a requeue within one Slurm cluster submits nothing ------------------------------------------------------

def test_a_requeue_within_a_slurm_cluster_submits_the_job_again(rest: Rest) -> None:
    """A move within one Slurm cluster is a cancel and a submit. Right after `DELETE`, slurmctld lists the cancelled
    job as COMPLETING (seen on the real 22.05), which `start` counted as "already submitted": nothing was
    submitted, and the action said `requeued` and succeeded."""
    running = {**sjob(7, "RUNNING", TAG, nodes="n1"), "job_id": 7}
    rest.routes[("GET", "/job/7")] = (200, {"meta": META, "errors": [], "jobs": [running]})
    rest.routes[("DELETE", "/job/7")] = (200, {"meta": META, "errors": []})
    rest.routes[("GET", "/jobs/")] = (200, {"meta": META, "errors": [], "jobs": [{**running,
                                                                                  "job_state": "COMPLETING"}]})
    rest.routes[("POST", "/job/submit")] = (200, {"meta": META, "errors": [], "job_id": 8, "step_id": "batch",
                                                  "job_submit_user_msg": ""})
    out = actuator(rest.url).move(Action(kind="move", cluster="hpc", pool="h100", units=(2, 3), job="vision/train",
                                         reason="unit 0 failed", from_cluster="hpc", from_pool="h100", from_uid="7"))
    assert len(rest.posts()) == 1, out


# --- 3. someone else's job with Fleet's comment --------------------------------------------------------------------

def test_an_impostor_with_fleets_comment_does_not_hide_fleets_own_job() -> None:
    """A job whose account is not its team's is an impostor (docs/slurm.md). Of several Slurm jobs of one Fleet job
    the newest active one was chosen whoever submitted it, so a newer impostor hid Fleet's own running job: status
    showed it not running, and a removed file cancelled nothing (the job Fleet submitted ran on)."""
    _, hpc = hpc_of("http://slurm-lab:6820")
    nodes = {"nodes": [node(f"n{i}") for i in range(1, 5)]}
    jobs = {"jobs": [sjob(7, "RUNNING", TAG, nodes="n[1-2]"), sjob(9, "PENDING", TAG, account="someone")]}
    c = slurm_observe.parse(hpc, nodes, jobs, {"vision": "vision"})
    assert ("vision", "train", "7") in {(js.namespace, js.name, js.uid) for js in c.jobsets}
    removed = check(**{"jobs/vision/train.yaml": ""})
    snap = Snapshot(observed_at=NOW, clusters=(c, ClusterObservation(name="gke", status="ok")))
    out = step(removed, snap, LoopMemory(), last_snapshot=None, last_plan=None,
               knobs=Knobs.of(removed.loaded.placement), now=NOW)
    assert [(a.kind, a.job, a.from_uid) for a in out.decision.actions if a.kind == "stop"] == [
        ("stop", "vision/train", "7")]


def test_an_impostors_active_job_does_not_stand_in_for_fleets_submission(rest: Rest) -> None:
    """`start` skips the submission when a Fleet job is already pending or running; it took any job with Fleet's
    comment, an impostor's (another account) too: Fleet's job was never submitted, and the start said done."""
    rest.routes[("GET", "/jobs/")] = (200, {"meta": META, "errors": [], "jobs": [
        sjob(9, "RUNNING", TAG, account="someone", nodes="n3")]})
    rest.routes[("POST", "/job/submit")] = (200, {"meta": META, "errors": [], "job_id": 10, "step_id": "batch"})
    out = actuator(rest.url).start(Action(kind="start", cluster="hpc", pool="h100", units=(0, 1), job="vision/train",
                                          reason="the plan starts it"))
    assert len(rest.posts()) == 1, out


# --- 4. a controller that does not answer is not an unreachable cluster -----------------------------------------------

def test_a_slurmctld_that_does_not_answer_behind_slurmrestd_is_an_unreachable_cluster(rest: Rest) -> None:
    """DESIGN 4e / docs: "A controller that does not answer is an unreachable cluster (a fact with the URL and a
    hint), and after `cluster_lost_after_minutes` its jobs fail over". With slurmrestd up and slurmctld down,
    22.05's slurmrestd answers HTTP 500 (error_number -1) to every read: observed `degraded` with no nodes and no
    jobs, which the loop treats as `partial` (never lost): the jobs never fail over."""
    rest.routes[("GET", "/nodes/")] = NODES_DOWN
    rest.routes[("GET", "/jobs/")] = JOBS_DOWN
    _, hpc = hpc_of(rest.url)
    c = slurm_observe.observe_cluster(hpc, {"SLURM_JWT": TOKEN}, {"vision": "vision"}, 5)
    assert c.status == "unreachable", (c.status, [p.message for p in c.problems])


# --- 5. a job Slurm preempted (PreemptMode=CANCEL) is recorded as failed for good -------------------------------------

def test_a_job_slurm_preempted_is_not_recorded_as_a_failure_of_the_job() -> None:
    """PREEMPTED (a partition preemption with PreemptMode=CANCEL, or a job that could not be requeued) was read as
    a failed run: a completion record `failed` with the job's digest, so the job never ran again until its file
    changed. A preemption is not the job's failure (on Kubernetes the preempted Workload is requeued)."""
    _, hpc = hpc_of("http://slurm-lab:6820")
    c = slurm_observe.parse(hpc, {"nodes": [node(f"n{i}") for i in range(1, 5)]},
                            {"jobs": [{**sjob(7, "PREEMPTED", TAG), "end_time": 1795562000}]}, {"vision": "vision"})
    assert [r.job for r in c.completions] == []
    assert all(js.terminal_state != "Failed" for js in c.jobsets)


# --- 6. a pool whose partition does not exist ----------------------------------------------------------------------

def test_a_pool_whose_partition_slurm_does_not_have_is_a_reported_problem() -> None:
    """No node of the answer is in the pool's partition (a typo, a partition removed): nothing said so; the plan
    kept placing jobs there and every submission failed with slurmctld's "Invalid partition name specified"."""
    _, hpc = hpc_of("http://slurm-lab:6820")
    c = slurm_observe.parse(hpc, {"nodes": [node(f"n{i}", parts=("gpu-a100",)) for i in range(1, 5)]},
                            {"jobs": []}, {"vision": "vision"})
    assert any("gpu-h100" in p.message for p in c.problems), c.problems


@pytest.mark.parametrize("nodes", [
    pytest.param([node(f"n{i}", parts=("gpu-a100",)) for i in range(1, 5)], id="no-such-partition"),
    pytest.param([node("n1")], id="one-node-of-four")])
def test_the_live_plan_counts_only_the_nodes_a_pools_partition_has(nodes: list[dict[str, Any]]) -> None:
    """Units known from what runs: a Slurm pool's units are its partition's nodes, and no loop grows them. The
    live plan still counted the pool's `max: 4` and placed vision/train (2 nodes) on hpc/h100, where
    slurmctld refuses it, while gke has room."""
    v, hpc = hpc_of("http://slurm-lab:6820")
    c = slurm_observe.parse(hpc, {"nodes": nodes}, {"jobs": []}, {"vision": "vision"})
    snap = Snapshot(observed_at=NOW, clusters=(c, ClusterObservation(name="gke", status="ok")))
    [p] = pipeline.plan(v, observed=snap, now=NOW).placements
    assert (p.job, p.cluster) == ("vision/train", "gke"), p


def test_a_slurm_pool_whose_node_list_was_not_read_keeps_its_units() -> None:
    """Only a node list that was read says what the partition has: a failed one takes nothing away."""
    v, hpc = hpc_of("http://slurm-lab:6820")
    c = slurm_observe.parse(hpc, NODES_DOWN[1], {"jobs": []}, {"vision": "vision"},
                            (ObserveProblem(resource="nodes", kind="server-error", message="500", hint=""),))
    snap = Snapshot(observed_at=NOW, clusters=(c, ClusterObservation(name="gke", status="ok")))
    [p] = pipeline.plan(v, observed=snap, now=NOW).placements
    assert (p.job, p.cluster) == ("vision/train", "hpc"), p


# --- 7. `fleet logs` of a job that runs on Slurm ------------------------------------------------------------------

def test_fleet_logs_does_not_say_a_job_running_on_slurm_runs_nowhere() -> None:
    """`fleet logs` reads pods through each Kubernetes cluster; a job that runs on a Slurm partition has none, and
    the command said "vision/train runs nowhere: no pod of it on any cluster that answered"."""
    from reconciler.observe.logs import chosen, find_pods
    from reconciler.problems import RejectedError

    v = check(**{"fleet/clusters/gke.yaml": ""})      # a Slurm cluster only: no Kubernetes context to read
    found = find_pods(v.loaded, "vision", "train", None)
    try:
        chosen("vision/train", found, False)
    except RejectedError as e:
        assert "runs nowhere" not in str(e), str(e)
