"""`fleet health-check` as a click command, registered by cli.py (under 500 lines).  EFFECT (terminal, env).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..problems import UsageError, printable


@click.command("health-check")
@click.option("--nvidia-smi-xml", "xml", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="judge a saved `nvidia-smi -q -x` instead of reading the GPUs through NVML")
@click.option("--nvml-json", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="judge a saved NVML reading (the shape of ../shared/fixtures/nvidia-h100/nvml-health.json)")
@click.option("--expected-gpus", type=click.IntRange(min=1), default=None,
              help="GPUs this node should have: fewer visible means one fell off the bus")
@click.option("--xid-wait-seconds", type=click.FloatRange(min=0, max=60), default=5.0, show_default=True,
              help="how long to wait for Xid events through NVML (0: do not wait)")
def health_check_cmd(xml: Path | None, nvml_json: Path | None, expected_gpus: int | None,
                     xid_wait_seconds: float) -> None:
    """This node's GPU health, as a node-problem-detector custom plugin: exit 0 healthy, 1 a problem (one
    line on stdout says which GPU and what), 2 cannot tell (no NVIDIA driver, an unreadable file)."""
    from .analysis import unknown
    from .check import run

    if xml is not None and nvml_json is not None:
        raise UsageError("--nvidia-smi-xml and --nvml-json both given", "pass one saved reading, or neither")
    try:
        verdict = run(xml=xml, nvml_json=nvml_json, expected_gpus=expected_gpus, xid_wait_s=xid_wait_seconds)
    except Exception as e:  # a bug: node-problem-detector still gets one line and "unknown"
        if os.environ.get("FLEET_DEBUG") == "1":
            raise
        verdict = unknown(f"internal error: {type(e).__name__}: {e} (hint: rerun with FLEET_DEBUG=1 and report it)")
    click.echo(printable(verdict.line))
    sys.exit(verdict.exit_code)
