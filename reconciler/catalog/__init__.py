"""The accelerator catalog: what each accelerator and machine type is, which TPU slice shapes exist, and what
an hour of each costs. The data is `catalog.yaml` beside this file, transcribed from shared/catalog/FACTS.md
with a source id on every entry; this module gives it types and the few rules that interpret it.

The catalog is a value: `load_catalog()` reads the packaged file once; stages receive the `Catalog` as an
argument and never read it themselves (tests can pass a smaller one).
"""

from __future__ import annotations

import functools
import math
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from ..models import HourlyUsd, PositiveCount

Provider = Literal["gcp", "aws", "onprem"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShapeRule(_Frozen):
    multiple_of: int = Field(description="every dimension must be a multiple of this")
    max_cubes: int = Field(description="at most this many 4x4x4 cubes in one slice")


class Accelerator(_Frozen):
    kind: Literal["tpu", "gpu", "trainium"]
    gke_accelerator: str | None = Field(None, description="value of the GKE node label selecting it")
    chips_per_host: int | None = None
    dims: int | None = Field(None, description="TPU topology dimensions: 2 or 3")
    shapes: tuple[str, ...] = ()
    shape_rule: ShapeRule | None = None
    default_machine_type: dict[str, str] = Field(default_factory=dict)
    hbm_gib: int | None = None
    peak_bf16_tflops: int | None = None
    note: str | None = None
    source: tuple[str, ...] = ()

    @property
    def is_tpu(self) -> bool:
        return self.kind == "tpu"


class MachineType(_Frozen):
    provider: Provider
    accelerator: str
    accelerators: PositiveCount = Field(description="accelerators (chips or GPUs) per node")
    vcpus: int | None = None
    memory_gib: int | None = None
    gke_accelerator: str | None = None
    uncertain: bool = False
    note: str | None = None
    source: tuple[str, ...] = ()


class PriceEntry(_Frozen):
    accelerator: str | None = None
    machine_type: str | None = None
    per: Literal["chip", "node"]
    regions: tuple[str, ...]
    on_demand: HourlyUsd | None       # finite, non-negative, never a boolean: these prices end up in every plan
    spot: HourlyUsd | None = None
    reserved_1y: HourlyUsd | None = None
    reserved_3y: HourlyUsd | None = None
    uncertain: bool = False
    note: str | None = None
    source: tuple[str, ...] = ()


class FlexEntry(_Frozen):
    """A flex-start (queued provisioning) list price: FACTS.md's only such figure is v6e's (catalog.yaml)."""

    accelerator: str
    per: Literal["chip", "node"]
    regions: tuple[str, ...]
    hourly: HourlyUsd
    uncertain: bool = False
    source: tuple[str, ...] = ()


class Catalog(_Frozen):
    version: int
    compiled: str
    sources: dict[str, str]
    accelerators: dict[str, Accelerator]
    machine_types: dict[str, MachineType]
    default_gpu_machine_types: dict[str, dict[str, str]]
    prices: tuple[PriceEntry, ...]
    flex_start: tuple[FlexEntry, ...] = ()

    # -- TPU topology -------------------------------------------------------------------------------------

    def shape_problem(self, accelerator: str, shape: str) -> str | None:
        """Why `shape` is not a valid slice of `accelerator`, or None if it is.

        Valid: a documented shape (FACTS.md section 2), or for 3D generations any AxBxC with A<=B<=C, each a
        multiple of 4 and at most `max_cubes` cubes (xpk's rule, source S8)."""
        acc = self.accelerators[accelerator]
        dims = parse_shape(shape)
        if dims is None or len(dims) != acc.dims:
            example = "4x4x4" if acc.dims == 3 else "4x8"
            return f"`{shape}` is not a {acc.dims}D shape like `{example}`"
        if shape in acc.shapes:
            return None
        rule = acc.shape_rule
        if rule and list(dims) == sorted(dims) and all(d % rule.multiple_of == 0 for d in dims):
            cubes = math.prod(dims) // 64
            if cubes <= rule.max_cubes:
                return None
            return f"`{shape}` is {cubes} cubes, over the {rule.max_cubes}-cube limit of {accelerator}"
        if sorted(dims) != list(dims) and "x".join(map(str, sorted(dims))) in acc.shapes:
            return f"`{shape}` is not in canonical order; write `{'x'.join(map(str, sorted(dims)))}`"
        return f"`{shape}` is not a slice shape of {accelerator}"

    def shape_for_count(self, accelerator: str, count: int) -> str | None:
        """The smallest documented shape of `accelerator` with at least `count` chips (ties: catalog order)."""
        fitting = [s for s in self.accelerators[accelerator].shapes if shape_chips(s) >= count]
        return min(fitting, key=shape_chips) if fitting else None

    def default_machine_type(self, accelerator: str, shape: str | None, provider: Provider) -> str | None:
        """The machine type a pool gets when it names none."""
        acc = self.accelerators[accelerator]
        if acc.is_tpu:
            if provider != "gcp" or shape is None:
                return None
            table = acc.default_machine_type
            if shape in table:
                return table[shape]
            if "multi_host" in table and acc.chips_per_host and shape_chips(shape) > acc.chips_per_host:
                return table["multi_host"]
            return table.get("any")
        return self.default_gpu_machine_types.get(provider, {}).get(accelerator)

    # -- prices -------------------------------------------------------------------------------------------

    def price_for(self, *, accelerator: str, machine_type: str | None, region: str) -> PriceEntry | None:
        """The catalog price entry covering this accelerator or machine type in `region`, if any."""
        for entry in self.prices:
            subject = entry.machine_type if entry.machine_type else entry.accelerator
            if subject in (machine_type, accelerator) and region in entry.regions:
                return entry
        return None

    def flex_for(self, *, accelerator: str, region: str) -> FlexEntry | None:
        """The flex-start price of the accelerator in `region`, if the catalog has one (issue 26)."""
        return next((e for e in self.flex_start if e.accelerator == accelerator and region in e.regions), None)

    def priced_regions(self, *, accelerator: str, machine_type: str | None) -> tuple[str, ...]:
        out: list[str] = []
        for entry in self.prices:
            subject = entry.machine_type if entry.machine_type else entry.accelerator
            if subject in (machine_type, accelerator) and entry.on_demand is not None:
                out.extend(entry.regions)
        return tuple(sorted(set(out)))


@functools.lru_cache(maxsize=4096)
def parse_shape(shape: str) -> tuple[int, ...] | None:
    """`(4, 4, 8)` of `4x4x8`, or None. Memoized (a tuple, immutable): every TPU option and pool asks it."""
    parts = shape.split("x")
    if not all(p.isdigit() and p[0] != "0" for p in parts):
        return None
    return tuple(int(p) for p in parts)


def shape_chips(shape: str) -> int:
    dims = parse_shape(shape)
    return math.prod(dims) if dims else 0


@functools.cache
def load_catalog() -> Catalog:
    """The catalog shipped with the package (read once)."""
    text = resources.files(__package__).joinpath("catalog.yaml").read_text(encoding="utf-8")
    # libyaml's safe loader (in every PyYAML wheel) reads it in a sixth of the pure-Python parser's time,
    # which is a tenth of `fleet plan` on the example.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return Catalog.model_validate(yaml.load(text, Loader=loader))
