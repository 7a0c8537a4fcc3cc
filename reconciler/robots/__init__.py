"""Robots (DESIGN 4d): models rolled out to robot fleets in waves, gated on health, with rollback.

- `models`: the two documents, robots/<fleet>.yaml and deployments/<name>.yaml.          pure
- `validate`: their rules across fields and documents; `cron`: the window.               pure
- `rollout`: the loop's decision, a function of a deployment, its robots' statuses and the time.   pure
- `plan`: which robots get which model in which wave, bytes and hours per site (review). pure
- `render`: Rancher Fleet GitRepos of the admitted waves of k3s robots.                   pure
- `registry`: the OCI registry through oras; `agent`: `fleet robot-agent`; `layer`: the loop's
  robots layer (read statuses, decide, push desired states); `command`: the click command.  EFFECT
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """`CLI`: the commands cli.py's group carries, imported only when asked for."""
    if name == "CLI":
        from .command import robot_agent_cmd

        return [robot_agent_cmd]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
