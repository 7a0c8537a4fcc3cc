"""A real single-node Slurm for the tests: Debian's munged, slurmctld, slurmd and slurmrestd (22.05, OpenAPI
v0.0.38), all configured in a temporary directory, on free loopback ports.

- one node `fleetnode1` with 2 CPUs and a GPU GRES of 2 devices backed by placeholder files (a GPU GRES without
  `File=` is dropped by slurmd); two partitions over it, `low` (PriorityTier=1) and `high` (PriorityTier=10),
  with partition preemption (PreemptType=preempt/partition_prio, PreemptMode=REQUEUE): a `high` job requeues
  the `low` jobs in its way, their `restart_cnt` raised;
- JWT authentication beside munge (AuthAltTypes=auth/jwt with a key generated here), so slurmrestd listens on
  127.0.0.1 TCP with rest_auth/jwt; the tests mint HS256 tokens with that key (`token`);
- slurmrestd refuses to run as root: it is started as root and drops to the `slurm` user (`-u/-g`, the
  user Debian's packages create; .ci/system-tools creates it where missing);
- configured around what a container cannot do: no cgroups (proctrack/linuxproc, task/none,
  jobacct_gather/none), no accounting database (accounts and QOS are then not enforced, so a job's account
  and QOS are not enforced, and the QOS Fleet sends is not kept), and fast scheduling (backfill every second;
  `cred_expire=5`: a requeued job waits that long, not the default 120 s, before it may start again).
The daemons need root (slurmd starts jobs as their user); elsewhere they run through `sudo -n`.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BINARIES = ("munged", "slurmctld", "slurmd", "slurmrestd", "scontrol")
USER = "slurm"
NODE = "fleetnode1"


def missing() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None and not Path(f"/usr/sbin/{b}").exists()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class Slurm:
    dir: Path
    rest_url: str
    key: bytes
    procs: list[subprocess.Popen[bytes]]

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    def token(self, user: str = USER, lifespan_s: int = 3600) -> str:
        """An HS256 JWT for `user` signed with the cluster's key, as `scontrol token` makes them."""
        now = int(time.time())
        head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        body = _b64(json.dumps({"exp": now + lifespan_s, "iat": now, "sun": user}).encode())
        sig = _b64(hmac.new(self.key, f"{head}.{body}".encode(), hashlib.sha256).digest())
        return f"{head}.{body}.{sig}"

    def rest(self, method: str, path: str, body: Any = None) -> Any:
        """slurmrestd as another Slurm user would call it (not through Fleet)."""
        req = urllib.request.Request(f"{self.rest_url}/slurm/v0.0.38{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"X-SLURM-USER-TOKEN": self.token(), "X-SLURM-USER-NAME": USER,
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def jobs(self) -> list[dict[str, Any]]:
        return list(self.rest("GET", "/jobs/")["jobs"])

    def scontrol(self, *args: str) -> str:
        """`scontrol ARGS` as the Slurm admin (root); fails with its message."""
        done = subprocess.run([*_root(), "scontrol", *args], env={**os.environ, "SLURM_CONF": str(self.conf)},
                              check=False, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"scontrol {' '.join(args)}: {done.stderr or done.stdout}"
        return done.stdout

    def wait(self, what: str, test: Any, timeout_s: float = 30.0) -> Any:
        """Poll `test()` until it returns something truthy (every 0.2 s), else fail naming `what`."""
        end = time.monotonic() + timeout_s
        while True:
            got = test()
            if got:
                return got
            if time.monotonic() > end:
                logs = "\n".join((self.dir / "log" / n).read_text()[-1500:] for n in ("slurmctld.log", "slurmd.log")
                                 if (self.dir / "log" / n).exists())
                raise AssertionError(f"Slurm: {what} not seen within {timeout_s:g} s\n{logs}")
            time.sleep(0.2)


def _root() -> list[str]:
    return [] if os.geteuid() == 0 else ["sudo", "-n", "-E"]


def _config(d: Path, ports: dict[str, int]) -> str:
    host = socket.gethostname().split(".")[0]
    return f"""\
ClusterName=fleettest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports['ctld']}
SlurmdPort={ports['slurmd']}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock,cred_expire=5
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key={d}/jwt.key
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_min_interval=100000
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=1
MinJobAge=600
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=5
InactiveLimit=0
KillWait=1
MpiDefault=none
NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={host} CPUs=2 RealMemory=1000 Gres=gpu:2 State=UNKNOWN
PartitionName=low Nodes={NODE} Default=YES PriorityTier=1 MaxTime=INFINITE State=UP
PartitionName=high Nodes={NODE} PriorityTier=10 MaxTime=INFINITE State=UP
"""


@contextlib.contextmanager
def slurm() -> Iterator[Slurm]:
    """The running cluster, torn down (jobs cancelled, daemons stopped, files removed) on exit. Its directory is
    a fresh one under /tmp, readable by the `slurm` user slurmrestd runs as (pytest's are private to root)."""
    d = Path(tempfile.mkdtemp(prefix="fleet-slurm-"))
    d.chmod(0o755)
    for sub in ("state", "spool", "dev", "log"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    for i in range(2):
        (d / "dev" / f"gpu{i}").touch()          # placeholder devices: a GRES needs a File= to be kept
    key = secrets.token_bytes(32)
    for name, data in (("jwt.key", key), ("munge.key", secrets.token_bytes(1024))):
        (d / name).write_bytes(data)
        (d / name).chmod(0o600)
    ports = {"ctld": _free_port(), "slurmd": _free_port(), "rest": _free_port()}
    (d / "slurm.conf").write_text(_config(d, ports))
    (d / "gres.conf").write_text(f"NodeName={NODE} Name=gpu File={d}/dev/gpu[0-1]\n")
    (d / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")     # read, but unused: no cgroup plugin is configured
    env = {**os.environ, "SLURM_CONF": str(d / "slurm.conf")}
    run = [*_root()]
    procs: list[subprocess.Popen[bytes]] = []
    cluster = Slurm(d, f"http://127.0.0.1:{ports['rest']}", key, procs)
    try:
        subprocess.run([*run, "munged", "-f", f"--key-file={d}/munge.key", f"--socket={d}/munge.sock",
                        f"--pid-file={d}/munged.pid", f"--log-file={d}/log/munged.log", f"--seed-file={d}/munge.seed"],
                       check=True, timeout=30, env=env)
        subprocess.run([*run, "slurmctld", "-i", "-f", str(d / "slurm.conf")], check=True, timeout=30, env=env)
        subprocess.run([*run, "slurmd", "-f", str(d / "slurm.conf"), "-N", NODE], check=True, timeout=30, env=env)
        with open(d / "log" / "slurmrestd.log", "wb") as log:
            procs.append(subprocess.Popen([*run, "slurmrestd", "-f", str(d / "slurm.conf"), "-a", "rest_auth/jwt",
                                           "-s", "openapi/v0.0.38", "-u", USER, "-g", USER,
                                           f"127.0.0.1:{ports['rest']}"],
                                          env={**env, "SLURM_JWT": "daemon"}, stdout=log, stderr=log))

        def node_idle() -> bool:
            try:
                nodes = cluster.rest("GET", "/nodes/")["nodes"]
            except OSError:
                return False
            return any(n["name"] == NODE and n["state"] == "idle" for n in nodes)

        cluster.wait("the node idle and slurmrestd answering", node_idle)
        yield cluster
    finally:
        with contextlib.suppress(Exception):     # every job ended before the daemons stop: no step outlives them
            subprocess.run([*run, "scancel", "--full", "-w", NODE], env=env, timeout=10, capture_output=True)
            cluster.wait("every job ended", lambda: not any(j["job_state"] in ("RUNNING", "COMPLETING")
                                                            for j in cluster.jobs()), timeout_s=15)
        for p in procs:
            p.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        pids = []
        for pidfile in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
            with contextlib.suppress(OSError, ValueError):
                pids.append(int((d / pidfile).read_text().split()[0]))
                subprocess.run([*run, "kill", str(pids[-1])], timeout=10, capture_output=True)
        end = time.monotonic() + 15      # they save state as they exit: remove the directory after that
        while any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in pids) and time.monotonic() < end:
            time.sleep(0.1)
        subprocess.run([*run, "rm", "-rf", str(d)], timeout=30, capture_output=True)


def _state(pid: int) -> str:
    """The process state letter of /proc/PID/stat (Z: a zombie, which has exited), or '' when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"
