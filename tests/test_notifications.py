"""Notifications (issue 25): policies/notifications.yaml, which job events happened (pure, from the previous and
the current snapshot and the plan), and the sending edge against a local Slack-compatible webhook: at most
once per event, across cycles and restarts."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kube_objects import jobset, workload

from reconciler.catalog import load_catalog
from reconciler.notify.events import State, happened
from reconciler.notify.send import Notifier
from reconciler.observe.model import ClusterObservation, Snapshot
from reconciler.observe.parse import parse_jobset, parse_workload
from reconciler.pipeline import check, plan
from reconciler.validate import Validated

from builders import job, with_files

NOW = datetime(2026, 11, 23, 4, 0, tzinfo=UTC)
ROUTES = """\
routes:
  - name: vision-chat
    teams: [vision]
    webhook_env: HOOK_VISION
  - name: everything-failed
    events: [failed, preempted]
    webhook_env: HOOK_ALL
"""
SLOS = """\
objectives:
  - {name: research-wait, priority_class: research, queue_wait: {percentile: 90, under_minutes: 60}}
"""


def fleet(**extra: str) -> Validated:
    v = check(with_files({"policies/notifications.yaml": ROUTES, "policies/slos.yaml": SLOS, **extra}),
              load_catalog())
    assert v.ok, v.errors
    return v


def snap(*jobs: tuple[str, str, str, int], status: str = "ok", at: datetime = NOW) -> Snapshot:
    """A snapshot of cluster gke-usc1 holding (team, job, phase, evictions) as JobSet + Workload."""
    sets, loads = [], []
    for team, name, phase, evictions in jobs:
        sets.append(parse_jobset(jobset(team, name, "h100", suspend=phase in ("queued", "evicted"))))
        loads.append(parse_workload(workload(team, name, "h100", phase=phase, evictions=evictions)))
    obs = ClusterObservation(name="gke-usc1", status=status, jobsets=tuple(s for s in sets if s),
                             workloads=tuple(w for w in loads if w))
    return Snapshot(observed_at=at, clusters=(obs,))


def test_the_document_is_validated_with_located_errors() -> None:
    bad = ("routes:\n  - name: r\n    teams: [visoin]\n    events: [started, exploded]\n"
           "    webhook_env: https://hooks.example/x\n  - {name: r, webhook_env: OK, colour: red}\n")
    v = check(with_files({"policies/notifications.yaml": bad}), load_catalog())
    found = {(p.line, p.field): p for p in v.errors if p.path == "policies/notifications.yaml"}
    assert set(found) == {(4, "routes[0].events[1]"), (5, "routes[0].webhook_env"), (6, "routes[1].colour")}
    bad = "routes:\n  - name: r\n    teams: [visoin]\n    webhook_env: HOOK\n  - {name: r, webhook_env: OK}\n"
    v = check(with_files({"policies/notifications.yaml": bad}), load_catalog())
    found = {(p.line, p.field): p for p in v.errors if p.path == "policies/notifications.yaml"}
    assert found[(3, "routes[0].teams[0]")].hint.startswith("did you mean `vision`?")
    assert found[(5, "routes[1].name")].message == "route `r` is defined twice (also routes[0])"


def test_events_are_decided_from_the_previous_and_the_current_snapshot() -> None:
    v = fleet()
    p = plan(v)
    running = snap(("vision", "train", "running", 0))
    events, state = happened(v, None, running, p, State(), NOW)
    assert [(e.kind, e.job, e.text) for e in events] == [("started", "vision/train",
                                                          "vision/train started on gke-usc1")]
    assert happened(v, running, running, p, state, NOW)[0] == []          # the next cycle: nothing new
    assert happened(v, None, running, p, state, NOW)[0] == []             # a restart: the state remembers
    preempted = snap(("vision", "train", "evicted", 1))
    events, state = happened(v, running, preempted, p, state, NOW)
    assert [e.kind for e in events] == ["preempted"]
    again = snap(("vision", "train", "evicted", 2))                        # a second eviction is a new event
    assert [e.kind for e in happened(v, preempted, again, p, state, NOW)[0]] == ["preempted"]
    failed = snap(("vision", "train", "failed", 0))
    assert [e.text for e in happened(v, running, failed, p, state, NOW)[0]] == ["vision/train failed on gke-usc1"]


def test_an_unreadable_cluster_is_not_read_as_news() -> None:
    """A cluster that did not answer keeps its keys: when it answers again, nothing is announced twice."""
    v = fleet()
    p = plan(v)
    running = snap(("vision", "train", "running", 0))
    _, state = happened(v, None, running, p, State(), NOW)
    gone = Snapshot(observed_at=NOW, clusters=(ClusterObservation(name="gke-usc1", status="unreachable"),))
    events, state = happened(v, running, gone, p, state, NOW)
    assert events == [] and len(state.sent) == 1
    assert happened(v, gone, running, p, state, NOW)[0] == []


def three_waiting() -> tuple[Any, Any, list[str]]:
    """The fleet with three research jobs too big to start, its plan, and the jobs that wait."""
    v = fleet(**{f"jobs/vision/big{i}.yaml": job(f"big{i}", count=64, body="priority: research\n") for i in range(3)})
    p = plan(v)
    waiting = sorted(x.job for x in p.pending)
    assert waiting
    return v, p, waiting


def test_a_job_waiting_longer_than_its_class_objective_is_an_event_once() -> None:
    v, p, waiting = three_waiting()
    events, state = happened(v, None, snap(), p, State(), NOW)
    assert [e for e in events if e.kind == "waiting"] == []                # first seen pending now
    later = NOW + timedelta(minutes=61)
    events, state = happened(v, None, snap(), p, state, later)
    assert sorted(e.job for e in events if e.kind == "waiting") == waiting
    assert "over its class's 60 min objective" in events[0].text
    assert happened(v, None, snap(), p, state, later + timedelta(minutes=5))[0] == []


# -- the webhook --------------------------------------------------------------------------------------------------

class Webhook:
    def __init__(self) -> None:
        self.got: list[tuple[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                hook.got.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def hook() -> Iterator[Webhook]:
    h = Webhook()
    yield h
    h.server.shutdown()


def test_the_notifier_sends_each_event_once_across_cycles_and_restarts(hook: Webhook, tmp_path: Path) -> None:
    hook.got.clear()
    env = {"HOOK_VISION": f"{hook.url}/vision", "HOOK_ALL": f"{hook.url}/all"}
    said: list[str] = []
    state = tmp_path / "memory.notified.json"
    v = fleet()
    p = plan(v)
    quiet = snap(("vision", "old", "running", 0))
    n = Notifier(state, said.append, env.get)
    assert n.cycle(v, None, quiet, p, NOW) == 0 and hook.got == []      # a new deployment announces nothing
    assert state.is_file()
    running = snap(("vision", "old", "running", 0), ("vision", "train", "running", 0), ("lang", "x", "running", 0))
    assert n.cycle(v, quiet, running, p, NOW) == 1
    assert hook.got == [("/vision", {"text": "[fleet] vision/train started on gke-usc1"})]
    assert n.cycle(v, running, running, p, NOW) == 0
    restarted = Notifier(state, said.append, env.get)                     # a new process, the same state file
    assert restarted.cycle(v, None, running, p, NOW) == 0
    failed = snap(("vision", "old", "running", 0), ("vision", "train", "running", 0), ("lang", "x", "failed", 0))
    assert restarted.cycle(v, running, failed, p, NOW) == 1               # lang's failure: only the `all` route
    assert hook.got[-1] == ("/all", {"text": "[fleet] lang/x failed on gke-usc1"})
    assert said == []


def first_start(tmp_path: Path, env: dict[str, str]) -> tuple[Notifier, Any, Any, list[str], Any]:
    """A notifier over `env` that saw nothing run, then vision/train start (its event sent nowhere: 0);
    (notifier, fleet, plan, what it said, the running snapshot)."""
    said: list[str] = []
    v = fleet()
    p = plan(v)
    n = Notifier(tmp_path / "s.json", said.append, env.get)
    n.cycle(v, None, snap(), p, NOW)
    running = snap(("vision", "train", "running", 0))
    assert n.cycle(v, snap(), running, p, NOW) == 0
    return n, v, p, said, running


def test_a_refused_webhook_is_tried_again_and_a_missing_url_is_said(hook: Webhook, tmp_path: Path) -> None:
    hook.got.clear()
    env = {"HOOK_VISION": "http://127.0.0.1:9/x"}
    n, v, p, said, running = first_start(tmp_path, env)
    assert any("cannot connect to the webhook" in s for s in said)
    env["HOOK_VISION"] = f"{hook.url}/vision"
    assert n.cycle(v, running, running, p, NOW) == 1                      # tried again, delivered once
    failed = snap(("vision", "train", "failed", 0))
    said.clear()
    n.cycle(v, running, failed, p, NOW)
    assert said == ["notifications: route everything-failed: $HOOK_ALL is not set, so `vision/train failed on "
                    "gke-usc1` is not sent"]


def test_the_reconcile_loop_sends_a_jobs_start_once(hook: Webhook, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Through `fleet reconcile`'s cycle: the leader sends the event when Kueue runs the job it started, once,
    and a restarted loop (its memory file beside) does not send it again."""
    from kube_api import clusters
    from test_reconcile import Rig, fleet_files, kueue_admits, slice_nodes

    hook.got.clear()
    monkeypatch.setenv("HOOK_VISION", f"{hook.url}/vision")
    with clusters("a", "b", "mgmt") as servers:
        slice_nodes(servers["a"], 0)
        routes = ROUTES.split("  - name: e")[0]
        rig = Rig(tmp_path, servers, {**fleet_files(), "policies/notifications.yaml": routes})
        memory = tmp_path / "memory.json"
        loop = rig.reconciler(memory_file=memory)
        loop.cycle()                                            # starts vision/train; nothing runs yet
        assert hook.got == [] and memory.with_suffix(".notified.json").is_file()
        kueue_admits(servers["a"], "train", 1)
        rig.at(2)
        loop.cycle()
        assert hook.got == [("/vision", {"text": "[fleet] vision/train started on a"})]
        rig.at(3)
        loop.cycle()
        rig.reconciler(memory_file=memory).cycle()              # a restart
        assert len(hook.got) == 1


def test_the_deployment_reads_the_webhook_urls_from_an_optional_secret() -> None:
    import yaml

    docs = list(yaml.safe_load_all((Path(__file__).resolve().parents[1] / "deploy/manifests/management.yaml")
                                   .read_text()))
    [deployment] = [d for d in docs if d and d.get("kind") == "Deployment"]
    [main] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "reconciler"]
    assert {"secretRef": {"name": "fleet-notifications", "optional": True}} in main["envFrom"]
