"""The `fleet` command: the terminal edge of the pipeline.  EFFECT (terminal, files).

Exit codes (DESIGN.md section 3): 0 ok; 1 the input or the change is rejected; 2 usage or environment
errors. No command prints a traceback unless FLEET_DEBUG=1.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from . import clock, gcpause, output, pipeline, reconcile, robots, sources
from .catalog import load_catalog
from .cliopts import known_job, repo_option
from .cliopts import validated as _validated
from .pipeline import Change, Solver, check
from .problems import FleetError, RejectedError, UsageError, printable
from .review import applied_commit, made_for, review_options
from .safeio import Folder, write_file, write_tree
from .validate import Validated

if TYPE_CHECKING:
    from .observe.model import Snapshot

F = TypeVar("F", bound=Callable[..., Any])


def observed_option(fn: F) -> F:
    """`--observed FILE`: plan from what runs (a snapshot `fleet observe --format json --out FILE` wrote)."""
    return click.option("--observed", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help="a snapshot `fleet observe --out FILE` wrote: plan from what runs")(fn)


def _observed(path: Path | None) -> Snapshot | None:
    """The snapshot of `--observed`, or a located error (exit 2 unreadable, 1 not a snapshot)."""
    if path is None:
        return None
    from .observe.files import read_snapshot

    return read_snapshot(path)


def _revision(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--rev/--base: an empty revision is a usage error, not "no revision" (it once read the work tree)."""
    if value is not None and not value.strip():
        raise click.BadParameter("is empty: name a git revision, e.g. origin/main or HEAD~1, or leave the option out")
    return value


def _read(repo: Path, rev: str | None) -> dict[str, bytes]:
    return sources.read_revision(repo, rev) if rev else sources.read_worktree(repo)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             commands=[*reconcile.CLI, *robots.CLI])
@click.version_option(package_name="fleet", prog_name="fleet")
def cli() -> None:
    """Fleet: the GitOps manager of an ML compute fleet (TPU and GPU, GCP, AWS and on-prem)."""


@cli.command()
@repo_option
@click.option("--format", "fmt", type=click.Choice(["text", "github", "json"]), default="text", show_default=True,
              help="text for people, github for inline pull-request annotations, json for tools")
@click.option("--rev", default=None, callback=_revision, help="validate this git revision instead of the work tree")
def validate(repo: Path, fmt: str, rev: str | None) -> None:
    """Report every problem in the repository's YAML at once (path:line:col). Exit 1 on any error."""
    result = check(_read(repo, rev), load_catalog())
    render = {"text": output.text, "github": output.github, "json": output.as_json}[fmt]
    click.echo(render(result.problems), nl=False)
    sys.exit(0 if result.ok else 1)


@cli.command("plan")
@repo_option
@click.option("--base", default=None, help="git revision of the base: jobs stay where they were; show the diff",
              callback=_revision)
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="also write plan.json and plan.md into this directory")
@click.option("--solver", type=click.Choice(["greedy", "exact"]), default="greedy", show_default=True,
              help="exact: CP-SAT optimum for small fleets (slow; for checking the greedy planner)")
@click.option("--fail-on-violation", is_flag=True, help="exit 1 if a team's planned cost exceeds its budget")
@observed_option
@review_options
@gcpause.paused_gc()   # one short command over a large, acyclic heap: no collector scans between its stages
def plan_cmd(repo: Path, base: str | None, fmt: str, out: Path | None, solver: str, fail_on_violation: bool,
             observed: Path | None, head_commit: str | None, pr: int | None) -> None:
    """Plan where every job runs and how big every pool must be. The JSON names what it was made for
    (`review`: the base and head commits and the pull request), which `fleet apply --reviewed` checks."""
    c = _change(repo, base, cast(Solver, solver), _observed(observed))
    review = made_for(repo, base if c.base is not None else None, head_commit, pr)   # a broken base: none used
    md = pipeline.plan_markdown(c) if fmt == "md" or out is not None else ""
    js = None
    if out is not None:
        js = c.head.plan.to_json(review)
        _write_atomic(out / "plan.json", js)
        _write_atomic(out / "plan.md", md)
    printed = ([js] if js is not None else c.head.plan.json_chunks(review)) if fmt == "json" else \
        [printable(md, lines=True)]
    for chunk in printed:   # in chunks: the 100,000-job JSON (53 MB) is never held whole, nor encoded whole
        click.echo(chunk, nl=False)
    _check_budgets(c.budget_violations, fail_on_violation)


