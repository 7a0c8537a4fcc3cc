"""The docs' examples are the real output: every output block in README.md and docs/*.md is run and compared.

A block is checked when an HTML comment right before it names the command (invisible on GitHub):

    <!-- readme-check: fleet explain rl/critic-distill -->
    ```
    ...the output, exactly...
    ```

The comment's later lines, `key: value`, say how:
- `mode: exact` (default): the block is the whole output (stdout and stderr as a terminal shows them).
  `mode: excerpt`: the output with lines left out where the block has a line `...`: the lines between two
  `...` are adjacent in the output, in this order, and without a leading (trailing) `...` the block starts
  (ends) as the output does.
- `exit: N`: the exit code the command must give (default 0).
- `setup: clusters`: local Kubernetes API servers (tests/kube_api.py), empty, one per example cluster whose
  YAML names a kubeconfig context, in `KUBECONFIG`. `setup: running`: the same, holding every job the plan
  places in one pool as a running JobSet and Workload, and every pool's nodes (as `fleet apply` would leave
  the fleet).
- `edit: PATH: OLD => NEW`: before running, replace the one occurrence of OLD in the example's PATH (`\\n` in
  NEW is a newline); several `edit:` lines apply in order. The example is committed first, so the edits are
  the work tree's change against `HEAD` (what `--base HEAD` compares with).

Every command runs in process (click's CliRunner) in a fresh copy of the example (`fleet/`, `policies/`,
`jobs/`, committed to a new git repository, nothing else: no `.fleet/` of the checkout leaks in), with
`FLEET_NOW=2026-11-23T08:00:00+00:00`. One thing is masked, since it differs on every machine: a commit
hash (40 hex digits) reads `<commit>`.

A plain fence (no language) is an output block and must be marked; blocks that are not output carry a
language (`sh`, `yaml`, `text`, ...) and are not run.

After an intended change of output, rewrite the blocks from the real output and review the diff:

    .venv/bin/python tests/test_readme.py --update      (or FLEET_UPDATE_README=1 pytest tests/test_readme.py)

An exact block is replaced whole; an excerpt keeps its shape: each run of lines between `...` that no longer
appears is replaced by the most similar run of output lines between its neighbours (no similar one: it
fails, and the excerpt needs an edit by hand).
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, chdir, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kube_api import KubeCluster, write_kubeconfig
from kube_objects import job_objects, node

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
"""Every page whose output blocks are checked: the README and each page of docs/."""
NOW = "2026-11-23T08:00:00+00:00"
DATA = ("fleet", "policies", "jobs")
MARKER = "<!-- readme-check:"
KEYS = {"mode", "exit", "setup", "edit"}
SETUPS = {"clusters", "running"}
ELISION = "..."
SHA = re.compile(r"\b[0-9a-f]{40}\b")


@dataclass
class Block:
    """One marked block: its command and options, and where its lines sit in the README (0-based, the fence
    lines excluded)."""

    line: int                  # 1-based line of the marker, for messages
    command: str
    page: str = "README.md"    # the page, relative to the repository root
    mode: str = "exact"
    exit: int = 0
    setup: str | None = None
    edits: list[tuple[str, str, str]] = field(default_factory=list)
    start: int = 0             # first line of the block's body
    end: int = 0               # the closing fence
    body: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}: {self.command}"


class MarkerError(Exception):
    pass


def parse(lines: list[str], page: str = "README.md") -> tuple[list[Block], list[str]]:
    """The marked blocks of `page`, and the problems: a malformed marker, a marker with no block after it, a
    plain fence without a marker."""
    blocks: list[Block] = []
    problems: list[str] = []
    i = 0
    pending: Block | None = None
    skip = False               # the block after a malformed marker: reported once, with the marker
    while i < len(lines):
        text = lines[i]
        if text.startswith(MARKER):
            comment = [text[len(MARKER):]]
            j = i
            while "-->" not in comment[-1] and j + 1 < len(lines):
                j += 1
                comment.append(lines[j])
            comment[-1] = comment[-1].split("-->")[0]
            try:
                pending = marker(i + 1, [c.strip() for c in comment], page)
            except MarkerError as e:
                problems.append(f"{page}:{i + 1}: {e}")
                pending, skip = None, True
            i = j + 1
            continue
        if text.startswith("```"):
            close = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("```")), len(lines))
            if pending is not None:
                if text.strip() != "```":
                    problems.append(f"{page}:{i + 1}: a checked block is a plain fence (no language)")
                pending.start, pending.end, pending.body = i + 1, close, lines[i + 1:close]
                blocks.append(pending)
            elif text.strip() == "```" and not skip:
                problems.append(f"{page}:{i + 1}: a plain fence is an output block: mark it with "
                                f"`{MARKER} COMMAND -->` (see tests/test_readme.py), or give it a language")
            pending, skip = None, False
            i = close + 1
            continue
        if text.strip():
            if pending is not None:
                problems.append(f"{page}:{pending.line}: the marker is not followed by a code block")
            pending, skip = None, False
        i += 1
    if pending is not None:
        problems.append(f"{page}:{pending.line}: the marker is not followed by a code block")
    return blocks, problems


def marker(line: int, comment: list[str], page: str = "README.md") -> Block:
    command, *options = [c for c in comment if c]
    if not command.startswith("fleet "):
        raise MarkerError(f"a checked command starts with `fleet `, not {command!r}")
    block = Block(line=line, command=command, page=page)
    for opt in options:
        key, sep, value = opt.partition(":")
        value = value.strip()
        if not sep or key not in KEYS:
            raise MarkerError(f"unknown option {opt!r}: the keys are {', '.join(sorted(KEYS))}")
        if key == "mode":
            if value not in ("exact", "excerpt"):
                raise MarkerError(f"mode is exact or excerpt, not {value!r}")
            block.mode = value
        elif key == "exit":
            block.exit = int(value)
        elif key == "setup":
            if value not in SETUPS:
                raise MarkerError(f"setup is one of {', '.join(sorted(SETUPS))}, not {value!r}")
            block.setup = value
        else:
            path, sep, change = value.partition(": ")
            old, arrow, new = change.partition(" => ")
            if not sep or not arrow or not old:
                raise MarkerError(f"an edit reads `edit: PATH: OLD => NEW`, not {value!r}")
            block.edits.append((path, old, new.replace("\\n", "\n")))
    return block


# -- running a block's command on a copy of the example ------------------------------------------------------

def example_copy(where: Path, edits: list[tuple[str, str, str]]) -> Path:
    """The example's data, committed to a new repository at `where`, then `edits` applied to the work tree."""
    for d in DATA:
        shutil.copytree(ROOT / d, where / d)
    env = {**os.environ, "GIT_AUTHOR_NAME": "fleet", "GIT_AUTHOR_EMAIL": "fleet@example.invalid",
           "GIT_COMMITTER_NAME": "fleet", "GIT_COMMITTER_EMAIL": "fleet@example.invalid",
           "GIT_AUTHOR_DATE": "2026-11-23T00:00:00Z", "GIT_COMMITTER_DATE": "2026-11-23T00:00:00Z"}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "example"]):
        subprocess.run(["git", "-c", "commit.gpgsign=false", *cmd], cwd=where, env=env, check=True,
                       capture_output=True)
    for path, old, new in edits:
        target = where / path
        if not target.is_file():
            raise MarkerError(f"edit: {path} is not a file of the example")
        text = target.read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise MarkerError(f"edit: {path} holds {old!r} {text.count(old)} times, not once")
        target.write_text(text.replace(old, new), encoding="utf-8")
    return where


