"""Issue 16, GPU health: `health/nvml.py`, the code that talks to NVML, run without a GPU.

The real `pynvml` module (nvidia-ml-py) is used for its constants, error classes and ctypes structures; only
its functions that call into libnvidia-ml are replaced, by a scripted device that answers what the real H100
answered (../shared/fixtures/nvidia-h100/nvml-health.json, recorded through the same package). So the test
checks the calls nvml.py makes, their arguments, and how it records answers and NVML errors: a reading of
the scripted H100 must equal the recorded reading in every field nvml.py reads, and faults reach the verdict.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.health import analyze, from_nvml, nvml
from reconciler.health.check import run

from builders import shared_file

pynvml = pytest.importorskip("pynvml")

RECORDED: dict[str, Any] = json.loads(shared_file("fixtures/nvidia-h100/nvml-health.json").read_text())
GPU = RECORDED["gpus"][0]
READ = ("index", "name", "uuid", "pci_bus_id", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate",
        "remapped_rows", "retired_pages_pending", "throttle_reasons", "xid_wait_1s")
"""The recorded fields nvml.py reads (the recording has more: temperature, power, NVLink ...)."""


def err(code: int) -> Exception:
    e: Exception = pynvml.NVMLError(code)
    return e


class ScriptedH100:
    """libnvidia-ml as the recorded H100 answered, one GPU; `faults` change what one call answers."""

    def __init__(self, **faults: Any) -> None:
        self.faults = faults
        self.calls: list[str] = []
        self.events: list[int] = list(faults.pop("xids", []))
        self.registered = False
        self.freed = False
        self.shut_down = False

    def answer(self, name: str, value: Any) -> Any:
        self.calls.append(name)
        answer = self.faults.get(name, value)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def field_values(h: object, ids: list[int]) -> Any:
            assert ids == [nvml.FIELD_RECOVERY_ACTION]
            values = (pynvml.c_nvmlFieldValue_t * 1)()
            values[0].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED    # driver 580 on this VM: not recorded
            return self.answer("nvmlDeviceGetFieldValues", values)

        def ecc(h: object, kind: int, counter: int) -> Any:
            assert kind == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            key = {pynvml.NVML_VOLATILE_ECC: "volatile", pynvml.NVML_AGGREGATE_ECC: "aggregate"}[counter]
            return self.answer(f"ecc_{key}", GPU[f"ecc_uncorrected_{key}"])

        def register(h: object, kinds: int, events: object) -> None:
            assert kinds == pynvml.nvmlEventTypeXidCriticalError and events == "event-set"
            self.registered = True

        def wait(events: object, timeout_ms: int) -> Any:
            assert 0 < timeout_ms <= 1000 and self.registered
            if not self.events:
                raise err(pynvml.NVML_ERROR_TIMEOUT)
            data = pynvml.c_nvmlEventData_t()
            data.eventType, data.eventData = pynvml.nvmlEventTypeXidCriticalError, self.events.pop(0)
            return data

        def lost_or_handle(i: int) -> Any:
            assert i == 0
            return self.answer("nvmlDeviceGetHandleByIndex", "handle-0")

        remapped = GPU["remapped_rows"]
        for name, fn in {
            "nvmlInit": lambda: self.answer("nvmlInit", None),
            "nvmlShutdown": lambda: setattr(self, "shut_down", True),
            "nvmlSystemGetDriverVersion": lambda: self.answer("driver", RECORDED["driver"]),
            "nvmlDeviceGetCount": lambda: self.answer("count", len(RECORDED["gpus"])),
            "nvmlDeviceGetHandleByIndex": lost_or_handle,
            "nvmlDeviceGetName": lambda h: self.answer("name", GPU["name"]),
            "nvmlDeviceGetUUID": lambda h: self.answer("uuid", GPU["uuid"]),
            "nvmlDeviceGetPciInfo": lambda h: self.answer("pci", type("Pci", (), {"busId": GPU["pci_bus_id"]})),
            "nvmlDeviceGetTotalEccErrors": ecc,
            "nvmlDeviceGetRemappedRows": lambda h: self.answer("remapped_rows", tuple(remapped)),
            "nvmlDeviceGetRetiredPagesPendingStatus":
                lambda h: self.answer("retired_pages_pending", err(pynvml.NVML_ERROR_NOT_SUPPORTED)),
            "nvmlDeviceGetCurrentClocksEventReasons": lambda h: self.answer("throttle", GPU["throttle_reasons"]),
            "nvmlDeviceGetFieldValues": field_values,
            "nvmlEventSetCreate": lambda: "event-set",
            "nvmlEventSetFree": lambda events: setattr(self, "freed", True),
            "nvmlDeviceGetSupportedEventTypes": lambda h: self.answer("events", GPU["supported_event_types"]),
            "nvmlDeviceRegisterEvents": register,
            "nvmlEventSetWait_v2": wait,
            "nvmlDeviceGetIndex": lambda device: 0,
        }.items():
            monkeypatch.setattr(pynvml, name, fn)


@pytest.fixture
def h100(monkeypatch: pytest.MonkeyPatch) -> ScriptedH100:
    device = ScriptedH100()
    device.install(monkeypatch)
    return device


def test_a_reading_of_the_h100_records_what_the_real_one_answered(h100: ScriptedH100) -> None:
    doc = nvml.read(1.0)
    assert doc["driver"] == RECORDED["driver"] and doc["device_count"] == 1
    assert {k: doc["gpus"][0][k] for k in READ} == {k: GPU[k] for k in READ}
    assert doc["gpus"][0]["recovery_action"] == {"error": "NVML return 3"}
    assert h100.registered and h100.freed and h100.shut_down
    assert analyze(from_nvml(doc), expected_gpus=1).exit_code == 0


def test_no_waiting_registers_no_events(h100: ScriptedH100) -> None:
    doc = nvml.read(0)
    assert not h100.registered and "xid_wait_0s" not in doc["gpus"][0]


@pytest.mark.parametrize("faults, line", [
    ({"xids": [79]}, "GPU 0 (00000000:00:06.0): Xid 79"),
    ({"ecc_volatile": 1}, "GPU 0 (00000000:00:06.0): 1 uncorrectable ECC error"),
    ({"remapped_rows": (0, 0, 0, 1)}, "GPU 0 (00000000:00:06.0): row remapping failed"),
    ({"nvmlDeviceGetHandleByIndex": err(pynvml.NVML_ERROR_GPU_IS_LOST)}, "GPU 0: fell off the bus"),
])
def test_faults_nvml_reports_take_the_node_out(monkeypatch: pytest.MonkeyPatch, faults: dict[str, Any],
                                               line: str) -> None:
    device = ScriptedH100(**faults)
    device.install(monkeypatch)
    verdict = run(xid_wait_s=1.0)
    assert verdict.exit_code == 1 and verdict.line.startswith(line), verdict.line
    assert device.shut_down


def test_an_nvml_error_mid_reading_is_recorded_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    device = ScriptedH100(name=err(pynvml.NVML_ERROR_UNKNOWN))
    device.install(monkeypatch)
    doc = nvml.read(0)
    assert doc["gpus"][0]["name"] == {"error": "NVMLError_Unknown: Unknown Error"}
    assert doc["gpus"][0]["uuid"] == GPU["uuid"]


def test_nvml_that_does_not_start_cannot_tell(monkeypatch: pytest.MonkeyPatch) -> None:
    ScriptedH100(nvmlInit=err(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)).install(monkeypatch)
    verdict = run(xid_wait_s=1.0)
    assert verdict.exit_code == 2
    assert verdict.line.startswith("cannot tell: NVML does not start, no NVIDIA driver on this node? "
                                   "(NVMLError_DriverNotLoaded: Driver Not Loaded)")
