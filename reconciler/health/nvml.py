"""This node's GPUs read through NVML (the `nvidia-ml-py` package, module `pynvml`).  EFFECT (NVML, clock).

`read(xid_wait_s)` returns the dictionary readings.from_nvml() parses, in the shape of the recorded reading
../shared/fixtures/nvidia-h100/nvml-health.json (readings.py says which fields). `pynvml` is imported here
and only here, when called: Fleet imports and runs without it, and a node without the NVIDIA driver gets
`NoNvml` (the check says "cannot tell", exit 2), never an ImportError or a traceback.

Xid errors arrive as NVML events (`nvmlEventTypeXidCriticalError`): NVML delivers only events that happen
after the event set is registered, so the check waits `xid_wait_s` seconds at most (bounded, so a
node-problem-detector invocation never hangs) and reports what came. Xids logged before it started are in the
kernel log (`NVRM: Xid`), which the EKS node monitoring agent and DCGM read; the lasting effects of the
fatal ones (lost GPU, ECC counters, remapped rows, recovery action) are read directly every time.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from functools import partial
from typing import Any

RECOVERY_ACTIONS = {0: "None", 1: "Reset", 2: "Reboot", 3: "Drain P2P", 4: "Drain and Reset",
                    5: "Recover IMEX domain", 6: "Bus reset", 7: "System reboot"}
"""nvml.h `NVML_GPU_RECOVERY_ACTION_*`, named as `nvidia-smi -q` prints `gpu_recovery_action`."""

FIELD_RECOVERY_ACTION = 230
"""nvml.h `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION` (drivers 570 and later; older ones answer not supported)."""


class NoNvml(Exception):
    """NVML cannot be used on this node: no `nvidia-ml-py`, no driver, or NVML failed to start."""


def _error(e: BaseException) -> dict[str, str]:
    return {"error": f"{type(e).__name__}: {e}"}


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _call(nv: Any, fn: Callable[[], Any]) -> Any:
    """fn(), or its NVML error recorded as `{"error": ...}` (readings.py reads both)."""
    try:
        return fn()
    except nv.NVMLError as e:
        return _error(e)


def _recovery_action(nv: Any, h: Any) -> Any:
    values = nv.nvmlDeviceGetFieldValues(h, [FIELD_RECOVERY_ACTION])
    if values[0].nvmlReturn != 0:
        return {"error": f"NVML return {values[0].nvmlReturn}"}
    return RECOVERY_ACTIONS.get(values[0].value.uiVal, f"action {values[0].value.uiVal}")


def _gpu(nv: Any, index: int, h: Any) -> dict[str, Any]:
    throttle = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        nv.nvmlDeviceGetCurrentClocksThrottleReasons
    uncorrected = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    return {
        "index": index,
        "name": _call(nv, lambda: _text(nv.nvmlDeviceGetName(h))),
        "uuid": _call(nv, lambda: _text(nv.nvmlDeviceGetUUID(h))),
        "pci_bus_id": _call(nv, lambda: _text(nv.nvmlDeviceGetPciInfo(h).busId)),
        "ecc_uncorrected_volatile": _call(nv, lambda: nv.nvmlDeviceGetTotalEccErrors(h, uncorrected,
                                                                                    nv.NVML_VOLATILE_ECC)),
        "ecc_uncorrected_aggregate": _call(nv, lambda: nv.nvmlDeviceGetTotalEccErrors(h, uncorrected,
                                                                                     nv.NVML_AGGREGATE_ECC)),
        "remapped_rows": _call(nv, lambda: list(nv.nvmlDeviceGetRemappedRows(h))),
        "retired_pages_pending": _call(nv, lambda: nv.nvmlDeviceGetRetiredPagesPendingStatus(h)),
        "throttle_reasons": _call(nv, lambda: int(throttle(h))),
        "recovery_action": _call(nv, lambda: _recovery_action(nv, h)),
    }


def _wait_xids(nv: Any, handles: dict[int, Any], gpus: dict[int, dict[str, Any]], wait_s: float) -> None:
    """Register every GPU that supports it for Xid critical errors and wait up to `wait_s` seconds; record
    under each GPU's `xid_wait_<s>s` the Xids seen, or the error (a timeout: none came)."""
    key = f"xid_wait_{wait_s:g}s"
    xids: dict[int, list[int]] = {}
    events = nv.nvmlEventSetCreate()
    try:
        for i, h in handles.items():
            try:
                if nv.nvmlDeviceGetSupportedEventTypes(h) & nv.nvmlEventTypeXidCriticalError:
                    nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, events)
                    xids[i] = []
                else:
                    gpus[i][key] = {"error": "Xid events not supported"}
            except nv.NVMLError as e:
                gpus[i][key] = _error(e)
        deadline = time.monotonic() + wait_s
        last: BaseException | None = None
        while xids and (left_ms := int((deadline - time.monotonic()) * 1000)) > 0:
            try:
                data = nv.nvmlEventSetWait_v2(events, left_ms)
            except nv.NVMLError as e:       # NVML_ERROR_TIMEOUT: nothing more came
                last = e
                break
            if data.eventType & nv.nvmlEventTypeXidCriticalError:
                index = _call(nv, partial(nv.nvmlDeviceGetIndex, data.device))
                xids.setdefault(index if isinstance(index, int) else -1, []).append(int(data.eventData))
        for i, seen in xids.items():
            if i in gpus:
                gpus[i][key] = {"xids": seen} if seen else _error(last) if last else {"error": "Timeout"}
    finally:
        nv.nvmlEventSetFree(events)


def read(xid_wait_s: float) -> dict[str, Any]:
    """This node's GPUs through NVML (module docstring). Raises NoNvml when NVML cannot be used."""
    try:
        import pynvml as nv
    except ImportError:
        raise NoNvml("the nvidia-ml-py package is not installed (pip install nvidia-ml-py)") from None
    try:
        nv.nvmlInit()
    except nv.NVMLError as e:
        raise NoNvml(f"NVML does not start, no NVIDIA driver on this node? ({type(e).__name__}: {e})") from None
    try:
        doc: dict[str, Any] = {"driver": _call(nv, lambda: _text(nv.nvmlSystemGetDriverVersion())),
                               "device_count": nv.nvmlDeviceGetCount()}
        gpus: dict[int, dict[str, Any]] = {}
        handles: dict[int, Any] = {}
        for i in range(doc["device_count"]):
            try:
                handles[i] = nv.nvmlDeviceGetHandleByIndex(i)
            except nv.NVMLError as e:        # NVML_ERROR_GPU_IS_LOST: fell off the bus
                gpus[i] = {"index": i, **_error(e)}
                continue
            gpus[i] = _gpu(nv, i, handles[i])
        if xid_wait_s > 0 and handles:
            _wait_xids(nv, handles, gpus, xid_wait_s)
        doc["gpus"] = [gpus[i] for i in sorted(gpus)]
        return doc
    except nv.NVMLError as e:
        raise NoNvml(f"NVML failed: {type(e).__name__}: {e}") from None
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()
