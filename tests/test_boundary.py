"""Issue 21, items 5 and 6: Fleet's namespace and credentials are Fleet's, and the low findings of the live
side's probe (inputs read with the repository's file rules, the metrics server's exposure, the trace
importer's numbers, health-check's input, reconcile-manifests' inputs)."""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler import kube_rules
from reconciler.apply.specs import load_specs
from reconciler.catalog import load_catalog
from reconciler.cli import main
from reconciler.observability.metrics import FleetMetrics
from reconciler.observe.files import MAX_SNAPSHOT_BYTES
from reconciler.observe.model import Snapshot
from reconciler.pipeline import check
from reconciler.problems import UsageError
from reconciler.reconcile import deploy
from reconciler.simulate.alibaba import import_pods

from builders import base_files

node_health = importlib.import_module("reconciler.render.node_health")   # the package exports a function of that name


def test_the_reserved_names_are_those_fleet_deploys() -> None:
    """validate refuses exactly the names Fleet's own manifests use: its namespace, ServiceAccounts and
    credential Secrets (a rename in deploy.py without kube_rules would let a job name the new one)."""
    objs = deploy.management("img:1", "https://example.com/org/fleet.git", "main") + deploy.managed(["vision"])
    assert deploy.NAMESPACE == kube_rules.FLEET_NAMESPACE and kube_rules.reserved_namespace(deploy.NAMESPACE)
    accounts = {o["metadata"]["name"] for o in objs if o["kind"] == "ServiceAccount"} | {node_health.NAME}
    assert accounts == kube_rules.FLEET_SERVICE_ACCOUNTS
    secrets = {o["metadata"]["name"] for o in objs if o["kind"] == "Secret"}
    for o in objs:
        for c in o.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            secrets |= {e["valueFrom"]["secretKeyRef"]["name"] for e in c.get("env", []) if "valueFrom" in e
                        and "secretKeyRef" in e["valueFrom"]}
    assert secrets == kube_rules.FLEET_SECRETS
    assert kube_rules.reserved_namespace(node_health.NAMESPACE)


# --- item 6: inputs read by the repository's file rules ------------------------------------------------------

def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for rel, data in base_files().items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    return repo


class Ran:
    """What `fleet ARGS` (reconciler.cli.main, run in this process) printed and returned."""

    def __init__(self, exit_code: int, output: str) -> None:
        self.exit_code, self.output = exit_code, output


def _invoke(capsys: pytest.CaptureFixture[str], args: list[str]) -> Ran:
    capsys.readouterr()
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return Ran(code, out.out + out.err)