@contextmanager
def local_clusters(repo: Path, tmp: Path, running: bool) -> Iterator[Path]:
    """A kubeconfig naming a local API server per example cluster with a context; with `running`, the
    plan's single-pool jobs run there and every pool has its nodes."""
    from reconciler.catalog import load_catalog
    from reconciler.pipeline import check
    from reconciler.plan import plan
    from reconciler.sources import read_worktree

    v = check(read_worktree(repo), load_catalog())
    servers: dict[str, KubeCluster] = {}
    contexts: dict[str, str] = {}
    try:
        for c in v.loaded.clusters:
            if c.kubernetes and c.kubernetes.context:
                servers[c.name] = KubeCluster(c.name).start()
                contexts[c.kubernetes.context] = servers[c.name].url
        if running:
            p = plan(v)
            namespaces = {t.name: t.queue_namespace for t in v.loaded.teams.teams} if v.loaded.teams else {}
            count: dict[str, int] = {}
            for pl in p.placements:
                count[pl.job] = count.get(pl.job, 0) + 1
            for pl in p.placements:
                if count[pl.job] == 1 and pl.cluster in servers:
                    team, job = pl.job.split("/")
                    for obj in job_objects(team, job, pl.pool, "running"):    # in the team's namespace
                        obj["metadata"]["namespace"] = namespaces[team]
                        servers[pl.cluster].add(obj)
            for rp in v.pools:
                if rp.cluster not in servers:
                    continue
                target = next((t.target for t in p.pools if (t.cluster, t.pool) == (rp.cluster, rp.name)), 0)
                for u in range(target):
                    for h in range(rp.nodes_per_unit if rp.kind == "tpu" else 1):
                        tpu = rp.kind == "tpu"
                        servers[rp.cluster].add(node(f"{rp.name}-s{u}-{h}" if tpu else f"{rp.name}-{u}",
                                                     pool=None if tpu else rp.name,
                                                     node_pool=f"{rp.name}-s{u}" if tpu else rp.name,
                                                     accel="tpu" if tpu else "gpu"))
        yield write_kubeconfig(tmp / "kubeconfig", contexts)
    finally:
        for s in servers.values():
            s.stop()


