"""Real parts for the robot tests and the robots benchmark: Debian's `docker-registry` (CNCF distribution) on
127.0.0.1 with its own storage folder, a TCP proxy a test can cut (an offline robot) or slow down (a thin
uplink), and a robot's policy server health endpoint that serves from the agent's `current` model."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def registry_binary() -> str:
    path = shutil.which("docker-registry")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("docker-registry is missing, but .ci/run installs it (Debian package docker-registry)",
                        pytrace=False)
        pytest.skip("docker-registry is not installed (apt-get install docker-registry)")
    return path


@contextmanager
def registry(root: Path, binary: str | None = None) -> Iterator[str]:
    """A registry serving http://127.0.0.1:<port> from `root`; yields its URL."""
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.yml"
    config.write_text(f"version: 0.1\nlog: {{level: error}}\nstorage: {{filesystem: {{rootdirectory: {root}/data}}, "
                      f"delete: {{enabled: true}}}}\nhttp: {{addr: 127.0.0.1:{port}}}\n")
    with open(root / "registry.log", "wb") as log:
        proc = subprocess.Popen([binary or registry_binary(), "serve", str(config)], stdout=subprocess.DEVNULL,
                                stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{url}/v2/", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError((root / "registry.log").read_text()) from None
                time.sleep(0.02)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


class Proxy:
    """127.0.0.1:<port> -> `target`, optionally at `rate` bytes/s (downstream), until `stop()` (which also cuts
    every open connection); `start()` again listens on the same port."""

    def __init__(self, target_port: int, rate: float | None = None) -> None:
        self.target, self.rate, self.port = target_port, rate, free_port()
        self.sent = 0                    # bytes sent downstream (registry -> robot)
        self._conns: list[socket.socket] = []
        self._server: socket.socket | None = None
        self.start()

    def start(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self._server = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            with suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)    # wakes the accepting thread (close alone does not)
            self._server.close()
            self._server = None
        for c in self._conns:
            with suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()
        self._conns.clear()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self._conns += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, self.rate), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, rate: float | None) -> None:
        chunk = 65536 if rate is None else max(1024, int(rate / 20))
        try:
            while data := src.recv(chunk):
                dst.sendall(data)
                if src.getpeername()[1] == self.target:
                    self.sent += len(data)
                if rate is not None:
                    time.sleep(len(data) / rate)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


class Health:
    """A robot's policy server, as far as health goes: 200 while the model in `<state>/current` is good, 500
    while it holds a model whose bytes contain BAD, 503 with no model."""

    def __init__(self, state_dir: Path) -> None:
        current = state_dir / "current"

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not current.is_dir():
                    code = 503
                else:
                    blobs = [p.read_bytes() for p in current.iterdir() if p.name != "manifest.json"]
                    code = 500 if any(b"BAD" in b for b in blobs) else 200
                self.send_response(code)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/healthz"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
