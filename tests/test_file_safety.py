"""Issue 10, classes 3, 4 and 8: what Fleet reads (nothing outside the repository, no special file, sizes
before bytes, git entries by mode), how it writes (one atomic writer no planted link redirects, render's
--out checks) and odd revisions (`--rev ""`, `--base HEAD~1` in a shallow clone)."""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.catalog import load_catalog
from reconciler.cli import cli, main
from reconciler.load import Unreadable
from reconciler.pipeline import check
from reconciler.safeio import RENDER_MANIFEST
from reconciler.sources import read_revision, read_worktree
from reconciler.yamlio import MAX_FILE_BYTES

from builders import base_files, job, with_files

CAT = load_catalog()


def write(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def git(root: Path, *args: str, stdin: bytes | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, input=stdin,
                          env=env).stdout.decode()


def repo_at(root: Path, files: dict[str, bytes]) -> Path:
    write(root, files)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def problems_at(files: dict[str, bytes], path: str) -> list[str]:
    return [p.message for p in check(files, CAT).problems if p.path == path]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLEET_DEBUG"}
    return subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, check=False, timeout=120)


# --- class 3: reading ------------------------------------------------------------------------------------


@pytest.mark.parametrize("root", ["jobs", "fleet", "policies"])
def test_a_data_folder_that_is_a_link_is_not_followed_out_of_the_repository(tmp_path: Path, root: str) -> None:
    outside = write(tmp_path / "outside", {"vision/big.yaml": job("big").encode(),
                                           "clusters/x.yaml": b"name: x\n", "teams.yaml": b"teams: []\n"})
    files = {k: v for k, v in base_files().items() if not k.startswith(root + "/")}
    repo = write(tmp_path / "repo", files)
    (repo / root).symlink_to(outside)
    read = read_worktree(repo)
    assert [k for k in read if k.startswith(root + "/")] == [f"{root}/"], "files were read through the link"
    assert isinstance(read[f"{root}/"], Unreadable)
    r = CliRunner().invoke(cli, ["validate", "--repo", str(repo)])
    assert r.exit_code == 1
    assert f"{root}/:1:1: error: is a symbolic link (to '{outside}')" in r.output
    assert "hint: replace the link" in r.output


def test_links_fifos_and_devices_inside_the_data_folders_are_located_errors_never_opened(tmp_path: Path) -> None:
    repo = write(tmp_path / "repo", base_files())
    secret = write(tmp_path / "secret", {"s.yaml": job("leak").encode()}) / "s.yaml"
    (repo / "jobs" / "vision" / "leak.yaml").symlink_to(secret)
    os.mkfifo(repo / "jobs" / "vision" / "pipe.yaml")              # a plain open would block forever
    (repo / "jobs" / "vision" / "zero.yaml").symlink_to("/dev/zero")
    (repo / "jobs" / "vision" / "sub").symlink_to(secret.parent)
    files = read_worktree(repo)
    assert "jobs/vision/pipe.yaml" in files and "jobs/vision/sub/s.yaml" not in files
    assert problems_at(files, "jobs/vision/pipe.yaml") == ["is a FIFO (named pipe), not a file (not opened)"]
    for rel in ("leak.yaml", "zero.yaml", "sub"):
        [message] = problems_at(files, f"jobs/vision/{rel}")
        assert message.startswith("is a symbolic link")
    assert [j.name for j in check(files, CAT).loaded.jobs if j.name == "leak"] == []


def test_an_empty_folder_named_like_a_yaml_file_is_a_located_error(tmp_path: Path) -> None:
    repo = write(tmp_path / "repo", base_files())
    (repo / "jobs" / "vision" / "new.yaml").mkdir()            # meant a job file; before, `ok: no problems`
    (repo / "policies" / "slos.yml").mkdir()
    files = read_worktree(repo)
    for rel in ("jobs/vision/new.yaml", "policies/slos.yml"):
        assert problems_at(files, rel) == ["is a folder named like a YAML file; no document is read from it"]
    (repo / "jobs" / "vision" / "new.yaml").rmdir()
    (repo / "jobs" / "vision" / "new").mkdir()                  # a plain empty folder is no document either way
    assert problems_at(read_worktree(repo), "jobs/vision/new") == []


def test_a_file_over_the_limit_is_not_read(tmp_path: Path) -> None:
    """The size comes from stat (work tree) or the object header (git), before a byte is read: a 64 MB
    sparse file and a 2 MB committed blob cost no memory."""
    repo = write(tmp_path / "repo", base_files())
    with open(repo / "jobs" / "vision" / "huge.yaml", "wb") as f:
        f.truncate(64 << 20)
    tracemalloc.start()
    files = read_worktree(repo)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < MAX_FILE_BYTES, peak
    assert problems_at(files, "jobs/vision/huge.yaml") == [
        f"file is {64 << 20:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit (not read)"]
    (repo / "jobs" / "vision" / "huge.yaml").write_bytes(b"#" * (2 * MAX_FILE_BYTES))
    repo_at(repo, {})
    read_revision(repo, "HEAD")       # once before measuring: gitpython's lazy imports allocate about 1 MB
    tracemalloc.start()
    files = read_revision(repo, "HEAD")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < MAX_FILE_BYTES, peak
    assert problems_at(files, "jobs/vision/huge.yaml") == [
        f"file is {2 * MAX_FILE_BYTES:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit (not read)"]