def run(block: Block) -> tuple[int, str]:
    """The block's command, run as a user would on the example: exit code and what the terminal shows."""
    from click.testing import CliRunner

    from reconciler.cli import cli
    from reconciler.problems import FleetError

    argv = shlex.split(block.command)
    with tempfile.TemporaryDirectory(prefix="fleet-readme-") as t, ExitStack() as stack:
        tmp = Path(t)
        repo = example_copy(tmp / "example", block.edits)
        kubeconfig = tmp / "no-kubeconfig"
        if block.setup:
            kubeconfig = stack.enter_context(local_clusters(repo, tmp, running=block.setup == "running"))
        stack.enter_context(chdir(repo))
        env = {"FLEET_NOW": NOW, "KUBECONFIG": str(kubeconfig), "FLEET_DEBUG": None, "NO_COLOR": "1"}
        result = CliRunner().invoke(cli, argv[1:], env=env)
        code, out = result.exit_code, result.output
        if isinstance(result.exception, FleetError):      # as `main` shows it: the message, the hint, its code
            e = result.exception
            code, out = e.exit_code, out + f"error: {e.message}\n" + (f"hint: {e.hint}\n" if e.hint else "")
        elif result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        out = out.replace(str(repo.resolve()), "<repo>").replace(str(tmp), "<tmp>")
    return code, SHA.sub("<commit>", out)


# -- comparing and updating -------------------------------------------------------------------------------------

def segments(body: list[str]) -> list[list[str]]:
    """An excerpt's runs of lines between `...` lines; an empty run first (last) when it begins (ends) with
    one, so the others are anchored to the output's first and last lines."""
    runs: list[list[str]] = [[]]
    for text in body:
        if text == ELISION:
            runs.append([])
        else:
            runs[-1].append(text)
    return runs


def locate(runs: list[list[str]], out: list[str]) -> list[int | None]:
    """Where each run sits in the output (first fit, in order, each run's lines adjacent; the first run at
    the start and the last at the end), or None."""
    found: list[int | None] = []
    at = 0
    for i, run_ in enumerate(runs):
        n = len(run_)
        first, last = i == 0, i == len(runs) - 1
        starts = [k for k in range(at, len(out) - n + 1)
                  if (not first or k == 0) and (not last or k == len(out) - n)]
        hit = next((k for k in starts if out[k:k + n] == run_), None)
        if hit is not None:
            at = hit + n
        found.append(hit)
    return found


