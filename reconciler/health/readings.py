"""This node's GPU readings, from a saved `nvidia-smi -q -x` or from NVML, as one model. Pure: text or
decoded JSON in, frozen values out; no I/O.

Two sources, one shape (`NodeReading`), so the analysis (analysis.py) has one code path:

- `from_nvidia_smi_xml(text)`: the XML `nvidia-smi -q -x` prints (DTD nvsmi_device_v13 and its predecessors:
  `clocks_event_reasons` was `clocks_throttle_reasons` before driver 535; Ampere and later count ECC errors as
  `sram_*`/`dram_*`, older GPUs as `single_bit`/`double_bit`). A value the GPU does not support is `N/A` and
  reads as None: "not measured", never "zero".
- `from_nvml(doc)`: the dictionary nvml.py builds from NVML calls, in the shape of the recorded reading
  ../shared/fixtures/nvidia-h100/nvml-health.json: one entry per GPU, a call that failed recorded as
  `{"error": "NVMLError_NotSupported: Not Supported"}` (the exception class and its text), the Xid events
  seen while waiting as `xid_wait_<seconds>s` (`{"error": "NVMLError_Timeout: Timeout"}` when none came,
  else `{"xids": [79]}`).

Clock event reasons are kept as NVML's bit mask (`nvmlClocksEventReason*`, nvml.h), the XML's named
`Active`/`Not Active` flags translated to the same bits.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CLOCK_REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}
"""nvml.h `nvmlClocksEventReason*` (formerly `nvmlClocksThrottleReason*`) bits, by the XML's flag names."""

GPU_LOST = re.compile(r"(?i)GpuIsLost|GPU is lost|fallen off the bus|requires? (a )?reset|ResetRequired")
"""How NVML (NVML_ERROR_GPU_IS_LOST, NVML_ERROR_RESET_REQUIRED) and nvidia-smi say a GPU stopped answering."""