@cli.command()
@repo_option
@click.argument("job")
@click.option("--base", default=None, callback=_revision, help="git revision of the base plan (stickiness)")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@observed_option
def explain(repo: Path, job: str, base: str | None, fmt: str, observed: Path | None) -> None:
    """Why JOB (TEAM/NAME) is placed where it is, or pending; the rule that decided, the run cost, and the
    alternatives that fit now."""
    head = _validated(repo, None, "the work tree")
    known_job(job, head.options)
    from .apply.record import LAST_APPLIED, read_last_applied

    base_v, base_error = _base_checked(repo, base) if base else (None, "")   # a broken base: as `fleet plan`
    snap = _observed(observed)
    applied = read_last_applied(repo) if base is None else None   # what `fleet apply` last placed stays
    sources_ = ([f"snapshot {observed} observed at {snap.observed_at.isoformat()}"] if snap is not None else []) \
        + ([f"the last applied plan {repo / LAST_APPLIED}"] if applied is not None else [])
    base_note = (f" without a base: the base revision {base} does not validate (its first error: {base_error}), "
                 f"so the work tree is planned on its own, as `fleet plan --base {base}` plans it" if base_error
                 else f" against the base revision {base}" if base else "")
    first = (f"planned from {' and '.join(sources_)}{base_note}" if sources_ else
             f"planned from git alone{base_note}: no snapshot or applied plan found (pass `--observed FILE` from "
             "`fleet observe --out FILE` to plan from what runs)")
    text = pipeline.explain(head, job, base_v, fmt=fmt, observed=snap, applied=applied, planned_from=first)
    click.echo(printable(text, lines=True), nl=False)


@cli.command()
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="directory to write <kind>.schema.json files into")
def schema(out: Path) -> None:
    """Write the JSON Schema of every YAML document kind, for editors (yaml-language-server)."""
    from .schema import schemas

    for name, text in schemas().items():
        _write_atomic(out / name, text)
        click.echo(f"wrote {out / name}")


@cli.command("check")
@repo_option
@click.option("--base", required=True, help="git revision of the base: its policies decide who may change what",
              callback=_revision)
@click.option("--author", required=True, help="GitHub login of the change's author (the pull request's)")
@click.option("--author-teams", default="", help="comma-separated org/team handles the author belongs to; "
              "owners written @org/team match only through this list (GitHub team membership is not offline)")
@click.option("--format", "fmt", type=click.Choice(["text", "github", "json"]), default="text", show_default=True)
def check_cmd(repo: Path, base: str, author: str, author_teams: str, fmt: str) -> None:
    """Ownership and policy checks of the change from BASE to the work tree. Exit 1 on any violation."""
    from . import ownership

    base_files, head_files = sources.read_revision(repo, base), sources.read_worktree(repo)
    who = ownership.Author.of(author, author_teams.split(","))
    found = pipeline.ownership_check(base_files, head_files, who, sources.changed_paths(repo, base), base)
    render = {"text": ownership.text, "github": ownership.github, "json": ownership.as_json}[fmt]
    click.echo(render(found, who), nl=False)
    sys.exit(1 if found else 0)