def compare(block: Block, out: str) -> str | None:
    """None when the block shows the output; else what differs."""
    lines = out.rstrip("\n").split("\n")
    if block.mode == "exact":
        if block.body == lines:
            return None
        diff = difflib.unified_diff(block.body, lines, "README", "real output", lineterm="")
        return "\n".join(diff)
    runs = segments(block.body)
    missing = [run_ for run_, hit in zip(runs, locate(runs, lines), strict=True) if hit is None]
    if not missing:
        return None
    shown = "\n".join(f"  {text}" for text in lines[:80])
    more = f"\n  ... and {len(lines) - 80} more line(s)" if len(lines) > 80 else ""
    return ("runs of the excerpt not in the real output (lines between `...` are adjacent there; without a "
            "leading or trailing `...` the excerpt starts or ends with the output):\n"
            + "\n---\n".join("\n".join(f"  {text}" for text in run_) or "  (the output is longer)"
                             for run_ in missing)
            + f"\nreal output:\n{shown}{more}")


def updated(block: Block, out: str) -> list[str]:
    """The block's new body from the real output (see the module docstring)."""
    lines = out.rstrip("\n").split("\n")
    if block.mode == "exact":
        return lines
    runs = segments(block.body)
    hits = locate(runs, lines)
    new: list[list[str]] = []
    for i, run_ in enumerate(runs):
        hit = hits[i]
        if hit is None:
            n = len(run_)
            lo = max((h + len(runs[j]) for j, h in enumerate(hits[:i]) if h is not None), default=0)
            hi = min((h for h in hits[i + 1:] if h is not None), default=len(lines))
            starts = [k for k in range(lo, hi - n + 1)
                      if (i > 0 or k == 0) and (i < len(runs) - 1 or k == len(lines) - n)]
            scored = [(sum(difflib.SequenceMatcher(None, a, b).ratio()
                           for a, b in zip(run_, lines[k:k + n], strict=True)) / max(n, 1), -k) for k in starts]
            best = max(scored, default=(0.0, 0))
            if best[0] < 0.6:
                raise MarkerError(f"{block.name}: no output lines like {run_!r}: edit the excerpt by hand")
            hits[i] = hit = -best[1]
        new.append(lines[hit:hit + len(run_)])
    return [text for i, run_ in enumerate(new) for text in ([ELISION] if i else []) + run_]


def update_readme(readme: Path = README) -> int:
    """Rewrite every marked block of the page `readme` from the real output; the number of blocks changed."""
    lines = readme.read_text(encoding="utf-8").split("\n")
    blocks, problems = parse(lines, _page(readme))
    if problems:
        raise MarkerError("\n".join(problems))
    changed = 0
    for block in reversed(blocks):              # from the end, so earlier blocks keep their line numbers
        code, out = run(block)
        if code != block.exit:
            print(f"{block.name}: exit {code} (the marker says {block.exit}): fix the marker", file=sys.stderr)
        body = updated(block, out)
        if body != block.body:
            lines[block.start:block.end] = body
            changed += 1
    readme.write_text("\n".join(lines), encoding="utf-8")
    return changed


# -- the tests ------------------------------------------------------------------------------------------------