class ReadingError(ValueError):
    """A reading that cannot be understood: where (line and column of the XML, or the JSON field) and why."""

    def __init__(self, message: str, hint: str, where: str = "") -> None:
        super().__init__(message)
        self.message, self.hint, self.where = message, hint, where


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU. None: not reported (not supported by this GPU, or the call failed)."""

    index: int
    bus_id: str
    name: str = ""
    uuid: str = ""
    lost: str | None = None                      # why the GPU does not answer (GPU is lost, reset required)
    ecc_uncorrected_volatile: int | None = None  # since the driver loaded
    ecc_uncorrected_aggregate: int | None = None  # over the GPU's life (infoROM)
    remap_pending: bool | None = None            # a row remap waits for a GPU reset
    remap_failure: bool | None = None            # a remap failed: no spare rows left in a bank
    retired_pages_pending: bool | None = None    # pre-Ampere page retirement waiting for a reset
    sram_threshold_exceeded: bool | None = None  # Hopper+: SRAM uncorrectable errors past NVIDIA's threshold
    unrepairable_memory: bool | None = None      # Blackwell+: memory the GPU cannot repair
    recovery_action: str | None = None           # the driver's own verdict: None, Reset, Reboot, Drain ...
    clock_reasons: int | None = None             # nvmlClocksEventReason* bit mask
    xids: tuple[int, ...] = ()                   # Xid critical errors seen while waiting on NVML events


@dataclass(frozen=True, slots=True)
class NodeReading:
    source: str                        # "NVML" or the XML file's name, for messages
    driver: str | None
    attached: int | None               # GPUs the driver says are attached (nvidia-smi) / NVML's device count
    gpus: tuple[GpuReading, ...]
    xid_wait_s: float | None = None    # how long NVML events were waited for; None: not read (a saved file)


# --- nvidia-smi -q -x ---------------------------------------------------------------------------------------


def _text(el: ET.Element | None, path: str) -> str | None:
    """The stripped text at `path` under `el`; None for a missing element or `N/A` (not supported)."""
    found = el.find(path) if el is not None else None
    if found is None or found.text is None:
        return None
    t = found.text.strip()
    return None if t in ("", "N/A", "[N/A]") or t.startswith("Requested functionality") else t


def _int(el: ET.Element | None, path: str) -> int | None:
    t = _text(el, path)
    if t is None:
        return None
    m = re.match(r"^-?\d+", t)
    return int(m.group()) if m else None


def _yes(el: ET.Element | None, path: str) -> bool | None:
    t = _text(el, path)
    return None if t is None else t.lower() in ("yes", "active", "enabled", "true")


def _uncorrectable(ecc: ET.Element | None) -> int | None:
    """Sum of a `volatile`/`aggregate` block's uncorrectable counters: `sram_uncorrectable_parity`,
    `sram_uncorrectable_secded`, `dram_uncorrectable` (Ampere and later) or `double_bit/total` (older)."""
    if ecc is None:
        return None
    values = [_int(ecc, c.tag) for c in ecc if "uncorrectable" in c.tag]
    older = _int(ecc, "double_bit/total")
    counted = [v for v in [*values, older] if v is not None]
    return sum(counted) if counted else None


def _clock_reasons(gpu: ET.Element) -> int | None:
    block = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if block is None:
        block, prefix = gpu.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
    if block is None:
        return None
    mask, seen = 0, False
    for flag in block:
        bit = CLOCK_REASON_BITS.get(flag.tag.removeprefix(prefix))
        state = (flag.text or "").strip()
        if bit is not None and state in ("Active", "Not Active"):
            seen = True
            mask |= bit if state == "Active" else 0
    return mask if seen else None


def _recovery_action(gpu: ET.Element) -> str | None:
    """`gpu_recovery_action` (drivers 570 and later), else what drivers 535-565 wrote in `gpu_reset_status`."""
    action = _text(gpu, "gpu_recovery_action")
    if action is None and _yes(gpu, "gpu_reset_status/reset_required"):
        return "Drain and Reset" if _yes(gpu, "gpu_reset_status/drain_and_reset_recommended") else "Reset"
    return action


def _lost(gpu: ET.Element) -> str | None:
    for el in gpu.iter():
        if el.text and GPU_LOST.search(el.text):
            return el.text.strip()
    return None


def from_nvidia_smi_xml(text: str | bytes, source: str) -> NodeReading:
    """The reading in `nvidia-smi -q -x` output. Raises ReadingError (with line:col) on text that is not that."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        line, col = e.position
        raise ReadingError(f"not well-formed XML ({str(e).split(':')[0]})",
                           "save the output of `nvidia-smi -q -x` unchanged, e.g. nvidia-smi -q -x > gpus.xml",
                           f"{line}:{col + 1}") from None
    if root.tag != "nvidia_smi_log":
        raise ReadingError(f"the root element is <{root.tag}>, not <nvidia_smi_log>",
                           "pass the output of `nvidia-smi -q -x` (XML), not `nvidia-smi -q` (text)", "1:1")
    gpus = []
    for i, g in enumerate(root.findall("gpu")):     # in NVML's index order, as nvidia-smi numbers them
        ecc = g.find("ecc_errors")
        gpus.append(GpuReading(
            index=i,
            bus_id=g.get("id") or _text(g, "pci/pci_bus_id") or "",
            name=_text(g, "product_name") or "",
            uuid=_text(g, "uuid") or "",
            lost=_lost(g),
            ecc_uncorrected_volatile=_uncorrectable(ecc.find("volatile") if ecc is not None else None),
            ecc_uncorrected_aggregate=_uncorrectable(ecc.find("aggregate") if ecc is not None else None),
            remap_pending=_yes(g, "remapped_rows/remapped_row_pending"),
            remap_failure=_yes(g, "remapped_rows/remapped_row_failure"),
            retired_pages_pending=_yes(g, "retired_pages/pending_retirement"),
            sram_threshold_exceeded=_yes(g, "ecc_errors/aggregate/sram_threshold_exceeded"),
            unrepairable_memory=_yes(g, "ecc_errors/unrepairable_memory"),
            recovery_action=_recovery_action(g),
            clock_reasons=_clock_reasons(g)))
    return NodeReading(source, _text(root, "driver_version"), _int(root, "attached_gpus"), tuple(gpus))


