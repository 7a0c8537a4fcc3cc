"""Is this node fit to run GPU work? Readings in, one verdict out. Pure.

The verdict follows node-problem-detector's custom plugin protocol (pkg/custompluginmonitor in
kubernetes/node-problem-detector): exit 0 healthy (the node condition becomes False), 1 a problem (True,
with the one stdout line as its message), 2 unknown (Unknown: "cannot tell" never takes a node out).

A fault is something that means "take this node out" (cordon, drain, reset or replace), never a warning:

- uncorrectable ECC errors since the driver loaded (volatile): NVIDIA's Xid 48 (double-bit ECC) / 94-95
  (contained / uncontained) family, DCGM's DBE policy. The aggregate (lifetime) count alone is a fault only on
  a GPU that cannot repair memory: with row remapping (Ampere and later) or page retirement, an old error was
  repaired when its row was remapped, and what counts is a remap pending or failed (below). A real H100 in
  service read 2 lifetime uncorrectable errors with 1 row remapped and nothing pending: healthy, the line
  says so, and draining it for its history would take a good node out for good (the counter never resets);
- row remapping (HBM GPUs, Ampere and later): a failed remap (no spare rows: NVIDIA resolution RESET_GPU,
  then replace if it recurs; Xid 64) or a remap pending until the GPU is reset (Xid 63);
- pending retired pages (pre-Ampere page retirement: the page is retired at the next reset);
- SRAM uncorrectable errors past NVIDIA's threshold, memory the GPU cannot repair, and any recovery action
  the driver itself asks for (`gpu_recovery_action` other than None: Reset, Reboot, Drain P2P, ...);
- a GPU that fell off the bus: the driver answers "GPU is lost" (NVML_ERROR_GPU_IS_LOST, Xid 79), fewer GPUs
  readable than attached, or fewer than the node's shape says it has (`expected_gpus`);
- an Xid from FATAL_XIDS seen while waiting on NVML events;
- hardware slowdown: clock event reasons HW slowdown, HW thermal slowdown, HW power brake (the board's power
  supply asserted the brake) and SW thermal slowdown (the GPU is past its maximum operating temperature).
  GPU idle, application clocks, the software power cap and sync boost are normal operation and never count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .readings import GpuReading, NodeReading

FATAL_XIDS: dict[int, str] = {
    46: "GPU stopped processing",
    48: "double-bit ECC error",
    54: "auxiliary power not connected",
    62: "internal micro-controller halt",
    63: "GPU memory row remapping event",
    64: "GPU memory row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    95: "uncontained memory error",
    109: "context switch timeout",
    110: "security fault",
    119: "GSP RPC timeout",
    120: "GSP error",
    136: "link training failed",
    140: "unrecoverable ECC error",
    142: "NVENC3 error",
    143: "GPU initialization error",
    151: "key rotation error",
    155: "NVLink SW defined error",
    156: "resource retirement event",
    158: "GPU fatal timeout",
}
"""The Xids that mean the GPU cannot be trusted until it is reset or replaced: the EKS node monitoring agent's
`WellKnownXidCodes` (aws/eks-node-monitoring-agent, monitors/nvidia/dcgm/dcgm_policies.go), the list whose
Xids set its `AcceleratedHardwareReady` condition False, each with NVIDIA's resolution bucket RESET_GPU,
RESTART_BM, WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR, CHECK_MECHANICALS, RESTART_VM or CONTACT_SUPPORT in the Xid
catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html); 63 is IGNORE for NVIDIA but EC2
replaces the instance (repeated remaps exhaust the spare rows). Other Xids (13, 31, 43: an application's
fault, RESTART_APP; 94: a contained ECC error, the application is killed and the GPU carries on) do not take
the node out. Descriptions are NVIDIA's catalog's."""

SLOWDOWN_BITS: dict[int, str] = {
    0x8: "HW slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake slowdown",
    0x20: "SW thermal slowdown",
}
"""Clock event reasons (nvml.h `nvmlClocksEventReason*`) that mean the hardware is protecting itself."""

Status = Literal["healthy", "problem", "unknown"]
EXIT_CODE: dict[Status, int] = {"healthy": 0, "problem": 1, "unknown": 2}


@dataclass(frozen=True, slots=True)
class Fault:
    gpu: int | None          # the GPU's index; None for the node as a whole (a GPU missing)
    bus_id: str
    what: str

    def line(self) -> str:
        where = "node" if self.gpu is None else f"GPU {self.gpu}" + (f" ({self.bus_id})" if self.bus_id else "")
        return f"{where}: {self.what}"


@dataclass(frozen=True, slots=True)
class Verdict:
    status: Status
    line: str                       # the one stdout line (node-problem-detector's condition message)
    faults: tuple[Fault, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_CODE[self.status]


def unknown(why: str) -> Verdict:
    return Verdict("unknown", f"cannot tell: {why}")


def _repairs(g: GpuReading) -> bool:
    """The GPU repairs uncorrectable memory errors itself: row remapping (Ampere and later) or page
    retirement (older) reports its state, so a pending or failed repair is what counts, not the history."""
    return g.remap_pending is not None or g.remap_failure is not None or g.retired_pages_pending is not None


def _notes(g: GpuReading) -> list[str]:
    """What a healthy GPU's line mentions: history that is not a fault."""
    if g.ecc_uncorrected_aggregate and _repairs(g) and not g.ecc_uncorrected_volatile:
        return [f"GPU {g.index}: {g.ecc_uncorrected_aggregate} uncorrectable ECC error(s) in its lifetime, repaired"]
    return []


