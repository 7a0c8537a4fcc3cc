"""What a saved plan was made for: the `--head-commit` and `--pr` options of `fleet plan` and `fleet apply`,
and the plan's `review` object (plan/types.py `Review`).  EFFECT (reads git).

`fleet plan` writes `review: {base, head, pr}` into the plan JSON; `fleet apply --reviewed FILE` refuses a
plan made for another head commit or pull request than the one it applies (apply/flow.py `read_reviewed`).
In CI the head is the pull request's head commit, not the merge commit the plan workflow checks out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from . import sources

if TYPE_CHECKING:
    from .plan.types import Review

F = TypeVar("F", bound=Callable[..., Any])


def _commit_sha(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--head-commit: a full commit sha (40 hex digits, or 64 in a SHA-256 repository), lower-cased."""
    if value is None:
        return None
    v = value.strip().lower()
    if len(v) not in (40, 64) or any(ch not in "0123456789abcdef" for ch in v):
        raise click.BadParameter(f"{value!r} is not a full commit sha: give all 40 hex digits "
                                 "(in a workflow: github.event.pull_request.head.sha)")
    return v


def review_options(fn: F) -> F:
    """`--head-commit SHA` and `--pr N`: the commit and pull request a plan is made for (plan) or applied
    from (apply)."""
    fn = click.option("--pr", type=click.IntRange(min=1), default=None,
                      help="the pull request's number")(fn)
    return click.option("--head-commit", "head_commit", default=None, callback=_commit_sha,
                        help="the commit planned or applied: a pull request's head (CI checks out a merge "
                             "commit)  [default: the repository's HEAD]")(fn)


def made_for(repo: Path, base: str | None, head_commit: str | None, pr: int | None) -> Review:
    """The plan's `review`: the commit of `base` (None without one), `head_commit` or else the repository's
    HEAD (None outside git), and `pr`."""
    from .plan.types import Review

    return Review(sources.commit_of(repo, base, required=True) if base else None,
                  head_commit or sources.commit_of(repo, "HEAD", required=False), pr)


def applied_commit(repo: Path, head_commit: str | None) -> str | None:
    """The commit `fleet apply` applies: `--head-commit`, else the repository's HEAD (None outside git)."""
    return head_commit or sources.commit_of(repo, "HEAD", required=False)