# --- NVML (nvml.py's dictionary) ----------------------------------------------------------------------------


def _failed(v: object) -> str | None:
    """The error text of a call recorded as failed, else None."""
    if isinstance(v, Mapping) and isinstance(v.get("error"), str):
        return str(v["error"])
    return None


def _nv_int(g: Mapping[str, Any], key: str, where: str) -> int | None:
    v = g.get(key)
    if v is None or _failed(v) is not None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ReadingError(f"{key} is {type(v).__name__}, not a whole number", "record NVML's value as is", where)
    return v


def _xids(g: Mapping[str, Any], where: str) -> tuple[int, ...]:
    out: list[int] = []
    for key, v in g.items():
        if key.startswith("xid_wait_") and isinstance(v, Mapping) and "xids" in v:
            xs = v["xids"]
            if not isinstance(xs, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in xs):
                raise ReadingError(f"{key}.xids is not a list of Xid numbers", "e.g. {\"xids\": [79]}", where)
            out.extend(xs)
    return tuple(out)


def _xid_wait_s(gpus: list[Mapping[str, Any]]) -> float | None:
    for g in gpus:
        for key in g:
            m = re.fullmatch(r"xid_wait_(\d+(?:\.\d+)?)s", key)
            if m:
                return float(m.group(1))
    return None


def from_nvml(doc: object) -> NodeReading:
    """The reading in nvml.py's dictionary (module docstring). Raises ReadingError naming the field."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("gpus"), list):
        raise ReadingError("an NVML reading is an object with a list `gpus`", "record it with nvml.read()", "gpus")
    raw: list[Mapping[str, Any]] = []
    gpus = []
    for i, g in enumerate(doc["gpus"]):
        where = f"gpus[{i}]"
        if not isinstance(g, Mapping):
            raise ReadingError("a GPU entry is an object", "record it with nvml.read()", where)
        raw.append(g)
        index = _nv_int(g, "index", where)
        errors = [e for e in (_failed(g), *(_failed(v) for v in g.values())) if e is not None]
        lost = next((e for e in errors if GPU_LOST.search(e)), None)
        rows = g.get("remapped_rows")
        corr_unc_pending_failure = rows if isinstance(rows, list) and len(rows) == 4 else None
        pending = g.get("retired_pages_pending")
        gpus.append(GpuReading(
            index=i if index is None else index,
            bus_id=str(g.get("pci_bus_id") or ""),
            name=str(g.get("name") or ""),
            uuid=str(g.get("uuid") or ""),
            lost=lost,
            ecc_uncorrected_volatile=_nv_int(g, "ecc_uncorrected_volatile", where),
            ecc_uncorrected_aggregate=_nv_int(g, "ecc_uncorrected_aggregate", where),
            remap_pending=bool(corr_unc_pending_failure[2]) if corr_unc_pending_failure else None,
            remap_failure=bool(corr_unc_pending_failure[3]) if corr_unc_pending_failure else None,
            retired_pages_pending=bool(pending) if isinstance(pending, int) else None,
            recovery_action=g.get("recovery_action") if isinstance(g.get("recovery_action"), str) else None,
            clock_reasons=_nv_int(g, "throttle_reasons", where),
            xids=_xids(g, where)))
    count = doc.get("device_count")
    attached = count if isinstance(count, int) and not isinstance(count, bool) else len(gpus)
    driver = doc.get("driver")
    return NodeReading("NVML", driver if isinstance(driver, str) else None, attached, tuple(gpus), _xid_wait_s(raw))
