"""Benchmark: `fleet cost --history N` over a long history (target: 1,000 commits of the example repository
in < 30 s cold, issue 22, and < 5 s warm).

    python bench/bench_history.py [--commits 1000] [--keep DIR]

Builds a temporary git repository holding the example fleet (fleet/, policies/, jobs/ of this checkout) and
then `--commits - 1` more commits through `git fast-import` (fast and deterministic: fixed dates); each commit
changes one thing, in turn a job's `duration_hours`, a team's quota (`nominal` of one accelerator, raised by
8 chips or GPUs) or a job's `duration_hours` again. Then runs the real command as a subprocess twice:
cold (no .fleet/cache) and warm (the cache from the cold run). One JSON line per run; the first names the
machine. The 2-core machine is shared and noisy: compare runs, not single numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def data_files() -> dict[str, bytes]:
    out = {}
    for root in ("fleet", "policies", "jobs"):
        for p in sorted((ROOT / root).rglob("*")):
            if p.is_file():
                out[p.relative_to(ROOT).as_posix()] = p.read_bytes()
    return out


def history_stream(files: dict[str, bytes], commits: int) -> bytes:
    """A fast-import stream: the example, then one small change per commit (valid YAML every time)."""
    jobs = sorted(p for p in files if p.startswith("jobs/"))
    state = dict(files)
    parts: list[bytes] = []

    def blob(data: bytes) -> bytes:
        return b"data %d\n" % len(data) + data + b"\n"

    for i in range(commits):
        if i == 0:
            changed, msg = dict(files), "example fleet"
        elif i % 3 == 1:
            teams = state["policies/teams.yaml"].decode()
            matches = list(re.finditer(r"\{nominal: (\d+)", teams))
            m = matches[i % len(matches)]
            teams = teams[: m.start(1)] + str(int(m.group(1)) + 8) + teams[m.end(1):]
            changed, msg = {"policies/teams.yaml": teams.encode()}, f"raise quota {i % len(matches)}"
        else:
            path = jobs[i % len(jobs)]
            text = re.sub(r"(?m)^duration_hours:.*\n", "", state[path].decode())
            changed, msg = {path: (text + f"duration_hours: {1 + i % 500}\n").encode()}, f"retime {path}"
        state.update(changed)
        header = (f"commit refs/heads/main\nmark :{i + 1}\ncommitter Bench <bench@example.com> {1_700_000_000 + i * 60}"
                  f" +0000\n").encode() + blob(msg.encode())
        if i:
            header += f"from :{i}\n".encode()
        parts.append(header + b"".join(b"M 100644 inline " + p.encode() + b"\n" + blob(d) for p, d in changed.items()))
    return b"".join(parts) + b"done\n"


def run(repo: Path, commits: int) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the command and its worker processes, points)."""
    env = {k: v for k, v in os.environ.items() if k != "FLEET_DEBUG"}
    t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", "cost", "--history",
                        str(commits), "--format", "json"], cwd=repo, env=env, capture_output=True, text=True,
                       check=False)
    elapsed, after = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"fleet cost failed: {r.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return elapsed, cpu, len(json.loads(r.stdout)["history"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--keep", type=Path, default=None, help="build the repository here and keep it")
    args = ap.parse_args()
    print(json.dumps({"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()}))
    tmp = Path(tempfile.mkdtemp(prefix="fleet-history-"))
    repo = args.keep or tmp / "repo"
    try:
        repo.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        t = time.perf_counter()
        subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=history_stream(data_files(), args.commits),
                       check=True)
        subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=repo, check=True)
        print(json.dumps({"stage": "build repository", "commits": args.commits,
                          "seconds": round(time.perf_counter() - t, 2)}))
        shutil.rmtree(repo / ".fleet", ignore_errors=True)
        for stage in ("cold", "warm"):
            seconds, cpu, points = run(repo, args.commits)
            print(json.dumps({"stage": stage, "commits": points, "seconds": round(seconds, 2), "cpu_s": round(cpu, 2),
                              "load_average_1m": round(os.getloadavg()[0], 1)}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