@cli.command("codeowners")
@repo_option
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="where to write it  [default: REPO/.github/CODEOWNERS]")
def codeowners_cmd(repo: Path, out: Path | None) -> None:
    """Write .github/CODEOWNERS from policies/teams.yaml, so GitHub requests the reviewers `fleet check` names."""
    text = pipeline.codeowners(sources.read_worktree(repo))
    path = out if out is not None else repo / ".github" / "CODEOWNERS"
    if out is None:
        with Folder.open(repo, create=False) as root:
            root.write(".github/CODEOWNERS", text)   # .github is not followed if it is a link
    else:
        _write_atomic(path, text)
    click.echo(f"wrote {path}")


@cli.command("render")
@repo_option
@click.option("--out", "out", type=click.Path(path_type=Path), required=True,
              help="directory for <cluster>/kueue.yaml, <cluster>/jobsets/*.yaml, stacks/*.json and monitoring/")
@click.option("--force", is_flag=True, help="write into a non-empty folder that an earlier render did not write")
@observed_option
def render_cmd(repo: Path, out: Path, force: bool, observed: Path | None) -> None:
    """Render Kueue objects, JobSets and stack specs of the plan into --out, byte-for-byte deterministic."""
    head = _validated(repo, None, "the work tree")
    snap = _observed(observed)
    files = pipeline.render(head, pipeline.plan(head, observed=snap), load_catalog(), snap)
    files.update(pipeline.monitoring(head))
    written, removed = write_tree(out, files, repo=repo, force=force)
    click.echo(f"wrote {written} files to {out}" + (f", removed {removed} stale" if removed else ""))


class _TerminalUi:
    """The `orchestrate.Ui` of a real terminal: output, whether a person can answer, and the question."""

    def echo(self, line: str) -> None:
        click.echo(line)

    def interactive(self) -> bool:
        return sys.stdin.isatty()

    def confirm(self, question: str) -> bool:
        return click.confirm(question, default=False)


@cli.command("apply")
@repo_option
@click.option("--preview", is_flag=True, help="show what would change, stack by stack and job by job; change nothing")
@click.option("--stack", "stack", default=None,
              help="only this stack, e.g. gke-use5-infra, or only one cluster's jobs, e.g. gke-use5-jobs")
