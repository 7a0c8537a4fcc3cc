"""Found by a hunt: `fleet logs --follow` when the cluster drops the stream."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kube_api import write_kubeconfig
from test_job_story import FILES, fleet, pod


class Dropping(BaseHTTPRequestHandler):
    """Lists one pod; its followed log sends one line, then the connection drops (API server restart, LB idle
    reset): no terminating chunk."""

    def log_message(self, *a: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/api/v1/namespaces/vision/pods?"):
            body = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {},
                               "items": [pod("train-workers-0-0-aa")]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"10\r\nstep 1 loss 2.0\n\r\n")
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


def test_a_followed_log_whose_connection_drops_is_a_reported_fact_not_an_internal_error(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Dropping)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for rel, data in FILES.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(data if isinstance(data, str) else data.decode())
        write_kubeconfig(tmp_path / "kubeconfig", {"usc1": f"http://127.0.0.1:{server.server_address[1]}"})
        _, out, err = fleet(tmp_path, "logs", "vision/train", "--follow")
    finally:
        server.shutdown()
    assert out.startswith("step 1 loss 2.0\n")
    assert "Traceback" not in err and "internal error" not in err
    assert "gke-usc1/train-workers-0-0-aa" in err          # which pod's stream broke, and why


def test_status_of_one_job_with_no_cluster_read_shows_the_errors_it_points_at(tmp_path: Path) -> None:
    """`fleet status TEAM/JOB` exits 2 saying "each cluster's error is above", but the story prints only the
    unreadable clusters' names: what failed and how to fix it are nowhere."""
    for rel, data in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(data if isinstance(data, str) else data.decode())
    write_kubeconfig(tmp_path / "kubeconfig", {"usc1": "http://127.0.0.1:9"})
    code, out, err = fleet(tmp_path, "status", "vision/train")
    assert code == 2 and "each cluster's error is above" in err
    assert "cannot connect" in out + err        # as `fleet status` (every job) shows it


def test_status_of_a_job_placed_now_with_its_cluster_unread_does_not_promise_the_next_cycle(tmp_path: Path) -> None:
    """With its one cluster unread, `fleet status vision/idle` said the job "starts at the next `fleet apply` or
    reconcile cycle"; but what runs there is unknown (it may run already), and a loop that never read the
    cluster holds the start until it is read or counts as lost (reconcile/finished.py)."""
    for rel, data in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(data if isinstance(data, str) else data.decode())
    write_kubeconfig(tmp_path / "kubeconfig", {"usc1": "http://127.0.0.1:9"})
    code, out, _ = fleet(tmp_path, "status", "vision/idle", "--format", "json")
    assert code == 2
    eta = json.loads(out)["expected_start"]
    assert eta["placed"] is True
    assert "gke-usc1 could not be read and may run it already" in eta["basis"], eta
