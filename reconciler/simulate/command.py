"""`fleet simulate` as a click command (registered by cli.py).  EFFECT (terminal, files).

Kept beside the simulator so cli.py only registers it; the options are DESIGN 3's plus the generator's,
the importer's and the fault model's knobs. Everything else happens in run.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..catalog import load_catalog
from ..cliopts import repo_option
from ..problems import printable
from ..safeio import write_file
from ..sources import read_worktree
from .run import cli_run

F = TypeVar("F", bound=Callable[..., Any])


@click.command("simulate")
@repo_option
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="the trace: JSON Lines, one job document per line plus submit_at_minutes (DESIGN 4c)")
@click.option("--days", type=click.FloatRange(min=0.01, max=3650), default=None,
              help="simulated days  [default: the trace's span]")
@click.option("--policy", "policies", default="fleet", show_default=True,
              help="one or more of fleet, fifo, kueue, kueue-multikueue, cheapest, comma-separated (a side-by-side "
                   "table)")
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True, help="seeds faults and --generate")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "html"]), default="md", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="simulate: write simulate.md, .json and .html into this directory; --generate and "
                   "--import-alibaba: the trace file to write")
@click.option("--outage", "outages", multiple=True, metavar="CLUSTER@HOUR+HOURS",
              help="a scheduled outage of a whole cluster, e.g. gke-use5@48+6 (repeatable)")
@click.option("--no-faults", is_flag=True, help="turn the fault model off (outages still happen)")
@click.option("--spot-reclaims-per-hour", type=click.FloatRange(min=0, max=10), default=None,
              help="spot reclaims per spot unit per hour  [default: 0.0005]")
@click.option("--restart-minutes", type=click.FloatRange(min=0, max=1440), default=None,
              help="what each interruption costs a job (restore and warm-up) unless its trace line says "
                   "restart_minutes  [default: 10]")
@click.option("--interval-seconds", type=click.IntRange(min=1, max=86400), default=None,
              help="the loop's interval  [default: reconcile.interval_seconds of policies/placement.yaml, or 60]")
@click.option("--generate", "generate_n", type=click.IntRange(min=1, max=1_000_000), default=None,
              help="write a generated trace of N jobs for this fleet instead of simulating")
@click.option("--load", type=click.FloatRange(min=0.01, max=10), default=0.9, show_default=True,
              help="--generate: expected accelerator-hours over what the fleet gives its teams (quota-capped)")
@click.option("--workloads", type=click.FloatRange(min=0, max=1), default=0.0, show_default=True,
              help="--generate: share of eligible jobs that are Ray jobs, elastic gangs or job groups (issue 26)")
@click.option("--import-alibaba", "alibaba", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write a trace from an Alibaba cluster-trace-gpu-v2023 pod list (openb_pod_list_*.csv)")
def simulate_cmd(repo: Path, trace_file: Path | None, days: float | None, policies: str, seed: int, fmt: str,
                 out: Path | None, outages: tuple[str, ...], no_faults: bool, spot_reclaims_per_hour: float | None,
                 restart_minutes: float | None, interval_seconds: int | None, generate_n: int | None, load: float,
                 workloads: float,
                 alibaba: Path | None) -> None:
    """Replay a trace through the planner and the loop against simulated clusters, with faults; compare policies."""
    text = cli_run(read_worktree(repo), load_catalog(), trace_file=trace_file, days=days,
                   policies=policies, seed=seed, fmt=fmt, out=out, outages=outages, no_faults=no_faults,
                   spot_reclaims_per_hour=spot_reclaims_per_hour, restart_minutes=restart_minutes,
                   interval_seconds=interval_seconds,
                   generate_n=generate_n, load=load, alibaba=alibaba, write=write_file,
                   warn=lambda m: click.echo(printable(m, lines=True), err=True, nl=False), workloads=workloads)
    click.echo(printable(text, lines=True), nl=False)
