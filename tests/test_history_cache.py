"""Issue 10, class 5: `fleet cost --history`'s cache is never trusted or hung on, is keyed by Fleet's code, and
neither a read-only cache, one bad commit nor Ctrl-C in the parallel part fails the report or hangs."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reconciler import history_cache as history
from reconciler.catalog import load_catalog

from builders import job, with_files

ROOT = Path(__file__).resolve().parents[1]


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True,
                          text=True).stdout


def commit(repo: Path, files: dict[str, str | bytes | None], message: str) -> None:
    for rel, data in files.items():
        path = repo / rel
        if data is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def make_repo(path: Path, extra_commits: int = 2) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    commit(path, dict(with_files({})), "base")
    for i in range(extra_commits):
        commit(path, {"jobs/vision/extra.yaml": job("extra", body=f"duration_hours: {i + 1}\n")}, f"c{i}")
    return path


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))   # a runaway read fails, not the machine


def _as_from_a_terminal() -> None:
    """The child as a shell in a terminal starts it: SIGINT at its default, whatever the test runner inherited
    (a runner started in the background or by a service may ignore SIGINT, and an ignored SIGINT stays ignored
    across exec: Python then installs no KeyboardInterrupt handler, and Ctrl-C is meant to do nothing)."""
    _limit_memory()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def fleet(*args: str, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None,
          ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in (env or os.environ).items() if k != "FLEET_DEBUG"}
    return subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, check=False, timeout=timeout,
                          preexec_fn=_limit_memory)


def history_json(repo: Path, n: int = 3) -> list[dict[str, object]]:
    r = fleet("cost", "--history", str(n), "--format", "json", cwd=repo)
    assert r.returncode == 0, r.stderr
    points: list[dict[str, object]] = json.loads(r.stdout)["history"]
    return points


def poison(entry: Path, kind: str) -> None:
    entry.unlink()
    if kind == "deep":
        entry.write_text("[" * 30_000 + "]" * 30_000)
    elif kind == "directory":
        (entry / "inside").mkdir(parents=True)
    elif kind == "fifo":
        os.mkfifo(entry)
    elif kind == "dev-zero":
        entry.symlink_to("/dev/zero")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("hist") / "r")


@pytest.mark.parametrize("kind", ["deep", "directory", "fifo", "dev-zero"])   # `Infinity`: test_cost.py
def test_a_poisoned_cache_entry_is_recomputed_never_trusted_or_hung_on(repo: Path, tmp_path: Path,
                                                                      kind: str) -> None:
    work = tmp_path / "r"
    shutil.copytree(repo, work, symlinks=True, ignore=shutil.ignore_patterns(".fleet"))
    fresh = history_json(work)
    entries = sorted((work / ".fleet" / "cache" / "history").glob("*.json"))
    assert len(entries) == 3                      # base, c0 and c1: three different data trees
    for entry in entries:
        poison(entry, kind)
    assert history_json(work) == fresh


def test_a_linked_fleet_folder_is_not_written_through(repo: Path, tmp_path: Path) -> None:
    work, outside = tmp_path / "r", tmp_path / "outside"
    shutil.copytree(repo, work, symlinks=True, ignore=shutil.ignore_patterns(".fleet"))
    outside.mkdir()
    fresh = history_json(repo)
    (work / ".fleet").symlink_to(outside)
    assert history_json(work) == fresh
    assert list(outside.iterdir()) == []


def test_the_cache_key_changes_with_fleets_code(tmp_path: Path) -> None:
    """A copy of the package with one changed comment keys every point differently (a fixed version string
    once kept serving points that an older planner computed)."""
    def key(package_root: Path) -> str:
        code = ("from reconciler import history_cache as history; "
                "print(history.input_key(('a', 'b', 'c'), b'catalog'))")
        return subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(package_root)},
                              cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()

    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "reconciler", copy / "reconciler", ignore=shutil.ignore_patterns("__pycache__"))
    assert key(copy) == key(ROOT)
    with open(copy / "reconciler" / "plan" / "planner.py", "a") as f:
        f.write("# a change to the planner\n")
    assert key(copy) != key(ROOT)


def test_a_read_only_cache_still_gives_the_report(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 ) -> None:
    """No file or folder can be created (EROFS, as on a read-only mount): the points are computed, not cached."""
    work = tmp_path / "r"
    shutil.copytree(repo, work, symlinks=True, ignore=shutil.ignore_patterns(".fleet"))
    expected = history.collect(repo, 3, load_catalog())
    real_open = os.open

    def no_create_open(path: object, flags: int, *args: object, **kw: object) -> int:
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kw)  # type: ignore[arg-type]

    def no_mkdir(path: object, *args: object, **kw: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(os, "open", no_create_open)
    monkeypatch.setattr(os, "mkdir", no_mkdir)
    assert history.collect(work, 3, load_catalog()) == expected
    assert not (work / ".fleet").exists()


def test_one_unreadable_commit_is_an_error_point_not_a_failed_report(tmp_path: Path) -> None:
    """Commit c1 adds a file that c2 deletes; its blob is then lost from the clone (as in a partial clone)."""
    work = make_repo(tmp_path / "r", extra_commits=1)
    commit(work, {"jobs/vision/lost.yaml": job("lost")}, "adds lost")
    blob = git(work, "rev-parse", "HEAD:jobs/vision/lost.yaml").strip()
    commit(work, {"jobs/vision/lost.yaml": None}, "deletes lost")
    (work / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    points = history_json(work, 4)
    assert [(p["subject"], p["errors"]) for p in points] == [
        ("base", 0), ("c0", 0), ("adds lost", 1), ("deletes lost", 0)]
    assert [p["errors"] for p in history_json(work, 4)] == [0, 0, 1, 0]     # the error point is not cached


def _spawned_workers(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    out = []
    for child in children:
        try:
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                out.append(int(child))
        except OSError:
            continue
    return out


LONG = 8 * history.PARALLEL_FROM
"""Commits of the long history: enough work that the workers are still busy when the test interrupts them."""


@pytest.fixture(scope="module")
def long_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("long") / "r", extra_commits=LONG - 1)


def _start_history(work: Path) -> tuple[subprocess.Popen[str], list[int]]:
    """`fleet cost --history LONG` on a cold cache, in its own process group, once two workers run."""
    shutil.rmtree(work / ".fleet", ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "FLEET_DEBUG"}
    proc = subprocess.Popen([sys.executable, "-c", "from reconciler.cli import main; main()", "cost", "--history",
                             str(LONG), "--format", "json"], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_as_from_a_terminal)
    deadline = time.monotonic() + 60
    while len(_spawned_workers(proc.pid)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    workers = _spawned_workers(proc.pid)
    if len(workers) < 2:
        proc.kill()
        proc.communicate()
        pytest.skip("no worker processes were started (one CPU, or it finished first)")
    return proc, workers


def _finish(proc: subprocess.Popen[str], what: str) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"still running 60 s after {what}")


def _signal_state(pid: int) -> str:
    """Each thread's blocked and ignored signal masks (/proc), for a failure message."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        with contextlib.suppress(OSError):
            fields = [f for f in (task / "status").read_text().splitlines() if f.startswith(("SigBlk", "SigIgn"))]
            lines.append(f"{task.name} {(task / 'comm').read_text().strip()}: {' '.join(fields)}")
    return "; ".join(lines)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to see the workers")