def _page(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def _parse_page(path: Path) -> tuple[list[Block], list[str]]:
    return parse(path.read_text(encoding="utf-8").split("\n"), _page(path))


PARSED = [_parse_page(p) for p in DOCS]
BLOCKS = [b for blocks, _ in PARSED for b in blocks]
PROBLEMS = [p for _, problems in PARSED for p in problems]
UPDATED: list[int] = []        # FLEET_UPDATE_README=1: every page is rewritten once, by the first block's test


def test_every_output_block_is_marked_and_every_marker_well_formed() -> None:
    assert PROBLEMS == []
    assert len(BLOCKS) >= 6
    assert {b.page for b in BLOCKS} >= {"README.md", "docs/commands.md", "docs/concepts.md"}


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_readme_block_is_the_real_output(block: Block) -> None:
    if os.environ.get("FLEET_UPDATE_README") == "1":
        if not UPDATED:
            UPDATED.append(sum(update_readme(p) for p in DOCS))
        block = next(b for p in DOCS for b in _parse_page(p)[0] if (b.page, b.command) == (block.page, block.command))
    code, out = run(block)
    assert code == block.exit, f"{block.name}: exit {code}, the marker says {block.exit}\n{out}"
    problem = compare(block, out)
    assert problem is None, (f"{block.name}: the README's example is not the real output "
                             f"(after an intended change: python tests/test_readme.py --update)\n{problem}")


def test_the_readme_starts_with_the_light_install_and_the_ci_command() -> None:
    """The front page's first command installs Fleet as a new user would (the light install: pyproject's
    dependencies, no extra) and plans the example, whose output the first checked block shows; the second is
    `.ci/run`'s (tests/test_workflows.py compares them)."""
    text = README.read_text(encoding="utf-8")
    commands = re.findall(r"```sh\n(.*?)\n```", text, re.S)
    assert commands[0] == "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/fleet plan"
    assert commands[1].startswith("python3 -m venv .venv && .venv/bin/pip install -q --no-compile --require-hashes "
                                  "--no-deps -r requirements/dev.txt")
    assert BLOCKS[0].page == "README.md" and BLOCKS[0].command == "fleet plan"
    assert len(text.splitlines()) <= 250, "the README is a front page: the rest goes to docs/"


def test_a_drifted_block_fails_and_update_repairs_it(tmp_path: Path) -> None:
    """The comparison can fail: a block with one number changed (as README.md's dry-run header once said 68
    actions where the run gave 65), a line too many, or an elision not marked, is reported in either mode, and
    the update writes the real lines back."""
    block = next(b for b in BLOCKS if b.command.startswith("fleet explain"))
    _, out = run(block)
    assert compare(block, out) is None
    lines = out.rstrip("\n").split("\n")
    k = next(i for i, text in enumerate(lines) if re.search(r"\d", text))
    drifted = re.sub(r"\d+", lambda m: str(int(m.group()) + 3), lines[k], count=1)
    for mode in ("exact", "excerpt"):
        stale = Block(line=block.line, command=block.command, mode=mode,
                      body=[*lines[:k], drifted, *lines[k + 1:]])
        problem = compare(stale, out)
        assert problem is not None and drifted in problem
        assert updated(stale, out) == lines
    for body in ([*lines, "extra"], lines[1:], [*lines[:k], *lines[k + 1:]], [ELISION, *lines[:k], *lines[k + 1:]]):
        assert compare(Block(line=1, command=block.command, mode="excerpt", body=body), out) is not None
    for body in ([ELISION, *lines[1:]], [*lines[:k], ELISION, *lines[k + 1:]], [ELISION, lines[k], ELISION]):
        assert compare(Block(line=1, command=block.command, mode="excerpt", body=body), out) is None
    readme = tmp_path / "README.md"
    text = f"text\n\n{MARKER} {block.command}\n     mode: excerpt -->\n```\n...\n{{}}\n...\n```\n"
    readme.write_text(text.format(drifted))
    assert update_readme(readme) == 1
    assert readme.read_text() == text.format(lines[k])
    assert update_readme(readme) == 0


def test_parse_rejects_unmarked_output_blocks_and_bad_markers() -> None:
    lines = ["```", "output", "```", f"{MARKER} fleet plan", "     mode: sometimes -->", "```", "x", "```",
             f"{MARKER} fleet plan -->", "prose", "```sh", "fleet plan", "```", f"{MARKER} plan -->"]
    blocks, problems = parse(lines)
    assert blocks == []
    assert [p.split(":")[1] for p in problems] == ["1", "4", "9", "14"]
    assert "mark it" in problems[0] and "mode" in problems[1] and "not followed" in problems[2]


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_readme.py --update   (rewrites the checked blocks of README.md, docs/)")
    print(f"{sum(update_readme(p) for p in DOCS)} block(s) rewritten; review with git diff README.md docs/")
