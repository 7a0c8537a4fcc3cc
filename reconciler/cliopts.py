"""The options every `fleet` command shares, and the repository they work on.  EFFECT (reads the cwd).

`--repo` defaults to the Fleet repository that holds the current folder: `cd jobs/rl && fleet validate` works
on the repository two folders up, as `git` does. A folder is a Fleet repository when it holds one of the data
folders (`fleet/`, `policies/`, `jobs/`); the nearest such folder, the current one first, wins. None found: the
current folder, and the command says that it is no Fleet repository.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .load import DATA_DIRS
from .problems import RejectedError, UsageError
from .suggest import closest

if TYPE_CHECKING:
    from .validate import Validated

F = TypeVar("F", bound=Callable[..., Any])
_ROOTS = tuple(d.rstrip("/") for d in DATA_DIRS)


def find_root(start: Path) -> Path:
    """The nearest folder from `start` upwards that holds a data folder, as a path relative to `start` (`.`,
    `../..`) so messages stay short; `.` when there is none."""
    here = start.resolve()
    for up, folder in enumerate([here, *here.parents]):
        if any((folder / name).is_dir() and not (folder / name).is_symlink() for name in _ROOTS):
            return Path(os.path.join(*([".."] * up))) if up else Path(".")
    return Path(".")


def _repo(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path:
    return value if value is not None else find_root(Path.cwd())


def repo_option(fn: F) -> F:
    """`--repo DIR`; by default the Fleet repository holding the current folder."""
    return click.option("--repo", "repo", type=click.Path(file_okay=False, path_type=Path), default=None,
                        callback=_repo, help="the Fleet repository to work on  [default: the one holding the "
                        "current folder]")(fn)


def validated(repo: Path, rev: str | None, what: str) -> Validated:
    """Load and validate the work tree (or the revision `rev`), or stop with the problems (exit 1)."""
    from . import output, sources
    from .catalog import load_catalog
    from .pipeline import check

    result = check(sources.read_revision(repo, rev) if rev else sources.read_worktree(repo), load_catalog())
    if not result.ok:
        click.echo(output.text(result.errors), err=True, nl=False)
        raise RejectedError(f"{what} has validation errors; the plan needs a valid repository",
                            "fix the errors above (`fleet validate` lists them)")
    return result


def known_job(job: str, known: Iterable[str]) -> str:
    """`job` when it is a job of the repository; else a usage error with the nearest job id."""
    ids = sorted(known)
    if job in ids:
        return job
    near = closest(job, ids)
    example = ids[0] if ids else "vision/train"
    raise UsageError(f"no job `{job}` in the repository", (f"did you mean `{near}`? " if near else "")
                     + f"jobs look like TEAM/NAME (e.g. {example}); `ls jobs/*/` lists them")