def test_ctrl_c_in_the_parallel_part_exits_at_once_without_worker_tracebacks(long_repo: Path) -> None:
    """SIGINT to the whole process group, as a terminal sends it, at three moments of the workers' run.

    An attempt counts only if no point was cached yet when the signal went: the points are written after the
    parallel part, so the run was still in it (or before it). A run already past it may finish and exit 0,
    which is right: its report is whole (possibly what failed CI twice; not proven)."""
    interrupted = 0
    cached = long_repo / ".fleet" / "cache" / "history"
    for attempt in range(3):
        proc, workers = _start_history(long_repo)
        time.sleep(0.25 * attempt)
        state = _signal_state(proc.pid)
        if proc.poll() is not None or any(cached.glob("*.json")):   # past the parallel part: says nothing
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            continue
        interrupted += 1
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        _, err = _finish(proc, "Ctrl-C")
        assert time.monotonic() - sent < 10
        assert proc.returncode == 130, f"stderr {err!r}; signal masks when it was sent: {state}"
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        time.sleep(0.5)
        assert [w for w in workers if Path(f"/proc/{w}").exists()
                and b"spawn_main" in Path(f"/proc/{w}/cmdline").read_bytes()] == [], "workers left running"
    if not interrupted:
        pytest.skip("every run was past its parallel part before the signal could be sent")


def test_blocking_sigint_while_workers_start_gives_back_the_callers_mask() -> None:
    """`_sigint_blocked` gives back the mask it found: a caller that blocked SIGINT itself keeps it blocked."""
    def blocked() -> bool:
        return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert not blocked()
    with history._sigint_blocked():
        assert blocked()
    assert not blocked()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with history._sigint_blocked():
            pass
        assert blocked()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to see the workers")
def test_a_killed_worker_gives_error_points_not_a_hang_or_a_failed_report(long_repo: Path) -> None:
    """A worker process that dies (the OOM killer, a crash in a C extension) loses only its points."""
    proc, workers = _start_history(long_repo)
    os.kill(workers[0], signal.SIGKILL)
    out, err = _finish(proc, "a worker died")
    assert proc.returncode == 0, err
    errors = [p["errors"] for p in json.loads(out)["history"]]
    assert len(errors) == LONG and 1 in errors


