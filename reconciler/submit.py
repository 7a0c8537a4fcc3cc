"""`fleet submit`: a job file from the flags a researcher knows, and what the plan does with it. Pure.

`job_document` builds the YAML document of `jobs/TEAM/NAME.yaml` from the flags (or from an existing job,
`--from TEAM/JOB`, whose fields the flags then override); `job_text` writes it the way the example's files
read; `verdict` says, from a plan of the repository with the file in it, where the job would run, when, and
what it costs. The command (submit_command.py) does the effects: the file, git and the pull request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml

from .eta import expected_start
from .plan.reasons import describe
from .plan.types import Plan
from .problems import UsageError
from .resolve import run_hours
from .validate import Validated

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SCHEMA_LINE = "# yaml-language-server: $schema=../../schema/job.schema.json\n"


@dataclass(frozen=True)
class Flags:
    """What the command line said; None: not given (a `--from` job's value stays)."""

    image: str | None = None
    accelerator: str | None = None
    count: int | None = None
    topology: str | None = None
    slices: int | None = None
    hours: float | None = None
    priority: str | None = None
    kind: str | None = None
    spot: str | None = None
    env: Sequence[str] = ()
    command: Sequence[str] = ()


def split_id(job_id: str, what: str = "TEAM/NAME") -> tuple[str, str]:
    """`team/name` as its two RFC 1123 labels, or a usage error: the id decides the one file written."""
    team, sep, name = job_id.partition("/")
    if not sep or not NAME.match(team) or not NAME.match(name) or len(team) > 63 or len(name) > 63:
        raise UsageError(f"`{job_id}` is not a job id {what}",
                         "write TEAM/NAME with lowercase letters, digits and '-', e.g. rl/grpo-math-v2")
    return team, name


_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^[-/.]|[/.]$|\.lock$|/\.|^@$")


def check_branch(branch: str) -> None:
    """A usage error for a name `git check-ref-format --branch` refuses: refused before anything is written."""
    if _BAD_REF.search(branch) or branch.endswith(".lock") or not branch:
        raise UsageError(f"--branch `{branch}` is not a valid git branch name",
                         "use letters, digits, '-', '_' and '/', e.g. submit/rl-grpo-v2 (no spaces, '..', '~', "
                         "'^', ':', '?', '*', '[' or '\\')")


def job_document(team: str, name: str, flags: Flags, base: Mapping[str, Any] | None) -> dict[str, Any]:
    """The job's document: `base` (a job's YAML, for `--from`) or a new training job, then the flags."""
    doc: dict[str, Any] = {"name": name, "team": team}
    if base is not None:
        doc.update({k: v for k, v in base.items() if k not in ("name", "team")})
    else:
        doc["kind"] = flags.kind or "training"
        if flags.accelerator is None or flags.image is None:
            raise UsageError("a new job needs --image and --accelerator (or --from TEAM/JOB to start from one)",
                             "e.g. fleet submit rl/grpo-v2 --image REGISTRY/IMAGE:TAG --accelerator nvidia-h100-80gb "
                             "--count 8 --hours 12 -- python -m train")
    if flags.count is not None and flags.topology is not None:
        raise UsageError("give --count or --topology, not both", "--count N chips or GPUs (the planner picks a TPU "
                         "slice shape), or --topology AxB[xC] for an exact TPU slice")
    option = _option(doc.get("options"), flags)
    if option is not None:
        given = doc.get("options")
        rest: list[Any] = given[1:] if flags.accelerator is None and isinstance(given, list) else []
        doc["options"] = [option, *rest]    # a new --accelerator replaces the options; else the first changes
    for key, value in (("priority", flags.priority), ("kind", flags.kind), ("spot", flags.spot),
                       ("duration_hours", flags.hours), ("image", flags.image)):
        if value is not None:
            whole = isinstance(value, float) and value.is_integer() and abs(value) < 1e15   # 1e308 stays a float
            doc[key] = int(value) if whole else value
    if flags.command:
        doc["command"] = list(flags.command)
    if flags.env:
        env = dict(doc.get("env") or {})
        for item in flags.env:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise UsageError(f"--env {item!r} is not KEY=VALUE", "e.g. --env WANDB_PROJECT=grpo")
            env[key] = value
        doc["env"] = env
    return doc


def _option(options: Any, flags: Flags) -> dict[str, Any] | None:
    """The one option the flags describe (a new accelerator replaces the options; a new count or topology
    changes the first), or None when the flags leave the options alone."""
    if flags.accelerator is None and flags.count is None and flags.topology is None and flags.slices is None:
        return None
    first = dict(options[0]) if isinstance(options, list) and options and isinstance(options[0], dict) else {}
    opt: dict[str, Any] = {"accelerator": flags.accelerator} if flags.accelerator is not None else first
    if flags.accelerator is None and not opt:
        raise UsageError("--count, --topology and --slices change an option: say its --accelerator",
                         "e.g. --accelerator tpu-v5p --topology 4x4x4")
    if flags.count is not None:
        opt.pop("topology", None)
        opt["count"] = flags.count
    if flags.topology is not None:
        opt.pop("count", None)
        opt["topology"] = flags.topology
    if flags.slices is not None:
        opt["slices"] = flags.slices
    opt.pop("relative_speed", None)     # the only option: it is the reference
    return opt


def job_text(doc: Mapping[str, Any]) -> str:
    """The file's text: the schema line the example's job files carry, then the fields in their order, short
    lists and mappings on one line (`command: [python, -m, train]`)."""
    body = yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=None, allow_unicode=True, width=110)
    return SCHEMA_LINE + body


@dataclass(frozen=True)
class Verdict:
    """What the plan does with the job: where (or why not), the run cost, and the expected start."""

    job: str
    placed: tuple[str, ...]
    option: str | None
    hourly_usd: float
    run_cost_usd: float | None
    pending: tuple[str, ...]
    start: str
    start_at: datetime | None

    def lines(self) -> list[str]:
        if self.placed:
            cost = f", ${self.run_cost_usd:,.0f} for its run" if self.run_cost_usd is not None else ""
            where = [f"plan: runs on {', '.join(self.placed)} with option {self.option}, "
                     f"${self.hourly_usd:,.2f}/h{cost}"]
        else:
            where = ["plan: waits (no place for it now):", *(f"  - {r}" for r in self.pending)]
        return [*where, f"expected start: {self.start}"]


def verdict(v: Validated, plan: Plan, job_id: str, now: datetime) -> Verdict:
    """Where the plan of the repository (with the job in it) puts `job_id`, its cost and its expected start."""
    mine = [p for p in plan.placements if p.job == job_id]
    job = v.job_by_id[job_id]
    option, hours = None, job.duration_hours
    if mine:
        opt = next((o for o in v.options.get(job_id, ()) if o.index == mine[0].option), None)
        option = f"{mine[0].option} ({describe(opt)})" if opt is not None else str(mine[0].option)
        hours = run_hours(hours, opt.relative_speed) if opt is not None else hours   # on the option it runs
    hourly = round(sum(p.hourly_usd for p in mine), 2)
    run = hourly * hours if hours is not None and mine else None
    reasons = next((p.reasons for p in plan.pending if p.job == job_id), ())
    eta = expected_start(v, plan, job_id, now)
    return Verdict(job_id, tuple(f"{p.cluster}/{p.pool}" for p in mine), option, hourly, run, tuple(reasons),
                   eta.text(), eta.at)
