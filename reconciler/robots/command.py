"""`fleet robot-agent` as a click command (registered by cli.py).  EFFECT (terminal, network, files)."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import click

from ..clock import now
from ..problems import FleetError, printable


def _robot(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?", value):
        raise click.BadParameter(f"{value!r} is not FLEET/ROBOT: give e.g. aloha-sf/aloha-01 (names of robots/)")
    return value


@click.command("robot-agent")
@click.option("--registry", "registry_url", required=True,
              help="the fleet's OCI registry (robots/<fleet>.yaml `registry`), e.g. http://10.0.0.5:5000")
@click.option("--robot", required=True, callback=_robot, help="this robot, FLEET/ROBOT")
@click.option("--state-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="where the models, the `current` link the policy server serves from, and the agent's state live")
@click.option("--once", is_flag=True, help="one round, print its JSON line, exit")
@click.option("--health-url", default=None, help="the policy server's health URL  [default: http://127.0.0.1:"
              "<server port><health_path> of the desired state]")
@click.option("--interval", "interval_s", type=click.FloatRange(min=1), default=30.0, show_default=True,
              help="seconds between rounds")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="seconds one registry request may take")
def robot_agent_cmd(registry_url: str, robot: str, state_dir: Path, once: bool, health_url: str | None,
                    interval_s: float, timeout_s: float) -> None:
    """On a robot: pull, verify and switch the model its desired state names; report health (DESIGN 4d)."""
    from .agent import Agent

    agent = Agent(registry_url, robot, state_dir, health_url, timeout_s)
    while True:
        began = time.monotonic()
        try:
            line = json.dumps(agent.round(now()), sort_keys=False)
        except (FleetError, OSError) as e:      # the daemon goes on; the model running is untouched
            if once:
                raise
            line = json.dumps({"robot": robot, "error": getattr(e, "message", None) or str(e)})
        click.echo(printable(line))
        if once:
            sys.exit(0)
        time.sleep(max(0.0, interval_s - (time.monotonic() - began)))