def test_a_committed_jobs_file_with_forged_tree_bytes_gives_no_phantom_job(tmp_path: Path) -> None:
    """`jobs` committed as a file whose bytes are a tree's entries once listed the job they name."""
    repo = repo_at(tmp_path / "repo", {k: v for k, v in base_files().items() if not k.startswith("jobs/")})
    blob = git(repo, "hash-object", "-w", "--stdin", stdin=job("phantom").encode()).strip()
    team_tree = git(repo, "mktree", stdin=f"100644 blob {blob}\tphantom.yaml\n".encode()).strip()
    (repo / "jobs").write_bytes(b"40000 vision\0" + bytes.fromhex(team_tree))
    git(repo, "add", "jobs")
    git(repo, "commit", "-qm", "forged")
    files = read_revision(repo, "HEAD")
    assert not check(files, CAT).loaded.jobs
    assert problems_at(files, "jobs/") == ["is a file, but jobs/ must be a folder"]


def test_git_links_and_submodules_are_located_errors_by_their_mode(tmp_path: Path) -> None:
    repo = repo_at(tmp_path / "repo", base_files())
    (repo / "jobs" / "vision" / "link.yaml").symlink_to("/etc/passwd")
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "add", "-A")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},jobs/vision/sub")
    git(repo, "commit", "-qm", "odd entries")
    files = read_revision(repo, "HEAD")
    assert problems_at(files, "jobs/vision/link.yaml") == [
        "is a symbolic link (to '/etc/passwd'); Fleet reads only regular files and folders inside the repository"]
    assert problems_at(files, "jobs/vision/sub") == [
        "is a git submodule (a commit of another repository), not a file"]
    (repo / "jobs" / "vision" / "link.yaml").unlink()
    git(repo, "rm", "-rq", "--cached", "jobs")
    (repo / "jobs").rename(repo / "real-jobs")
    (repo / "jobs").symlink_to("real-jobs")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "jobs is a link")
    r = CliRunner().invoke(cli, ["validate", "--repo", str(repo), "--rev", "HEAD"])
    assert r.exit_code == 1 and "jobs/:1:1: error: is a symbolic link (to 'real-jobs')" in r.output


def test_check_takes_a_linked_jobs_folder_as_a_change_of_jobs_itself(tmp_path: Path) -> None:
    """Only admins change `jobs/` itself; through the link, the change once looked like another team's files."""
    repo = repo_at(tmp_path / "repo", base_files())
    outside = write(tmp_path / "outside", {"lang/x.yaml": job("x", team="lang").encode(),
                                           "vision/train.yaml": (repo / "jobs/vision/train.yaml").read_bytes()})
    shutil.rmtree(repo / "jobs")
    (repo / "jobs").symlink_to(outside)
    code, output = fleet("check", "--repo", str(repo), "--base", "HEAD", "--author", "mallory")
    assert code == 1 and "internal error" not in output, output
    assert "`mallory` adds jobs/, but only fleet admins change jobs/ outside a team folder" in output, output
    assert "jobs/lang/x.yaml" not in output


def test_an_unreadable_entry_crosses_to_a_worker_process_intact() -> None:
    u = Unreadable("symlink:x", "is a link", "fix it")
    back = pickle.loads(pickle.dumps(u))
    assert (type(back), bytes(back), back.message, back.hint) == (Unreadable, b"symlink:x", "is a link", "fix it")


# --- class 4: writing ------------------------------------------------------------------------------------


def test_a_planted_tmp_link_does_not_redirect_a_write(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "schemas"
    out.mkdir()
    (out / ".job.schema.json.tmp").symlink_to(victim)
    code, output = fleet("schema", "--out", str(out))
    assert code == 0, output
    assert victim.read_text() == "precious"
    assert (out / "job.schema.json").read_text().startswith("{")
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()] == []


@pytest.fixture(scope="module")
def valid_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("valid"), with_files({}))