def _fleet(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`fleet ARGS` in a fresh interpreter, killed after `timeout` seconds (the old code hung on a FIFO)."""
    env = {k: v for k, v in os.environ.items() if k != "FLEET_DEBUG"}
    return subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, check=False, timeout=timeout)


def test_observed_is_not_read_through_a_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A snapshot path that is a link (here to a good snapshot elsewhere; the probe's went to /dev/zero) is
    refused, never followed: exit 2, the file named, a hint."""
    repo = _repo(tmp_path)
    real = tmp_path / "elsewhere.json"
    real.write_text(Snapshot(observed_at=datetime(2025, 6, 1, tzinfo=UTC), clusters=()).to_json())
    (tmp_path / "snap.json").symlink_to(real)
    r = _invoke(capsys, ["plan", "--repo", str(repo), "--observed", str(tmp_path / "snap.json")])
    assert r.exit_code == 2, r.output
    assert f"cannot read the snapshot {tmp_path / 'snap.json'}: is a symbolic link, which Fleet does not follow" \
        in r.output and "hint:" in r.output


def test_observed_over_the_limit_is_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 300 MB file (sparse: nothing is written) is refused by its size before a byte is read."""
    repo = _repo(tmp_path)
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(300_000_000)
    assert big.stat().st_size > MAX_SNAPSHOT_BYTES
    r = _invoke(capsys, ["status", "--repo", str(repo), "--observed", str(big)])
    assert r.exit_code == 2, r.output
    assert f"it is 300,000,000 bytes, over the {MAX_SNAPSHOT_BYTES:,}-byte limit (not read)" in r.output


@pytest.mark.parametrize(("snapshot", "message"), [
    ('{"version": 1, "observed_at": "9999-12-31T00:00:00Z", "clusters": []}',
     "field `observed_at`: Value error, the year 9999 is outside 1970-2999"),
    ('{"version": 1, "observed_at": "2026-12-05T12:00:00Z", "clusters": [{"name": "gke-usc1", "status": "ok", '
     '"workloads": [{"namespace": "vision", "name": "w", "created_at": "2026-12-05T10:00:00", "jobset": "train"}]}]}',
     "field `clusters.0.workloads.0.created_at`: Value error, a time without a zone"),
])
def test_observed_times_out_of_this_world_are_located_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             snapshot: str, message: str) -> None:
    """Found by a hunt for tracebacks: `fleet status` stopped with an internal error (OverflowError, TypeError)."""
    repo = _repo(tmp_path)
    (tmp_path / "snap.json").write_text(snapshot)
    r = _invoke(capsys, ["status", "--repo", str(repo), "--observed", str(tmp_path / "snap.json")])
    assert r.exit_code == 1, r.output
    assert message in r.output and "internal error" not in r.output


@pytest.mark.parametrize("verb", [["plan"], ["status"]])
def test_observed_fifo_is_refused_without_waiting(tmp_path: Path, verb: list[str]) -> None:
    repo = _repo(tmp_path)
    os.mkfifo(tmp_path / "snap.json")
    r = _fleet(*verb, "--repo", str(repo), "--observed", str(tmp_path / "snap.json"), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "it is a FIFO (named pipe); Fleet reads only regular files" in r.stderr and "Traceback" not in r.stderr


def test_specs_are_read_by_the_file_rules(tmp_path: Path) -> None:
    """`fleet apply --specs DIR`: a spec that is a link, a FIFO or a folder named *.json is refused (a FIFO
    used to hang the apply), the file named."""
    specs = tmp_path / "stacks"
    specs.mkdir()
    (tmp_path / "outside.json").write_text("{}")
    (specs / "a-infra.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(UsageError, match=r"cannot read the stack spec .*a-infra.json: is a symbolic link"):
        load_specs(specs)
    (specs / "a-infra.json").unlink()
    (specs / "a-infra.json").mkdir()
    with pytest.raises(UsageError, match=r"a-infra.json: it is a directory"):
        load_specs(specs)
    (specs / "a-infra.json").rmdir()
    os.mkfifo(specs / "a-infra.json")
    code = ("import sys; from pathlib import Path\nfrom reconciler.apply.specs import load_specs\n"
            "from reconciler.problems import UsageError\ntry:\n    load_specs(Path(sys.argv[1]))\n"
            "except UsageError as e:\n    print(e.message)\n")
    r = subprocess.run([sys.executable, "-c", code, str(specs)], capture_output=True, text=True, timeout=120,
                       check=False)
    assert "a-infra.json: it is a FIFO (named pipe)" in r.stdout, r.stdout + r.stderr


def test_health_check_refuses_a_fifo(tmp_path: Path) -> None:
    """node-problem-detector's plugin must answer: a FIFO is "cannot tell" (exit 2) at once, not a hang."""
    os.mkfifo(tmp_path / "smi.xml")
    r = _fleet("health-check", "--nvidia-smi-xml", str(tmp_path / "smi.xml"), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "smi.xml: it is a FIFO (named pipe); Fleet reads only regular files" in r.stdout
    (tmp_path / "link.xml").symlink_to("/dev/zero")
    r = _fleet("health-check", "--nvidia-smi-xml", str(tmp_path / "link.xml"), cwd=tmp_path)
    assert r.returncode == 2 and "is a symbolic link" in r.stdout, r.stdout + r.stderr


# --- item 6: the metrics server ------------------------------------------------------------------------------

def _scrape(port: int) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        body: bytes = r.read()
        return body


def test_metrics_listen_on_loopback_unless_told() -> None:
    server, thread = FleetMetrics().serve(0)
    try:
        assert server.server_address[0] == "127.0.0.1"
        assert b"fleet_" in _scrape(server.server_address[1])
    finally:
        server.shutdown()
        thread.join(timeout=10)


def test_half_open_connections_are_dropped_and_the_server_keeps_serving() -> None:
    """Clients that connect and send nothing: those over the bound are closed at once, the others after the
    timeout; no thread piles up per connection, and a scrape is answered after they are gone. Before, each one
    held a thread for ever (600 of them stopped the server for good)."""
    server, thread = FleetMetrics().serve(0, max_connections=4, timeout_s=0.5)
    port = server.server_address[1]
    threads = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(40)]
    try:
        for s in idle:                      # every one is closed by the server: recv sees the end
            assert s.recv(1024) == b""
        assert threading.active_count() <= threads + 4
        assert b"fleet_" in _scrape(port)
        assert thread.is_alive()
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        thread.join(timeout=10)


def test_reconcile_metrics_address_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path)
    r = _invoke(capsys, ["reconcile", "--repo", str(repo), "--once", "--metrics-port", "9", "--metrics-address",
                                 "example.com"])
    assert r.exit_code == 2 and "'example.com' is not an IP address" in r.output
    r = _invoke(capsys, ["reconcile", "--repo", str(repo), "--once", "--metrics-address", "0.0.0.0"])
    assert r.exit_code == 2 and "--metrics-address needs --metrics-port" in r.output


