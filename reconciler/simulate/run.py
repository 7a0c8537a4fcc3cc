"""`fleet simulate` behind the command line: read the trace, run, write the reports.  EFFECT (reads the
trace or the Alibaba pod list, writes the reports or the trace through safeio).

The command's options arrive as plain values; every failure is a `FleetError` with a hint (bad trace lines
are listed as `fleet validate` lists problems, then the command exits 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from ..catalog import Catalog
from ..output import text as problems_text
from ..problems import RejectedError, UsageError
from ..safeio import read_file
from . import default_days, interval_of, simulate
from .faults import FaultModel, parse_outage
from .html import to_html
from .results import markdown, to_json
from .trace import load_trace, write_lines

MAX_TRACE_BYTES = 1 << 30


def _read(path: Path, what: str) -> bytes:
    """The trace or pod list, by the repository's file rules (`safeio.read_file`: a regular file, not a FIFO,
    a device or a link, at most 1 GiB)."""
    return read_file(path, MAX_TRACE_BYTES, what, "pass the regular file itself; split a trace over 1 GiB, or "
                     "simulate fewer days")


def _valid_repo(files: Mapping[str, bytes], catalog: Catalog):  # type: ignore[no-untyped-def]
    from .. import pipeline

    v = pipeline.check({p: b for p, b in files.items() if not p.startswith("jobs/")}, catalog)
    if not v.ok:
        raise RejectedError("the repository's fleet or policies have validation errors:\n"
                            + problems_text(v.errors).rstrip(), "fix them first (`fleet validate` lists them)")
    return v


def cli_run(files: Mapping[str, bytes], catalog: Catalog, *, trace_file: Path | None, days: float | None,
            policies: str, seed: int, fmt: str, out: Path | None, outages: tuple[str, ...], no_faults: bool,
            spot_reclaims_per_hour: float | None, interval_seconds: int | None, generate_n: int | None,
            load: float, alibaba: Path | None, write: Callable[[Path, str], None],
            warn: Callable[[str], None], restart_minutes: float | None = None, workloads: float = 0.0) -> str:
    """What `fleet simulate` prints (the report, or a generated trace when there is no --out)."""
    if sum(x is not None for x in (trace_file, generate_n, alibaba)) != 1:
        raise UsageError("give exactly one of --trace FILE, --generate N or --import-alibaba CSV",
                         "e.g. fleet simulate --generate 1000 --out trace.jsonl, then fleet simulate --trace "
                         "trace.jsonl --policy fleet,kueue,cheapest")
    if generate_n is not None or alibaba is not None:
        v = _valid_repo(files, catalog)
        if generate_n is not None:
            from .generate import generate

            lines = generate(v, generate_n, days or 30.0, seed, load, workloads)
        else:
            from .alibaba import import_pods

            assert alibaba is not None
            imported = import_pods(str(alibaba), _read(alibaba, "the pod list").decode("utf-8", "replace"), v)
            if imported.problems:
                warn(problems_text(imported.problems))
                raise RejectedError(f"the pod list {alibaba} has errors: nothing was imported",
                                    "fix the rows above (each names its column), or give a cluster-trace-gpu-v2023 "
                                    "pod list (`fleet simulate --help`)")
            lines = imported.lines
            warn(f"imported {len(lines)} pods; skipped " + ", ".join(f"{n} {k}" for k, n in imported.skipped.items())
                 + "\n")
        text = write_lines(lines)
        if out is None:
            return text
        write(out, text)
        return f"wrote {len(lines)} jobs to {out}\n"
    assert trace_file is not None
    names = [p.strip() for p in policies.split(",") if p.strip()]
    from .policies import POLICIES

    bad = [n for n in names if n not in POLICIES]
    if bad or not names:
        raise UsageError(f"--policy {policies!r}: unknown policy " + ", ".join(bad or ["(none)"]),
                         "use one or more of " + ", ".join(POLICIES) + ", comma-separated")
    loaded = load_trace(str(trace_file), _read(trace_file, "the trace"), files, catalog)
    if isinstance(loaded, list):
        warn(problems_text(loaded))
        raise RejectedError(f"the trace {trace_file} has errors", "fix the lines above; each names its field")
    clusters = tuple(sorted(c.name for c in loaded.validated.loaded.clusters))
    parsed = tuple(parse_outage(o, clusters) for o in outages)
    faults = FaultModel.off(parsed) if no_faults else FaultModel(outages=parsed)
    from dataclasses import replace

    if spot_reclaims_per_hour is not None:
        faults = replace(faults, spot_reclaims_per_hour=spot_reclaims_per_hour)
    if restart_minutes is not None:
        faults = replace(faults, restart_minutes=restart_minutes)
    span = days if days is not None else default_days(loaded)
    results = simulate(loaded, list(dict.fromkeys(names)), days=span, seed=seed, faults=faults,
                       interval_s=interval_seconds or interval_of(loaded))
    name = trace_file.name
    texts = {"md": markdown(results, name), "json": to_json(results), "html": to_html(results, name)}
    if out is not None:
        for kind, body in texts.items():
            write(out / f"simulate.{kind}", body)
    return texts[fmt]