@click.option("--yes", is_flag=True, help="apply without asking (required when stdin is not a terminal, e.g. CI)")
@click.option("--specs", "specs_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="apply the stack specs `fleet render --out DIR` wrote (DIR/stacks)  [default: render the repo]")
@click.option("--fail-on-changes", is_flag=True,
              help="with --preview: exit 1 when any stack would change (drift checks; jobs are in no stack)")
@observed_option
@click.option("--reviewed", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="the plan JSON the pull request showed: refuse if it was made for another commit (or pull "
                   "request) than this apply's, or if this apply would stop, move or preempt running jobs beyond it")
@review_options
@click.option("--allow-replace", "allow_replace", multiple=True, metavar="CLUSTER/POOL",
              help="let Pulumi replace, re-create the nodes of, or delete this node pool (repeatable); without it "
                   "apply refuses any update that would, since every job on the pool stops: move the work off first")
def apply_cmd(repo: Path, preview: bool, stack: str | None, yes: bool, specs_dir: Path | None,
              fail_on_changes: bool, observed: Path | None, reviewed: Path | None, head_commit: str | None,
              pr: int | None, allow_replace: tuple[str, ...]) -> None:
    """Apply the plan: stacks with Pulumi, then jobs by server-side apply, never beyond the reviewed plan."""
    from .apply import flow, orchestrate
    from .apply.engine import PulumiEngine, require_pulumi_cli
    from .apply.pool_guard import parse_allow
    from .apply.record import write_last_applied
    from .apply.specs import StackSpec, load_specs, specs_from_render

    if fail_on_changes and not preview:
        raise UsageError("--fail-on-changes needs --preview", "run `fleet apply --preview --fail-on-changes`")
    allow = parse_allow(allow_replace)
    reviewed_plan = None
    if reviewed is not None:   # before anything else: a plan for another commit stops the apply at once
        reviewed_plan = flow.read_reviewed(reviewed, applied_commit(repo, head_commit), pr,
                                           applied_given=head_commit is not None)
    if stack is None or not stack.endswith("-jobs"):
        require_pulumi_cli()
    ui = _TerminalUi()
    engine: list[PulumiEngine] = []

    def choose(all_specs: list[StackSpec]) -> tuple[list[StackSpec], list[StackSpec]]:
        """(Pulumi stacks, jobs specs) to apply, confirmed; the Pulumi environment checked first."""
        chosen, jobs = flow.split(all_specs, stack, with_jobs=not fail_on_changes)
        if chosen:
            engine.append(PulumiEngine.for_repo(repo, on_output=lambda line: click.echo("  | " + line.rstrip("\n"))))
        orchestrate.confirm([*chosen, *jobs], preview=preview, yes=yes, ui=ui)
        return chosen, jobs

    given = choose(load_specs(specs_dir)) if specs_dir is not None else None   # --specs: before the repo is read
    head = _validated(repo, None, "the work tree")
    kubeconfig = os.environ.get("KUBECONFIG")
    now = clock.now()
    snap, last = flow.what_runs(repo, sources.read_worktree(repo), observed, kubeconfig, now,
                                observe=not fail_on_changes)
    plan = pipeline.plan(head, base=last, observed=snap, now=now)   # what runs beats the record
    if not fail_on_changes:     # the drift check compares the stacks only: JobSets are in no stack
        flow.check_reviewed(head, plan, snap, last, reviewed_plan, echo=click.echo)
    specs, job_specs = given or choose(specs_from_render(pipeline.render(head, plan, load_catalog())))
    results: list[orchestrate.StackResult] = []
    if specs:
        results = orchestrate.run(specs, engine[0], preview=preview, ui=ui, allow=allow)
        click.echo(orchestrate.summary(results, preview))
    failed = any(r.status == "failed" for r in results)
    job_results = flow.after_stacks(head, plan, job_specs, snap, last, kubeconfig, stacks_failed=failed,
                                    preview=preview, echo=click.echo)
    if failed or any(not r.ok for r in job_results):
        sys.exit(1)
    if not preview and stack is None:
        click.echo(f"recorded the applied plan in {write_last_applied(repo, plan)}")
    drifted = orchestrate.changed(results) if fail_on_changes else []
    if drifted:
        click.echo(f"error: {len(drifted)} stack(s) would change: {', '.join(drifted)}", err=True)
        click.echo("hint: the live fleet differs from git: apply git's state (`fleet apply --yes`) or change git "
                   "to describe the live state", err=True)
        sys.exit(1)


@cli.command("cost")
@repo_option
@click.option("--base", default=None, help="git revision to compare with: the plan diff and the cost delta",
              callback=_revision)
@click.option("--history", "history_n", type=click.IntRange(min=1), default=None,
              help="also the cost of each of the last N first-parent commits (cached in .fleet/cache/)")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "html"]), default="md", show_default=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="write cost.md, cost.json and cost.html into this directory")
@click.option("--fail-on-violation", is_flag=True, help="exit 1 if a team's planned cost exceeds its budget")
@observed_option
def cost_cmd(repo: Path, base: str | None, history_n: int | None, fmt: str, out: Path | None,
             fail_on_violation: bool, observed: Path | None) -> None:
    """Cost report: what the plan costs per team, cluster and accelerator; with --base, what the change stops,
    moves and costs. Budgets are forecast to the end of the month of FLEET_NOW (default: now)."""
    from . import report as rpt

    c = _change(repo, base, "greedy", _observed(observed))
    history: tuple[Any, ...] = ()
    if history_n:
        from .history_cache import collect

        history = collect(repo, history_n, load_catalog())
    report = pipeline.cost_report(c, "work tree", base or "", history, as_of=clock.now())
    texts = {"md": rpt.cost_markdown(report), "json": rpt.cost_json(report), "html": rpt.cost_html(report)}
    if out is not None:
        for kind, text in texts.items():
            _write_atomic(out / f"cost.{kind}", text)
    click.echo(printable(texts[fmt], lines=True), nl=False)
    _check_budgets(c.budget_violations, fail_on_violation)