def fleet(*args: str) -> tuple[int, str]:
    """`main` in this process: its exit code and what it printed (both streams)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            main(list(args))
        except SystemExit as e:
            return int(e.code or 0), buf.getvalue()
    return 0, buf.getvalue()


def render(repo: Path, out: Path, *extra: str) -> tuple[int, str]:
    return fleet("render", "--repo", str(repo), "--out", str(out), *extra)


def test_render_never_writes_or_deletes_through_a_link(tmp_path: Path, valid_repo: Path) -> None:
    out, outside = tmp_path / "out", tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("precious")
    assert render(valid_repo, out)[0] == 0
    cluster = next(p for p in out.iterdir() if p.is_dir() and p.name != "stacks")
    # a manifest entry through a linked folder, and one naming a directory
    (out / "evil").symlink_to(outside)
    (out / "adir").mkdir()
    (out / "adir" / "keep.txt").write_text("mine")
    with open(out / RENDER_MANIFEST, "a") as f:
        f.write("evil/victim.txt\nadir\n../outside/victim.txt\n")
    code, output = render(valid_repo, out)
    assert code == 0, output
    assert (outside / "victim.txt").read_text() == "precious" and (out / "adir" / "keep.txt").exists()
    # a rendered cluster folder replaced by a link out of --out
    for p in sorted(cluster.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    cluster.rmdir()
    cluster.symlink_to(outside)
    code, output = render(valid_repo, out)
    assert code == 2 and "is a symbolic link, which Fleet does not follow" in output
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


def test_render_refuses_a_manifest_that_is_a_link_or_a_directory(tmp_path: Path, valid_repo: Path) -> None:
    outside = tmp_path / "list"
    outside.write_text("victim.txt\n")
    for i, plant in enumerate((lambda m: m.symlink_to(outside), lambda m: m.mkdir())):
        out = tmp_path / f"out{i}"
        out.mkdir()
        plant(out / RENDER_MANIFEST)
        code, output = render(valid_repo, out)
        assert code == 2 and "was not written by `fleet render`" in output, output
        assert "--force" in output


def test_render_refuses_root_home_the_repository_and_a_foreign_folder(tmp_path: Path, valid_repo: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    for out, why in ((Path("/"), "the root folder"), (home, "your home folder"),
                     (valid_repo, "the repository")):
        code, output = render(valid_repo, out, "--force")
        assert code == 2 and f"is {why}" in output, output
    assert sorted(p.name for p in home.iterdir()) == ["notes"]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work")
    code, output = render(valid_repo, foreign)
    assert code == 2 and "is not empty and was not written by `fleet render`" in output
    assert sorted(p.name for p in foreign.iterdir()) == ["thesis.tex"]
    code, output = render(valid_repo, foreign, "--force")
    assert code == 0 and (foreign / RENDER_MANIFEST).is_file() and (foreign / "thesis.tex").exists()


def test_codeowners_is_not_written_through_a_linked_github_folder(tmp_path: Path, valid_repo: Path) -> None:
    repo = write(tmp_path / "repo", with_files({}))
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / ".github").symlink_to(outside)
    code, output = fleet("codeowners", "--repo", str(repo))
    assert code == 2 and ".github: is a symbolic link" in output, output
    assert list(outside.iterdir()) == []


# --- class 8: odd revisions ------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["validate", "--rev", ""], ["plan", "--base", ""], ["cost", "--base", " "],
                                  ["explain", "vision/train", "--base", ""],
                                  ["check", "--base", "", "--author", "a"]])
def test_an_empty_revision_is_a_usage_error(args: list[str], valid_repo: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main([*args, "--repo", str(valid_repo)])
    assert e.value.code == 2
    assert "is empty: name a git revision" in capsys.readouterr().err


def test_base_head_1_in_a_shallow_clone_says_fetch_it_first(tmp_path: Path) -> None:
    src = repo_at(tmp_path / "src", with_files({}))
    (src / "jobs" / "vision" / "extra.yaml").write_text(job("extra"))
    git(src, "add", "-A")
    git(src, "commit", "-qm", "second")
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{src}", str(tmp_path / "shallow")], check=True)
    for args in (["plan", "--base", "HEAD~1"], ["validate", "--rev", "HEAD~1"], ["cost", "--base", "HEAD^"]):
        r = run(*args, cwd=tmp_path / "shallow")
        assert r.returncode == 2, r.stderr
        assert "internal error" not in r.stderr and "unknown git revision" in r.stderr, r.stderr
        assert "hint: fetch it first" in r.stderr


def test_a_failed_write_leaves_no_temporary_file_and_says_where(tmp_path: Path, valid_repo: Path) -> None:
    out = tmp_path / "out"
    assert render(valid_repo, out)[0] == 0
    target = next((out / "stacks").glob("*-infra.json"))
    target.unlink()
    (target / "planted").mkdir(parents=True)
    code, output = render(valid_repo, out)
    assert code == 2 and f"cannot write {target}: is a directory, not a file" in output, output
    assert [p for p in out.rglob("*") if p.name.endswith(".tmp")] == []


def test_a_folder_where_a_file_goes_stops_the_write_before_any_file_is_replaced(tmp_path: Path) -> None:
    """Found by a hunt for half-written output: `fleet render --out` renamed files one by one and stopped at a
    folder planted where a file goes, leaving some files new and others old."""
    from reconciler.problems import UsageError
    from reconciler.safeio import Folder

    (tmp_path / "a.txt").write_text("old a")
    (tmp_path / "z.txt").write_text("old z")
    (tmp_path / "m.txt").mkdir()
    with Folder.open(tmp_path) as folder, pytest.raises(UsageError, match=r"m\.txt"):
        folder.write_many({"a.txt": "new a", "m.txt": "new m", "z.txt": "new z"})
    assert (tmp_path / "a.txt").read_text() == "old a" and (tmp_path / "z.txt").read_text() == "old z"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "m.txt", "z.txt"]    # no temporary file left