class _PoolBrokenWhileSubmitting:
    """A process pool whose worker died after the first chunk was submitted: every later submit raises, as
    `ProcessPoolExecutor.submit` does once its manager thread has seen the dead worker."""

    def __init__(self) -> None:
        self.submitted = 0
        self._processes: dict[int, object] = {}

    def submit(self, fn: object, chunk: list[history.Job]) -> object:
        from concurrent.futures import Future
        from concurrent.futures.process import BrokenProcessPool
        if self.submitted:
            raise BrokenProcessPool("A child process terminated abruptly")
        self.submitted += 1
        future: Future[list[None]] = Future()
        future.set_result([None] * len(chunk))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def test_a_pool_broken_during_submit_gives_error_points_not_an_internal_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On a loaded machine a worker can die while the others are still being started; CI once failed with
    `internal error: BrokenProcessPool` because the submit itself raised."""
    pool = _PoolBrokenWhileSubmitting()
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(history, "_pool", lambda workers, catalog: pool)
    jobs: list[history.Job] = [(f"{i:040x}", "2026-01-01", f"c{i}", None) for i in range(4 * history.PARALLEL_FROM)]
    assert history._compute(jobs, load_catalog()) == [None] * len(jobs)
    assert pool.submitted == 1


class _PoolThatMissedADeadWorker:
    """A process pool whose manager thread missed a worker killed just after it started (it waits on the workers
    it knew of when it last woke; the dead one took its chunks with it): the futures never complete and nothing
    raises, but the dead worker's exit code is there to see. Reproduced on this machine about once in 27 runs of
    `test_a_killed_worker_gives_error_points_not_a_hang_or_a_failed_report` under load (CI hung on it)."""

    class _Process:
        exitcode: int | None = None

        def terminate(self) -> None:
            self.exitcode = -15

    def __init__(self) -> None:
        dead, alive = self._Process(), self._Process()
        dead.exitcode = -9
        self._processes = {1: dead, 2: alive}
        self.shut: list[bool] = []
        self.sizes: list[int] = []

    def submit(self, fn: object, chunk: list[history.Job]) -> object:
        from concurrent.futures import Future
        future: Future[list[str]] = Future()     # the dead worker's never completes; the live one's are done
        if self.sizes:
            future.set_result(["done"] * len(chunk))
        self.sizes.append(len(chunk))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self.shut.append(wait)


def test_a_dead_worker_the_pool_missed_gives_error_points_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    pool = _PoolThatMissedADeadWorker()
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(history, "_pool", lambda workers, catalog: pool)
    jobs: list[history.Job] = [(f"{i:040x}", "2026-01-01", f"c{i}", None) for i in range(4 * history.PARALLEL_FROM)]
    got: list[object] = []
    worker = threading.Thread(target=lambda: got.append(history._compute(jobs, load_catalog())), daemon=True)
    worker.start()
    worker.join(timeout=20)
    first = pool.sizes[0]      # the dead worker's points are error points; what the live one finished counts
    assert got == [[None] * first + ["done"] * (len(jobs) - first)], "still waiting on a pool whose worker died"
    assert pool._processes[2].exitcode == -15 and pool.shut == [False]    # the others stopped, not waited for


def test_chunks_cover_every_point_once_long_first_and_short_last() -> None:
    for n in (1, 5, 64, 65, 128, 1000, 1001):
        for workers in (2, 3, 8):
            sizes = history._chunk_sizes(n, workers)
            assert sum(sizes) == n and all(s > 0 for s in sizes)
            assert sizes == sorted(sizes, reverse=True)
            assert sizes[-1] <= history.LAST_CHUNK
    assert len(history._chunk_sizes(1000, 2)) == 23


def test_a_ctrl_c_a_finalizer_swallowed_still_stops_the_command_with_130() -> None:
    """Python swallows an exception raised in `__del__`, a KeyboardInterrupt too: CI saw `fleet cost --history`
    run on after a Ctrl-C that landed in GitPython's `_CatFileContentStream.__del__`, print its traceback and exit
    1. `cli.main` sends such a Ctrl-C again, and the command stops with 130, without a traceback."""
    script = """
import sys, time
import click
from reconciler.cli import cli, main

@cli.command("finalizer-then-work")
def work() -> None:
    class Holder:
        def __del__(self) -> None:
            raise KeyboardInterrupt     # what a Ctrl-C does when it arrives while a finalizer runs
    Holder()
    time.sleep(20)
    click.echo("ran on")

main(["finalizer-then-work"])
"""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          preexec_fn=_as_from_a_terminal)      # CI may start the suite with SIGINT ignored
    assert (proc.returncode, proc.stdout) == (130, ""), proc.stderr
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr
    assert time.monotonic() - started < 15
