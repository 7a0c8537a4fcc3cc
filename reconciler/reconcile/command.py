"""`fleet reconcile` and `fleet reconcile-manifests` as click commands (registered by cli.py).  EFFECT (terminal,
files, network through the loop).

Kept beside the loop, as `fleet simulate`'s command is beside the simulator, so cli.py only registers them (and
stays under the size the quality test allows). The few helpers they share with cli.py (`--repo`, a revision
check, the clock, a validated repository) are restated here: cli.py imports this module, so this one cannot
import cli.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from .. import output, pipeline, sources
from ..catalog import load_catalog
from ..cliopts import repo_option
from ..clock import now
from ..problems import RejectedError, UsageError, printable
from ..safeio import write_file
from ..validate import Validated

F = TypeVar("F", bound=Callable[..., Any])


def _revision(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("is empty: name a git revision, e.g. origin/main, or leave the option out")
    return value



def _validated(repo: Path, rev: str | None, what: str) -> Validated:
    files = sources.read_revision(repo, rev) if rev else sources.read_worktree(repo)
    result = pipeline.check(files, load_catalog())
    if not result.ok:
        click.echo(output.text(result.errors), err=True, nl=False)
        raise RejectedError(f"{what} has validation errors", "fix the errors above (`fleet validate` lists them)")
    return result


def _layers(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in ("infra", "kueue", "jobs")]
    if unknown or not names:
        raise click.BadParameter(f"unknown layer(s) {', '.join(unknown) or '(none)'}: name some of infra, kueue, jobs")
    return names


def _address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--metrics-address: an IPv4 or IPv6 address (no host name: what it resolves to could change)."""
    if value is None:
        return None
    import ipaddress

    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an IP address: give e.g. 127.0.0.1 (this host only), "
                                 "0.0.0.0 (every IPv4 address) or ::") from None


@click.command("reconcile")
@repo_option
@click.option("--once", is_flag=True, help="run one cycle and exit (the scheduled workflow)")
@click.option("--interval", "interval_s", type=click.FloatRange(min=1), default=None,
              help="seconds between cycles  [default: reconcile.interval_seconds, 60]")
@click.option("--dry-run", is_flag=True, help="print the actions; change nothing")
@click.option("--layers", default="infra,kueue,jobs", show_default=True, callback=_layers,
              help="what it may touch: infra (pools), kueue (quotas), jobs")
@click.option("--paused", is_flag=True, help="observe and report only (as reconcile.paused: true)")
@click.option("--metrics-port", type=click.IntRange(1, 65535), default=None,
              help="serve Prometheus metrics on this port (loopback only unless --metrics-address)")
@click.option("--metrics-address", default=None, callback=_address,
              help="the address to serve metrics on, e.g. 0.0.0.0 for a pod Prometheus scrapes  [default: 127.0.0.1]")
@click.option("--rev", default=None, callback=_revision,
              help="plan the repository at this git revision (the branch head, e.g. origin/main)  "
                   "[default: the work tree]")
@click.option("--identity", default=None, help="this reconciler's name in the Lease  [default: $POD_NAME or host-pid]")
@click.option("--memory", "memory_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="keep the loop's memory (idle and unreachable clocks, fences) in this file between runs")
@click.option("--log", "log_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="also append the JSON line of every action and cycle to this file")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: sentences for people; json: one JSON line per action and cycle (for log collectors)")
def reconcile_cmd(repo: Path, once: bool, interval_s: float | None, dry_run: bool, layers: tuple[str, ...],
                  paused: bool, metrics_port: int | None, metrics_address: str | None, rev: str | None,
                  identity: str | None,
                  memory_file: Path | None, log_file: Path | None, fmt: str) -> None:
    """The live loop: observe every cluster, plan from git and what runs, act, record (exit 1 if an action failed)."""
    import socket

    from .loop import Config, Reconciler

    name = identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    config = Config(repo=repo, rev=rev, kubeconfig=os.environ.get("KUBECONFIG"), interval_s=interval_s, once=once,
                    dry_run=dry_run, paused=paused, layers=layers, identity=name, memory_file=memory_file,
                    log_file=log_file, json_lines=fmt == "json")
    metrics = None
    if metrics_address is not None and metrics_port is None:
        raise UsageError("--metrics-address needs --metrics-port", "add `--metrics-port N`, or leave both out")
    if metrics_port is not None:
        from ..observability.metrics import LOOPBACK, FleetMetrics

        head = _validated(repo, rev, "the repository")
        metrics = FleetMetrics(head.loaded.slos, started=now())
        try:
            metrics.serve(metrics_port, metrics_address or LOOPBACK)
        except OSError as e:
            raise UsageError(f"cannot serve metrics on {metrics_address or LOOPBACK} port {metrics_port}: "
                             f"{e.strerror or e}", "pick a free port and an address of this host, or leave "
                             "--metrics-port out") from None
    loop = Reconciler(config, clock=now, say=lambda line: click.echo(printable(line)), metrics=metrics)
    if not once:
        loop.run()
    try:
        report = loop.cycle()
    finally:
        loop.release_lease()        # --once: the Lease it held is given back at once, not left to expire
    sys.exit(1 if report.errors or any(r.status == "failed" for r in report.results) else 0)


IMAGE_HINT = "pin a reference, e.g. ghcr.io/org/fleet:0.1.0 or ghcr.io/org/fleet@sha256:<64 hex digits>"
URL_HINT = "give https://HOST/ORG/REPO.git or git@HOST:ORG/REPO.git, with no credentials in it"


def _checked(value: str, rule: str, hint: str) -> str:
    """`value` if deploy's `rule` finds no problem in it, else a usage error (exit 2) that says what and how."""
    from . import deploy

    why = getattr(deploy, rule)(value)
    if why is not None:
        raise click.BadParameter(f"{value!r} {why}; {hint}")
    return value


@click.command("reconcile-manifests")
@repo_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("deploy/manifests"),
              show_default=True, help="folder for management.yaml and managed-cluster.yaml")
@click.option("--image", required=True, callback=lambda c, p, v: _checked(v, "image_problem", IMAGE_HINT),
              help="the reconciler's container image (deploy/Dockerfile), pinned")
@click.option("--git-repo", required=True, callback=lambda c, p, v: _checked(v, "git_url_problem", URL_HINT),
              help="URL of this fleet repository, for the git-sync sidecar")
@click.option("--branch", default="main", show_default=True,
              callback=lambda c, p, v: _checked(v, "branch_problem", "e.g. main or release/2025-06"),
              help="the branch the reconciler follows")
def reconcile_manifests_cmd(repo: Path, out: Path, image: str, git_repo: str, branch: str) -> None:
    """Write the Kubernetes manifests that run `fleet reconcile` in the lease cluster (Deployment, RBAC, Lease)."""
    from .deploy import manifests

    head = _validated(repo, None, "the work tree")
    for name, text in manifests(head, image, git_repo, branch).items():
        write_file(out / name, text)
        click.echo(f"wrote {out / name}")
