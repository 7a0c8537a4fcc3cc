"""The hourly price of one unit of a pool. Pure.

Precedence, most specific first (each step says where the number came from, for the cost report):
1. the pool's `hourly_usd` (owned hardware at its amortized price, or any negotiated unit price);
2. `fleet/prices.yaml` `prices:`: a machine-type entry (per node) before an accelerator entry (per chip or
   GPU), a region-specific entry before a region-less one;
3. the packaged catalog for the cluster's region: on-demand, spot, or for `reserved` the 1-year committed
   price where the source has one.
Then the first matching `discounts:` entry (machine type before accelerator) applies to steps 2 and 3.
A pool with no price is a validation error: the catalog never guesses (see catalog.yaml).

The price of a unit is rounded to whole cents here, once, and every stage uses that number: the planner
optimizes and checks budgets with it, the plan and the cost report multiply it. So each written pool cost
is exactly unit price x units, the totals are exact sums of them, and monthly = hourly x 730 holds to the
cent (DESIGN.md section 4); before, a sub-cent unit price (p5en: $63.29625) made the printed unit price x
target differ from the printed pool cost, and the rounded total x 730 from the printed monthly cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import Catalog
from .models import Discount, PriceOverride, PricesDoc
from .resolve import ResolvedPool

_FIELD = {"on-demand": "on_demand_hourly_usd", "spot": "spot_hourly_usd", "reserved": "reserved_hourly_usd"}


@dataclass(frozen=True, slots=True)
class UnitPrice:
    hourly_usd: float
    source: str
    uncertain: bool = False


def unit_price(pool: ResolvedPool, pool_hourly_usd: float | None, prices: PricesDoc,
               catalog: Catalog) -> UnitPrice | str:
    """Price of one unit (slice or node) per hour, or why there is none (a message with how to fix it)."""
    if pool_hourly_usd is not None:
        return UnitPrice(cents(pool_hourly_usd), "pool hourly_usd")
    if pool.capacity == "owned":
        return "an owned pool needs `hourly_usd`, its amortized price per unit per hour"
    per_node = pool.nodes_per_unit
    flex = catalog.flex_for(accelerator=pool.accelerator, region=pool.region) if pool.queued else None
    if flex is not None:       # queued provisioning (GKE flex-start) at its own rate, where the catalog has one
        units = pool.unit_accelerators if flex.per == "chip" else per_node
        return UnitPrice(cents(flex.hourly * units), f"catalog flex-start {'/'.join(flex.source)}", flex.uncertain)
    base = _override(pool, prices) or _catalog(pool, catalog)
    if base is None:
        where = catalog.priced_regions(accelerator=pool.accelerator, machine_type=pool.machine_type)
        subject = pool.machine_type or pool.accelerator
        elsewhere = f" (the catalog prices it in {', '.join(where)})" if where else " (no public price was found)"
        return (f"no {pool.capacity} price for {subject} in {pool.region}{elsewhere}; add one to fleet/prices.yaml "
                f"or set the pool's `hourly_usd`")
    hourly, source, uncertain, per = base
    if pool.queued:            # no flex-start figure in FACTS.md for this accelerator: never guessed
        source += " (queued: no flex-start rate known for this accelerator, on-demand price)"
    units = pool.unit_accelerators if per == "chip" else per_node
    discount = _discount(pool, prices)
    total = hourly * units
    if discount:
        total *= 1 - discount.percent_off / 100
        source += f", {discount.percent_off:g}% discount"
    return UnitPrice(cents(total), source, uncertain)


def cents(usd: float) -> float:
    """A price per hour to the cent (+0.0 turns -0.0 into 0.0)."""
    return round(usd + 0.0, 2)


def _override(pool: ResolvedPool, prices: PricesDoc) -> tuple[float, str, bool, str] | None:
    field = _FIELD.get(pool.capacity)
    if field is None:
        return None

    def rank(e: PriceOverride) -> tuple[int, int]:
        return (0 if e.machine_type else 1, 0 if e.region else 1)

    for e in sorted(prices.prices, key=rank):
        subject_ok = (e.machine_type is not None and e.machine_type == pool.machine_type) or (
            e.machine_type is None and e.accelerator == pool.accelerator)
        value = getattr(e, field)
        if subject_ok and e.region in (None, pool.region) and value is not None:
            src = "fleet/prices.yaml" + (f" ({e.source})" if e.source else "")
            return value, src, e.uncertain, "node" if e.machine_type else "chip"
    return None


def _catalog(pool: ResolvedPool, catalog: Catalog) -> tuple[float, str, bool, str] | None:
    entry = catalog.price_for(accelerator=pool.accelerator, machine_type=pool.machine_type, region=pool.region)
    if entry is None:
        return None
    value = {"on-demand": entry.on_demand, "spot": entry.spot, "reserved": entry.reserved_1y}.get(pool.capacity)
    if value is None:
        return None
    label = "1-year committed " if pool.capacity == "reserved" else ""
    return value, f"catalog {label}{'/'.join(entry.source)}", entry.uncertain, entry.per


def _discount(pool: ResolvedPool, prices: PricesDoc) -> Discount | None:
    by_machine = [d for d in prices.discounts if d.machine_type and d.machine_type == pool.machine_type]
    by_accelerator = [d for d in prices.discounts if d.machine_type is None and d.accelerator == pool.accelerator]
    return next((d for d in by_machine + by_accelerator if pool.capacity in d.capacity), None)
