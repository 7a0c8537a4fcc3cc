"""The researcher's commands: `fleet submit`, `fleet status [TEAM/JOB]`, `fleet logs`.  EFFECT (terminal, files,
git, network).

They sit beside cli.py (which registers them) and keep to its rules: exit 0 ok, 1 rejected, 2 usage or
environment; a located message and a hint, never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from . import clock, output, pipeline, sources
from .catalog import load_catalog
from .cliopts import known_job, repo_option, validated
from .problems import RejectedError, UsageError, printable
from .safeio import Folder
from .submit import Flags, check_branch, job_document, job_text, split_id, verdict

if TYPE_CHECKING:
    from .reconcile.model import GroupTry

TOKEN_VARS = ("GITHUB_TOKEN", "GH_TOKEN")


@click.command("submit", context_settings={"ignore_unknown_options": False})
@repo_option
@click.argument("job")
@click.option("--image", default=None, help="the container image, e.g. us-docker.pkg.dev/ml/train:2026.11")
@click.option("--accelerator", default=None, help="a catalog accelerator, e.g. tpu-v5p or nvidia-h100-80gb")
@click.option("--count", type=click.IntRange(min=1), default=None, help="chips or GPUs in total")
@click.option("--topology", default=None, help="TPU: the exact slice shape, e.g. 4x4x4 (instead of --count)")
@click.option("--slices", type=click.IntRange(min=1), default=None, help="TPU: slices of that shape (multislice)")
@click.option("--hours", type=click.FloatRange(min=0, min_open=True), default=None,
              help="expected runtime (duration_hours): the run cost and the start estimates of others")
@click.option("--priority", default=None, help="a class of policies/priorities.yaml  [default: its default]")
@click.option("--kind", type=click.Choice(["training", "inference", "batch"]), default=None)
@click.option("--spot", type=click.Choice(["never", "allowed", "required"]), default=None)
@click.option("--env", "env", multiple=True, help="KEY=VALUE, repeatable (plain settings: no secrets)")
@click.option("--from", "from_job", default=None, help="start from this job's file (TEAM/JOB); flags override")
@click.option("--branch", default=None, help="the new branch  [default: submit/TEAM-NAME]")
@click.option("--no-git", is_flag=True, help="write, validate and plan only: no branch, commit or pull request")
@click.option("--github-repo", default=None, help="OWNER/REPO of the pull request  [default: GITHUB_REPOSITORY, "
              "else the origin remote]")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def submit_cmd(repo: Path, job: str, image: str | None, accelerator: str | None, count: int | None,
               topology: str | None, slices: int | None, hours: float | None, priority: str | None,
               kind: str | None, spot: str | None, env: tuple[str, ...], from_job: str | None, branch: str | None,
               no_git: bool, github_repo: str | None, command: tuple[str, ...]) -> None:
    """Write jobs/TEAM/NAME.yaml from flags (the command after `--`), validate it, plan it against the fleet
    (where, when, what it costs), commit it on a new branch and open the pull request (GITHUB_TOKEN or
    GH_TOKEN), or print the git commands that do. Writes nothing outside jobs/TEAM/."""
    from .submit_git import commit_on_branch, push_and_open
    from .submit_git import github_repo as find_slug

    team, name = split_id(job)
    files = sources.read_worktree(repo)
    rel = f"jobs/{team}/{name}.yaml"
    if rel in files:
        raise UsageError(f"{repo / rel} exists already", "edit it, or submit under another NAME")
    for flag, values in (("--image", (image or "",)), ("--env", env), ("the command after --", command),
                         ("--from", (from_job or "",)), ("--branch", (branch or "",))):
        for value in values:
            if not _utf8(value):    # the shell passed bytes that are not UTF-8: the YAML written could not hold them
                raise UsageError(f"{flag}: `{value.encode('utf-8', 'replace').decode()}` is not UTF-8 text",
                                 "give it as UTF-8 (check the terminal's locale or the script that builds it)")
    if branch is not None and not no_git:
        check_branch(branch)
    flags = Flags(image=image, accelerator=accelerator, count=count, topology=topology, slices=slices, hours=hours,
                  priority=priority, kind=kind, spot=spot, env=env, command=command)
    text = job_text(job_document(team, name, flags, _from(files, from_job) if from_job else None))
    head = pipeline.check({**files, rel: text.encode()}, load_catalog())
    if not head.ok:                       # 1. valid, or nothing is written
        click.echo(output.text(head.errors), err=True, nl=False)
        mine = any(p.path == rel for p in head.errors)
        raise RejectedError(f"{'the job' if mine else 'the repository'} does not validate; nothing was written",
                            "fix the flags (the errors above name the fields)" if mine
                            else "fix the errors above first (`fleet validate` lists them)")
    with Folder.open(repo, create=False) as root:     # 2. only jobs/TEAM/NAME.yaml, never through a link
        root.write(rel, text)
    click.echo(f"wrote {repo / rel}")
    seen = verdict(head, pipeline.plan(head), f"{team}/{name}", clock.now())   # 3. where, when, what it costs
    for line in seen.lines():
        click.echo(printable(line))
    if no_git:
        return
    title = f"jobs: submit {team}/{name}"
    done = commit_on_branch(repo, rel, branch or f"submit/{team}-{name}", title)     # 4. branch, commit, PR
    if done.commit:
        click.echo(f"committed {rel} on the new branch {done.branch} ({done.commit[:12]})")
        token = next((os.environ[v] for v in TOKEN_VARS if os.environ.get(v)), None)
        body = "\n".join([f"Submitted with `fleet submit {team}/{name}`.", "", *seen.lines()])
        done = push_and_open(repo, done, title, body, find_slug(repo, github_repo), token)
    if done.pull_request:
        click.echo(f"opened the pull request {done.pull_request}")
    if done.problem:
        click.echo(f"warning: {printable(done.problem)}", err=True)
    if done.commands:
        no_token = not done.problem and done.commit
        click.echo("to open the pull request" + (" (no GITHUB_TOKEN or GH_TOKEN here)" if no_token else "")
                   + ", run:")
        for c in done.commands:
            click.echo(f"  {printable(c)}")


def _from(files: dict[str, bytes], job: str) -> dict[str, Any]:
    """The document of the job file `--from` names (valid YAML: the check that follows reports the rest)."""
    ids = sorted(p[len("jobs/"):-len(".yaml")] for p in files if p.startswith("jobs/") and p.endswith(".yaml"))
    team, name = split_id(known_job(job, ids), "for --from")
    path = f"jobs/{team}/{name}.yaml"
    try:
        doc = yaml.safe_load(files[path])
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
        raise RejectedError(f"{where}: --from: the file is not valid YAML ({getattr(e, 'problem', None) or e})",
                            "fix it first (`fleet validate` locates every problem), or start from another one") \
            from None
    if not isinstance(doc, dict):
        raise UsageError(f"jobs/{team}/{name}.yaml is no job document", "run `fleet validate`")
    return doc


@click.command("status")
@repo_option
@click.argument("job", required=False)
@click.option("--observed", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="a snapshot `fleet observe --format json` wrote  [default: observe now]")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html", "prometheus"]), default="text",
              show_default=True, help="prometheus: Fleet's metrics of this snapshot and the plan, in the text format")
@click.option("--memory", "memory_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="the memory file `fleet reconcile --memory` keeps: what the loop did of job groups that ran in part")
def status_cmd(repo: Path, job: str | None, observed: Path | None, fmt: str, memory_file: Path | None) -> None:
    """Every job's phase, place, since when, queue wait, restarts and cost so far; pools' health; teams' use.
    With TEAM/JOB, that job's story: the plan's decision and why, its phase on each cluster, since when,
    restarts, recent events, cost so far, and when it is expected to start."""
    from .observe.files import read_snapshot
    from .status import status
    from .status.render import to_html, to_json, to_text

    head = validated(repo, None, "the work tree")
    if job is not None:
        known_job(job, head.options)
        if fmt not in ("text", "json"):
            raise UsageError(f"`fleet status TEAM/JOB` writes text or json, not {fmt}", "use --format json")
    files = sources.read_worktree(repo)
    if observed:
        snap = read_snapshot(observed)
    else:
        from .observe.fleetwide import observe_repo  # the Kubernetes client: only to observe now
        snap = observe_repo(files, os.environ.get("KUBECONFIG"), clock.now())
    planned = pipeline.plan(head, observed=snap)        # the plan from git and what runs: why jobs wait
    if fmt == "prometheus":
        from .observability.metrics import FleetMetrics

        metrics = FleetMetrics(head.loaded.slos)
        metrics.update(head, snap, planned, snap.observed_at)
        click.echo(printable(metrics.exposition(), lines=True), nl=False)
        return
    tries: Mapping[str, GroupTry] = {}
    if memory_file is not None:
        from .reconcile.loop import read_memory

        tries = read_memory(memory_file).groups
    report = status(head, snap, planned, tries)
    if job is not None:
        from .status.story import story, story_json, story_text

        doc = story(head, snap, planned, report, job)
        click.echo(printable(story_json(doc) if fmt == "json" else story_text(doc), lines=True), nl=False)
        for c in report.clusters:   # none read: the error below points at each cluster's error and its fix
            if not report.read_any and c.status == "unreachable":
                for message, hint in c.problems:
                    click.echo(printable(f"warning: not read: {message}" + (f" (hint: {hint})" if hint else "")),
                               err=True)
    else:
        click.echo(printable({"text": to_text, "json": to_json, "html": to_html}[fmt](report), lines=True), nl=False)
    if not report.read_any:
        raise UsageError("no cluster could be read: what runs, spend and budgets are unknown (each cluster's "
                         "error is above)", "fix the kubeconfig contexts or the clusters' access, or pass "
                         "`--observed FILE` from a `fleet observe` that could read them")


@click.command("logs")
@repo_option
@click.argument("job")
@click.option("--follow", "-f", is_flag=True, help="stream new lines until the container exits (Ctrl-C stops)")
@click.option("--tail", type=click.IntRange(min=0), default=None, help="only the last N lines of each pod")
@click.option("--all", "every", is_flag=True, help="every pod of the job, each line prefixed [cluster/pod]")
def logs_cmd(repo: Path, job: str, follow: bool, tail: int | None, every: bool) -> None:
    """The job's pod logs through each cluster's API (the context its YAML names): the leader or rank 0 first;
    --all for every pod."""
    from .load import load
    from .observe.logs import chosen, find_pods, stream

    loaded = load(sources.read_worktree(repo))
    known_job(job, {j.id for j in loaded.jobs})
    team, name = split_id(job)
    kubeconfig = os.environ.get("KUBECONFIG")
    found = find_pods(loaded, team, name, kubeconfig)
    for problem in found.problems:
        click.echo(f"warning: not read: {printable(problem)}", err=True)
    pods = chosen(job, found, every)
    if not every:
        others = len(found.pods) - 1
        click.echo(f"==> {pods[0].label} (leader" + (f"; {others} more pod(s): --all shows them" if others else "")
                   + ") <==", err=True)
    failures = stream(pods, kubeconfig, tail=tail, follow=follow, prefix=every,
                      write=lambda line: click.echo(printable(line)))
    for f in failures:
        click.echo(f"error: {printable(f)}", err=True)
    if failures and len(failures) == len(pods):
        raise UsageError(f"no log of {job} could be read", "the errors above say why")


CLI = [submit_cmd, status_cmd, logs_cmd]


def _utf8(text: str) -> bool:
    """Whether `text` is UTF-8 as given (an argument Python decoded with surrogate escapes is not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
