"""`python -m reconciler.robots --registry URL --robot FLEET/ROBOT --state-dir DIR [--once]`: `fleet robot-agent`
without the rest of the CLI loaded (no planner, no pydantic models), for robots with little memory to spare
(bench/bench_robots.py measures both)."""

from __future__ import annotations

import sys

from ..problems import FleetError, printable
from .command import robot_agent_cmd


def main() -> None:
    try:
        robot_agent_cmd.main(prog_name="fleet robot-agent", standalone_mode=True)
    except FleetError as e:
        print(f"error: {printable(e.message)}", file=sys.stderr)
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