def test_the_deployed_reconciler_serves_metrics_to_prometheus() -> None:
    """In the pod, Prometheus scrapes the pod's address: the manifest says so explicitly."""
    [deployment] = [o for o in deploy.management("ghcr.io/org/fleet:1", "https://example.com/org/fleet.git", "main")
                    if o["kind"] == "Deployment"]
    [main] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "reconciler"]
    args = main["args"]
    assert args[args.index("--metrics-address") + 1] == "0.0.0.0" and "--metrics-port" in args


# --- item 6: reconcile-manifests' inputs --------------------------------------------------------------------

@pytest.mark.parametrize(("option", "value", "message"), [
    ("--image", "ghcr.io/org/fleet:1\nkind: Secret", "is not a valid image reference"),
    ("--image", "ghcr.io/org/fleet", "names no tag or digest"),
    ("--git-repo", "ext::sh -c id", "has whitespace or control characters"),
    ("--git-repo", "ext::sh%20-c%20id", "uses the `ext` transport"),
    ("--git-repo", "file:///etc", "uses the `file` transport"),
    ("--git-repo", "https://user:token@github.com/org/fleet.git", "carries credentials"),
    ("--git-repo", "https://github.com/org/fleet.git?x=1", "has a query or fragment"),
    ("--git-repo", "-oProxyCommand=x@host:repo", "is not a URL"),
    ("--branch", "main..other", "is not a valid git branch name"),
    ("--branch", "--upload-pack=x", "is not a valid git branch name"),
    ("--branch", "main\nx", "is not a valid git branch name"),
])
def test_reconcile_manifests_refuses_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str,
                                                 value: str, message: str) -> None:
    repo = _repo(tmp_path)
    args = {"--image": "ghcr.io/org/fleet:0.1.0", "--git-repo": "git@github.com:org/fleet.git", "--branch": "main"}
    args[option] = value
    r = _invoke(capsys, ["reconcile-manifests", "--repo", str(repo), "--out", str(tmp_path / "out"),
                                 *[x for kv in args.items() for x in kv]])
    assert r.exit_code == 2, r.output
    assert f"Invalid value for '{option}'" in r.output and message in r.output
    assert not (tmp_path / "out").exists()


def test_reconcile_manifests_takes_good_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path)
    for url, branch in [("https://github.com/org/fleet.git", "main"), ("git@github.com:org/fleet.git", "release/v2"),
                        ("ssh://git@example.com:2222/org/fleet.git", "main")]:
        r = _invoke(capsys, ["reconcile-manifests", "--repo", str(repo), "--out", str(tmp_path / "out"),
                                     "--image", "ghcr.io/org/fleet@sha256:" + "a" * 64, "--git-repo", url,
                                     "--branch", branch])
        assert r.exit_code == 0, r.output
        assert f"--repo={url}" in (tmp_path / "out" / "management.yaml").read_text()