@cli.command("observe")
@repo_option
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="also write the snapshot (JSON) to this file, for `fleet status --observed FILE`")
@click.option("--format", "fmt", type=click.Choice(["json", "text"]), default="text", show_default=True)
@click.option("--record-completions", is_flag=True,
              help="also write each finished job's completion record into its cluster (ConfigMap "
                   "fleet-system/fleet-completions; a Slurm job's into the lease cluster's "
                   "fleet-completions-slurm), so it never runs again once its objects are gone")
def observe_cmd(repo: Path, out: Path | None, fmt: str, record_completions: bool) -> None:
    """Read every cluster's Kueue Workloads, JobSets and Nodes (through the context its YAML names)."""
    from .observe.files import previous_snapshot, write_snapshot
    from .observe.fleetwide import observe_repo, record_completions_repo
    from .observe.model import carry_over, summary

    files = sources.read_worktree(repo)
    snap = observe_repo(files, os.environ.get("KUBECONFIG"), clock.now())
    if record_completions:
        snap = record_completions_repo(files, snap, os.environ.get("KUBECONFIG"))
    snap = carry_over(previous_snapshot(out) if out is not None else None, snap)
    if out is not None:
        write_snapshot(out, snap)
    for chunk in snap.json_chunks() if fmt == "json" else [printable(summary(snap), lines=True)]:
        click.echo(chunk, nl=False)


from .health.command import health_check_cmd  # noqa: E402  (beside the checks)
from .jobcmds import CLI as JOB_COMMANDS  # noqa: E402  (submit, status, logs)
from .simulate.command import simulate_cmd  # noqa: E402  (beside the simulator)

for _command in (health_check_cmd, simulate_cmd, *JOB_COMMANDS):
    cli.add_command(_command)


@cli.command("gc")
@repo_option
@click.option("--observed", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="a snapshot `fleet observe --out FILE` wrote  [default: observe now]")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--write", is_flag=True, help="remove the listed job files from the work tree")
def gc_cmd(repo: Path, observed: Path | None, fmt: str, write: bool) -> None:
    """List the finished and failed jobs whose files can go (completion records and the live state)."""
    from .gc import collect, to_json, to_text

    head = _validated(repo, None, "the work tree")
    snap = _observed(observed)
    if snap is None:
        from .observe.fleetwide import observe_repo  # the Kubernetes client: only to observe now
        snap = observe_repo(sources.read_worktree(repo), os.environ.get("KUBECONFIG"), clock.now())
    items = collect(head, snap)
    if write:
        for f in items:      # all or nothing: every file checked before the first is removed
            path = repo / f.file
            if path.is_symlink() or not path.is_file():
                raise UsageError(f"{path}: not a regular file, so `fleet gc --write` does not remove it",
                                 "remove it by hand, then run `fleet gc` again")
        with Folder.open(repo, create=False) as folder:
            for f in items:
                if not folder.remove(f.file):
                    raise UsageError(f"{repo / f.file}: cannot remove it (not a regular file, or not writable)",
                                     "remove it by hand, then run `fleet gc` again")
    click.echo(printable(to_json(items) if fmt == "json" else to_text(items, removed=write), lines=True), nl=False)



def _change(repo: Path, base: str | None, solver: Solver, observed: Snapshot | None = None) -> Change:
    """The work tree planned and priced against `base` (if valid: `_base_validated`), from what runs with `observed`."""
    head = _validated(repo, None, "the work tree")
    return pipeline.change(head, _base_validated(repo, base) if base else None, solver=solver, observed=observed)


