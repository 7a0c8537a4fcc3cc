"""The packaged catalog: internally consistent, sourced, and interpreting TPU shapes as documented."""

from __future__ import annotations

import re

import pytest

from reconciler.catalog import load_catalog, shape_chips

from builders import shared_file

CAT = load_catalog()


def test_every_entry_is_sourced_or_marked_missing() -> None:
    for key, acc in CAT.accelerators.items():
        assert acc.source, key
        assert set(acc.source) <= set(CAT.sources), key
    for key, mt in CAT.machine_types.items():
        assert mt.source and set(mt.source) <= set(CAT.sources), key
        assert mt.accelerator in CAT.accelerators, key
    for entry in CAT.prices:
        assert (entry.accelerator is None) != (entry.machine_type is None)
        if entry.on_demand is None:
            assert entry.note, f"a missing price says why: {entry}"
        else:
            assert entry.source and entry.regions, entry


def test_required_accelerators_present() -> None:
    required = {"tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu7x", "nvidia-a100-40gb", "nvidia-a100-80gb",
                "nvidia-h100-80gb", "nvidia-h200-141gb", "nvidia-b200", "nvidia-l4", "nvidia-l40s",
                "aws-trainium", "aws-trainium2"}
    assert required <= set(CAT.accelerators)


def test_default_machine_types_exist_and_match() -> None:
    for provider, table in CAT.default_gpu_machine_types.items():
        for acc, mt in table.items():
            assert CAT.machine_types[mt].accelerator == acc
            assert CAT.machine_types[mt].provider == provider
    for key, acc in CAT.accelerators.items():
        for mt in acc.default_machine_type.values():
            assert CAT.machine_types[mt].accelerator == key


@pytest.mark.parametrize(("acc", "shape", "valid"), [
    ("tpu-v5p", "4x4x4", True), ("tpu-v5p", "2x2x1", True), ("tpu-v5p", "16x16x24", True),
    ("tpu-v5p", "8x12x16", True),     # xpk rule: multiples of 4, ascending, <= 140 cubes
    ("tpu-v5p", "3x3x3", False), ("tpu-v5p", "4x4", False), ("tpu-v5p", "16x16x48", False),
    ("tpu-v5e", "4x8", True), ("tpu-v5e", "8x4", False), ("tpu-v5e", "4x4x4", False),
    ("tpu-v6e", "16x16", True), ("tpu-v6e", "32x32", False),
    ("tpu-v4", "12x12x24", True), ("tpu7x", "12x12x36", True), ("tpu7x", "1x1x1", True),
])
def test_shape_validity(acc: str, shape: str, valid: bool) -> None:
    assert (CAT.shape_problem(acc, shape) is None) == valid


def test_non_canonical_order_gets_a_fix() -> None:
    why = CAT.shape_problem("tpu-v5p", "8x4x4")
    assert why is not None and "write `4x4x8`" in why


@pytest.mark.parametrize(("acc", "count", "shape"), [
    ("tpu-v5p", 64, "4x4x4"), ("tpu-v5p", 100, "4x4x8"), ("tpu-v5e", 1, "1x1"), ("tpu-v5e", 9, "4x4"),
    ("tpu-v6e", 256, "16x16"), ("tpu-v6e", 257, None),
])
def test_shape_for_count_is_the_smallest_fitting(acc: str, count: int, shape: str | None) -> None:
    assert CAT.shape_for_count(acc, count) == shape


def facts_row(first: str, contains: str = "") -> list[str]:
    """The cells of the one row of a ../shared/catalog/FACTS.md table whose first cell is `first` (and which
    mentions `contains`)."""
    rows = [cells for line in shared_file("catalog/FACTS.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("|") and (cells := [c.strip() for c in line.strip().strip("|").split("|")])[0] == first
            and contains in line]
    assert len(rows) == 1, (first, contains, rows)
    return rows[0]


def test_known_prices_from_facts() -> None:
    """Spot checks of the packaged catalog against FACTS.md itself, not against numbers copied from it."""
    v5p = CAT.price_for(accelerator="tpu-v5p", machine_type="ct5p-hightpu-4t", region="us-east5")
    row = facts_row("v5p", "us-east5")
    spot = re.search(r"([0-9.]+) \(us-east5\)", row[3])
    assert v5p is not None and spot is not None
    assert (v5p.on_demand, v5p.spot, v5p.per) == (float(row[2]), float(spot.group(1)), "chip")
    p5 = CAT.price_for(accelerator="nvidia-h100-80gb", machine_type="p5.48xlarge", region="us-east-1")
    assert p5 is not None and (p5.on_demand, p5.per) == (float(facts_row("p5.48xlarge")[3]), "node")
    a3 = CAT.price_for(accelerator="nvidia-h100-80gb", machine_type="a3-highgpu-8g", region="us-central1")
    row = facts_row("a3-highgpu-8g", "us-central1")
    assert a3 is not None and (a3.on_demand, a3.spot) == (float(row[4]), float(row[5]))
    assert CAT.price_for(accelerator="tpu7x", machine_type="tpu7x-standard-4t", region="us-central1") is None
    assert shape_chips("16x16x24") == 6144


@pytest.mark.parametrize(("field", "value"), [
    ("on_demand", float("inf")), ("spot", float("nan")), ("reserved_1y", True), ("on_demand", -1.0),
    ("on_demand", "4.20"),
])
def test_a_catalog_price_is_a_finite_non_negative_number(field: str, value: object) -> None:
    """Catalog prices flow into every plan: an infinite or boolean one must fail when the catalog loads."""
    from pydantic import ValidationError

    from reconciler.catalog import PriceEntry

    entry = {"accelerator": "tpu-v5p", "per": "chip", "regions": ["us-east5"], "on_demand": 4.2, field: value}
    with pytest.raises(ValidationError):
        PriceEntry.model_validate(entry)
    assert PriceEntry.model_validate({**entry, field: 4}).model_dump()[field] == 4.0


def test_a_machine_type_has_a_whole_positive_number_of_accelerators() -> None:
    from pydantic import ValidationError

    from reconciler.catalog import MachineType

    for bad in (True, 8.0, 0):
        with pytest.raises(ValidationError):
            MachineType.model_validate({"provider": "aws", "accelerator": "nvidia-h100-80gb", "accelerators": bad})