# --- item 6: the trace importer -----------------------------------------------------------------------------

HEADER = (",name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
          "scheduled_time\n")


@pytest.mark.parametrize(("row", "field", "message"), [
    ("0,a,1000,100,inf,1000,,LS,Running,0,100,10", "num_gpu", "`num_gpu` is 'inf', not a finite number"),
    ("0,b,1000,100,1e300,1000,,LS,Running,0,100,10", "num_gpu", "`num_gpu` is 1e300, over 100,000 GPUs"),
    ("0,c,1000,100,1,1000,,LS,Running,0,inf,10", "deletion_time", "`deletion_time` is 'inf', not a finite number"),
    ("0,d,1000,100,1,1000,,LS,Running,-inf,100,10", "creation_time", "`creation_time` is '-inf'"),
    ("0,e,1000,100,1,1000,,LS,Running,0,1e300,10", "deletion_time", "over 315,360,000 seconds"),
    ("0,f,1000,100,1,1000,,LS,Running,-5,100,10", "creation_time", "`creation_time` is -5, below 0"),
    ("0,g,1000,100,1,1000,,LS,Running,0,100,soon", "scheduled_time", "`scheduled_time` is 'soon', not a number"),
])
def test_the_importer_locates_non_finite_and_absurd_values(row: str, field: str, message: str) -> None:
    v = check(base_files(), load_catalog())
    good = "1,ok,1000,100,1,1000,,LS,Running,0,3600,0"
    got = import_pods("pods.csv", HEADER + row + "\n" + good + "\n", v)
    [p] = got.problems
    assert (p.path, p.line, p.field) == ("pods.csv", 2, field) and message in p.message and p.hint
    assert [json.loads(x)["name"] for x in got.lines] == ["ok"]


def test_the_importer_command_reports_inf_as_a_located_error(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path)
    (tmp_path / "pods.csv").write_text(HEADER + "0,a,1000,100,inf,1000,,LS,Running,0,100,10\n")
    r = _invoke(capsys, ["simulate", "--repo", str(repo), "--import-alibaba", str(tmp_path / "pods.csv"),
                                 "--out", str(tmp_path / "trace.jsonl")])
    assert r.exit_code == 1, r.output
    assert "pods.csv:2:1: error: `num_gpu` is 'inf', not a finite number [num_gpu]\n" in r.output
    assert "has errors: nothing was imported" in r.output and "internal error" not in r.output
    assert not (tmp_path / "trace.jsonl").exists()
    os.mkfifo(tmp_path / "fifo.csv")
    ran = _fleet("simulate", "--repo", str(repo), "--import-alibaba", str(tmp_path / "fifo.csv"), cwd=tmp_path)
    assert ran.returncode == 2 and "fifo.csv: it is a FIFO (named pipe)" in ran.stderr, ran.stderr


def test_the_importer_locates_a_field_over_the_csv_limit() -> None:
    """Found by a hunt for tracebacks: `csv.Error: field larger than field limit (131072)` was an internal error."""
    v = check(base_files(), load_catalog())
    got = import_pods("pods.csv", HEADER + "0,a,1000,100,1,1000," + "V" * 200_000 + ",LS,Running,0,100,10\n", v)
    [p] = got.problems
    assert (p.path, p.line) == ("pods.csv", 2) and "field larger than field limit" in p.message and p.hint
    assert got.lines == []


@pytest.mark.parametrize(("line", "message"), [
    ("[" * 100_000 + "]" * 100_000, "this line is not valid JSON: nested too deeply"),
    ('{"submit_at_minutes": ' + "9" * 5000 + "}", "this line is not valid JSON: a number too long to read"),
])
def test_a_trace_line_python_cannot_parse_is_a_located_error(line: str, message: str) -> None:
    """Found by a hunt for tracebacks: a RecursionError and a ValueError escaped as internal errors."""
    from reconciler.simulate.trace import parse_lines

    _, problems, _ = parse_lines("t.jsonl", (line + "\n").encode())
    [p] = problems
    assert (p.path, p.line, p.message) == ("t.jsonl", 1, message) and p.hint