def _base_validated(repo: Path, base: str) -> Validated | None:
    """The base revision, validated; None (plan without a base) when it has errors (`_base_checked`)."""
    return _base_checked(repo, base)[0]


def _base_checked(repo: Path, base: str) -> tuple[Validated | None, str]:
    """The base revision validated, and ""; or None and its first error (`path:line:col: message`). A broken
    base must not block the change that repairs it: its problems are printed, each prefixed with the revision,
    and the head is planned on its own (no stickiness, no diff), with a warning that says so."""
    result = check(_read(repo, base), load_catalog())
    if result.ok:
        return result, ""
    for line in output.text(result.errors).splitlines():
        click.echo(f"{base}: {line}" if line and not line.startswith(" ") else line, err=True)
    click.echo(f"warning: the base revision {base} does not validate ({len(result.errors)} error(s) above); "
               "planning the work tree without a base: no diff, no stickiness", err=True)
    first = result.errors[0]
    return None, f"{first.path}:{first.line}:{first.col}: {first.message}"


def _check_budgets(found: tuple[Any, ...], fail: bool) -> None:
    """Budget breaches are reported in the output; with --fail-on-violation they also reject (exit 1)."""
    if found and fail:
        raise RejectedError("; ".join(v.message() for v in found),
                            "lower the change's cost, or raise the team's budget_monthly_usd in policies/teams.yaml")


def _write_atomic(path: Path, text: str) -> None:
    """Every file a command writes goes through `safeio` (atomic, never through a planted link)."""
    write_file(path, text)


def _redeliver_swallowed_ctrl_c(hook: Callable[[Any], object]) -> Callable[[Any], object]:
    """`sys.unraisablehook` that sends a Ctrl-C again when it landed in a finalizer: Python swallows an exception
    raised in `__del__` (printing "Exception ignored ... KeyboardInterrupt"), and `fleet cost --history` then ran on
    and exited 1 with that traceback (CI, 2026-12-06: in GitPython's `_CatFileContentStream.__del__`). Sent again,
    it arrives outside the finalizer (should it land in one again, it is sent again), and the command stops with 130
    and no traceback. Anything else goes to `hook`."""
    def redeliver(unraisable: Any) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            # from another thread, a moment later: sent from here, it would land in this hook and be swallowed too
            again = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
            again.daemon = True
            again.start()
            return
        hook(unraisable)
    redeliver.fleet = True     # type: ignore[attr-defined]   # wrapped once, however often `main` runs
    return redeliver


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the command, turn every failure into a message and an exit code."""
    debug = os.environ.get("FLEET_DEBUG") == "1"
    if not getattr(sys.unraisablehook, "fleet", False):
        sys.unraisablehook = _redeliver_swallowed_ctrl_c(sys.unraisablehook)
    try:
        cli.main(args=argv, prog_name="fleet", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:  # usage errors: exit 2
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Abort as e:
        if isinstance(e.__cause__, KeyboardInterrupt):
            sys.exit(130)     # Ctrl-C: at once, like any command line tool (click printed the newline)
        click.echo("aborted", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except FleetError as e:
        if debug:
            raise
        click.echo(f"error: {printable(e.message)}", err=True)
        if e.hint:
            click.echo(f"hint: {printable(e.hint)}", err=True)
        sys.exit(e.exit_code)
    except OSError as e:
        if debug:
            raise
        click.echo(printable(f"error: {e.strerror or e}: {e.filename or ''}".rstrip(": ")), err=True)
        sys.exit(2)
    except Exception as e:  # a bug in Fleet: say so plainly, without a traceback
        if debug:
            raise
        click.echo(printable(f"internal error: {type(e).__name__}: {e}"), err=True)
        click.echo("hint: rerun with FLEET_DEBUG=1 for the traceback and report it", err=True)
        sys.exit(2)


__all__ = ["UsageError", "cli", "main"]
