"""Stage 4: the planner. `plan(validated, base=None) -> Plan`; see `planner.py` for the algorithm."""

from .planner import plan
from .types import Plan, plan_from_dict

__all__ = ["Plan", "plan", "plan_from_dict"]
