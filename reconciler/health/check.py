"""`fleet health-check`: read this node's GPUs, judge them, one verdict.  EFFECT (file read, NVML).

`run()` never raises: whatever goes wrong while reading becomes an "unknown" verdict (exit 2) whose line
says what and how to fix it, so node-problem-detector always gets one line and an exit code it understands.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..safeio import UnreadableFile, read_file
from . import nvml
from .analysis import Verdict, analyze, unknown
from .readings import NodeReading, ReadingError, from_nvidia_smi_xml, from_nvml

MAX_READING_BYTES = 64 * 1024 * 1024
"""`nvidia-smi -q -x` of a 16-GPU node is about 0.5 MB; a larger file is not one."""


def _file(path: Path) -> bytes:
    """The saved reading, by the repository's file rules (`safeio.read_file`): a regular file, not a FIFO (a
    plain open of one blocks until a writer comes: node-problem-detector's plugin would hang), a device or a
    link, at most `MAX_READING_BYTES`; else a `ReadingError` (verdict unknown, exit 2)."""
    try:
        return read_file(path, MAX_READING_BYTES, "the reading", "")
    except UnreadableFile as e:
        raise ReadingError(e.reason, "pass a regular file: the output of nvidia-smi -q -x or an NVML reading") from None


def _reading(xml: Path | None, nvml_json: Path | None, xid_wait_s: float) -> NodeReading:
    if xml is not None:
        return from_nvidia_smi_xml(_file(xml), xml.name)
    if nvml_json is not None:
        try:
            doc = json.loads(_file(nvml_json))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            where = f"{e.lineno}:{e.colno}" if isinstance(e, json.JSONDecodeError) else ""
            raise ReadingError(f"not JSON ({e.msg if isinstance(e, json.JSONDecodeError) else e.reason})",
                               "pass an NVML reading as nvml.py records it", where) from None
        return from_nvml(doc)
    return from_nvml(nvml.read(xid_wait_s))


def run(*, xml: Path | None = None, nvml_json: Path | None = None, expected_gpus: int | None = None,
        xid_wait_s: float = 5.0) -> Verdict:
    """The verdict for a saved `nvidia-smi -q -x` (xml), a saved NVML reading (nvml_json), or, with neither,
    this node's GPUs through NVML, waiting at most `xid_wait_s` seconds for Xid events."""
    source = xml or nvml_json
    try:
        return analyze(_reading(xml, nvml_json, xid_wait_s), expected_gpus)
    except ReadingError as e:
        at = f"{source}:{e.where}: " if e.where and source else f"{source}: " if source else ""
        return unknown(f"{at}{e.message} (hint: {e.hint})")
    except nvml.NoNvml as e:
        return unknown(f"{e} (hint: run on a node with an NVIDIA GPU and driver, or pass --nvidia-smi-xml FILE)")
    except OSError as e:
        return unknown(f"{source}: {e.strerror or e} (hint: pass a readable file)")
