"""GPU health checks: `fleet health-check` and the node-problem-detector plugin that runs it.

- readings.py: `nvidia-smi -q -x` text or an NVML reading -> `NodeReading` (pure);
- analysis.py: `NodeReading` -> `Verdict` (healthy / problem / unknown, one line, exit code 0/1/2) (pure);
- nvml.py: this node's GPUs through NVML, `nvidia-ml-py` imported only when called (EFFECT);
- check.py: the command's edge: a saved file or NVML, then the analysis; never raises (EFFECT).

The node condition the plugin sets is `CONDITION` (True: a problem). reconciler/observe/parse.py reads every
condition type naming an accelerator as accelerator health, a type not ending in Ready/Healthy as a problem
when True, so a node with `FleetGPUProblem=True` counts as accelerator-unhealthy and its unit is failed after
`reconcile.node_failed_after_minutes`; Unknown (the check could not tell) leaves it in service.
"""

from .analysis import FATAL_XIDS, Fault, Verdict, analyze
from .readings import GpuReading, NodeReading, ReadingError, from_nvidia_smi_xml, from_nvml

CONDITION = "FleetGPUProblem"
"""The node condition type; node-problem-detector's problem-style polarity (True means a problem)."""

__all__ = ["CONDITION", "FATAL_XIDS", "Fault", "GpuReading", "NodeReading", "ReadingError", "Verdict", "analyze",
           "from_nvidia_smi_xml", "from_nvml"]