def _faults_of(g: GpuReading) -> list[str]:
    """What is wrong with one GPU, in the order of the module docstring."""
    if g.lost is not None:
        return [f"fell off the bus ({g.lost})"]
    out: list[str] = []
    if g.ecc_uncorrected_volatile:
        out.append(f"{g.ecc_uncorrected_volatile} uncorrectable ECC error(s) since the driver loaded")
    elif g.ecc_uncorrected_aggregate and not _repairs(g):
        out.append(f"{g.ecc_uncorrected_aggregate} uncorrectable ECC error(s) in its lifetime (aggregate), and "
                   "no row remapping or page retirement to repair them")
    if g.remap_failure:
        out.append("row remapping failed (no spare rows left)")
    if g.remap_pending:
        out.append("row remapping pending (reset the GPU)")
    if g.retired_pages_pending:
        out.append("retired pages pending (reset the GPU)")
    if g.sram_threshold_exceeded:
        out.append("SRAM uncorrectable errors past NVIDIA's threshold")
    if g.unrepairable_memory:
        out.append("unrepairable memory")
    if g.recovery_action and g.recovery_action.lower() != "none":
        out.append(f"the driver asks for recovery action {g.recovery_action}")
    out.extend(f"Xid {x} ({FATAL_XIDS[x]})" for x in sorted(set(g.xids)) if x in FATAL_XIDS)
    slow = [name for bit, name in SLOWDOWN_BITS.items() if g.clock_reasons is not None and g.clock_reasons & bit]
    if slow:
        out.append(", ".join(slow))
    return out


def analyze(reading: NodeReading, expected_gpus: int | None = None) -> Verdict:
    """The node's verdict. Every fault is listed (GPU order, then the order of the module docstring); the line
    names them all, separated by `; `, so one line says everything the condition message needs."""
    faults: list[Fault] = []
    readable = len(reading.gpus)
    attached = reading.attached if reading.attached is not None else readable
    if attached > readable:
        faults.append(Fault(None, "", f"{attached} GPUs attached but only {readable} readable (a GPU fell off "
                                      "the bus)"))
    if expected_gpus is not None and attached < expected_gpus:
        faults.append(Fault(None, "", f"{attached} of {expected_gpus} GPUs visible (a GPU fell off the bus)"))
    faults.extend(Fault(g.index, g.bus_id, what) for g in reading.gpus for what in _faults_of(g))
    if faults:
        return Verdict("problem", "; ".join(f.line() for f in faults), tuple(faults))
    if not reading.gpus:
        return unknown(f"no NVIDIA GPU found ({reading.source})")
    names = sorted({g.name for g in reading.gpus if g.name})
    waited = "" if reading.xid_wait_s is None else f", no fatal Xid in {reading.xid_wait_s:g}s"
    driver = f", driver {reading.driver}" if reading.driver else ""
    notes = "".join(f"; {n}" for g in reading.gpus for n in _notes(g))
    return Verdict("healthy", f"healthy: {readable} GPU(s) {'/'.join(names)}{driver}{waited} ({reading.source})"
                              f"{notes}")
