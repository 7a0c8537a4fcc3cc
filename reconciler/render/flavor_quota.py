"""Per-flavor quotas: each team's per-cluster quota of the plan, split over the pools (flavors) of that
accelerator in the cluster, in whole slices where possible. Pure.

The plan (`plan.quotas`, see `plan/summary.py::cluster_quotas`) already splits every team's quota over the
clusters so that the parts add up to `policies/teams.yaml`; here each part is split once more, by the same
rules (`plan/quotasplit.py`), with whole numbers that add up exactly (so the sum over clusters and flavors of
`nominalQuota` is the team's quota):

1. a team that borrows in the cluster (usage >= the cluster's nominal) holds its nominal where its work
   within nominal runs, highest priority first (a production job never sits on borrowed quota in its
   flavor while a research job of the team holds nominal in another); what it uses beyond is borrowed there
   and is the demand its cohort-mates lend to;
2. any other team: a reference split of its cluster quota by pool capacity in whole units, which depends on
   nothing else, raised only where a flavor needs more (its usage plus what it lends there), the raise taken
   from the flavors with the most room; cohort-mates' borrowing in a flavor is covered first by the unused
   quota lenders already hold there, only the rest by raising a lender's quota there (`lent`);
3. borrowingLimit: what the flavor borrows (None stays None); lendingLimit: first where the team lends,
   then in proportion to the rest of each flavor's nominal (None stays None).

Units. A TPU workload takes whole slices of one flavor, so a TPU flavor's quota is only usable in multiples
of its slice (`unit_accelerators`: 256 chips for v6e 16x16, 4 for v6e 2x2): 20 chips of a 16x16 flavor can
never admit anything there. GPU (and Trainium) flavors use a unit of 1: GPU pods request any number of a
node's GPUs and small jobs share nodes (the planner packs them), so 3 of an 8-GPU node is usable quota;
asking for multiples of 8 would only push remainders elsewhere for no gain. A TPU flavor's nominal is not
whole slices only where (a) it is all used by the team's placed jobs or lent to cohort-mates' planned
borrowing (`lent`), or (b) it holds the remainder of a cluster quota that no whole-slice split can hold
(say 23 chips over 4-, 16- and 256-chip slices), on one flavor per team and cluster (tests/test_render.py
and tests/test_render_quota.py check it). Ties break by pool name everywhere.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from ..plan.quotasplit import Hold, Part, Share, split_all, whole_split
from ..plan.types import Plan, QuotaPlan

__all__ = ["FlavorPool", "FlavorQuota", "flavor_digests", "flavor_quotas", "usage", "whole_split"]


class FlavorQuota(NamedTuple):
    """One team's quota in one flavor of one cluster (a tuple: a 10,000-job fleet's render builds about 50,000
    of them a reconcile cycle, and a frozen dataclass takes several times longer to build)."""
    cluster: str
    team: str
    accelerator: str
    flavor: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    used: int
    lent: int = 0           # of the nominal, what cohort-mates borrow here in the plan (lent first)
    spot: int = 0           # a spot flavor's part of the team's `spot:` quota, on top of `nominal` (never lent)


@dataclass(frozen=True, slots=True)
class FlavorPool:
    """A pool as a flavor: `capacity` in accelerators at max, `unit` the accelerators a workload takes at
    a time (TPU: chips per slice; GPU, Trainium: 1)."""
    name: str
    capacity: int
    unit: int
    spot: bool = False      # spot capacity: where spot-only work charged to a `spot:` quota runs


def usage(plan: Plan) -> dict[tuple[str, str, str], int]:
    """(cluster, pool, team) -> accelerators the plan placed there."""
    used: dict[tuple[str, str, str], int] = defaultdict(int)
    for p in plan.placements:
        used[(p.cluster, p.pool, p.job.split("/")[0])] += len(p.units) * p.accelerators_per_unit
    return used


def flavor_quotas(plan: Plan, pools: Mapping[tuple[str, str], list[FlavorPool]],
                  domain: Mapping[str, str | None], priority: Mapping[str, int],
                  spot_jobs: frozenset[str] = frozenset()) -> list[FlavorQuota]:
    """Split every `plan.quotas` entry over the pools of its accelerator in its cluster (module docstring).

    `pools[(cluster, accelerator)]` lists the flavors sorted by pool name; `domain[team]` is the root of the
    team's cohort tree (None: no cohort, never lends or borrows); `priority[job]` the value of its class.
    `spot_jobs`: the placed jobs charged to their team's `spot:` quota (spot-only work), which hold none of the
    nominal; an entry's `spot` part goes to the cluster's spot flavors (`_spot_parts`)."""
    out: list[FlavorQuota] = []
    for cluster, acc, shares, parts, spot in _parts(plan, pools, domain, priority, spot_jobs):
        for team, by_flavor in split_all(list(shares), list(parts)).items():
            out.extend(FlavorQuota(cluster, team, acc, f, x.nominal, x.borrowing_limit, x.lending_limit, x.used,
                                   x.lent, spot.get((team, f), 0)) for f, x in by_flavor.items())
    return sorted(out, key=lambda f: (f.cluster, f.team, f.accelerator, f.flavor))


def flavor_digests(plan: Plan, pools: Mapping[tuple[str, str], list[FlavorPool]],
                   domain: Mapping[str, str | None], priority: Mapping[str, int],
                   spot_jobs: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """cluster -> `<team> <accelerator> flavors <digest>` per quota entry: a digest of what its ClusterQueue holds
    of `flavor_quotas` (each flavor's nominal, borrowing and lending limits, spot part), so the reconcile loop
    sees a split that moved between the flavors of one cluster while the cluster's part stayed the same. A split
    of the same shares and flavors as an earlier call reuses that call's digests (`_digests`), so a cycle in
    which little changed pays for little."""
    out: dict[str, list[str]] = defaultdict(list)
    for cluster, acc, shares, parts, spot in _parts(plan, pools, domain, priority, spot_jobs):
        for team, split in _digests(shares, parts).items():
            mine = ",".join(f"{f}={n}" for (t, f), n in sorted(spot.items()) if t == team)
            if mine:
                split = digest(f"{split};spot:{mine}")
            out[cluster].append(f"{team} {acc} flavors {split}")
    return {c: sorted(lines) for c, lines in out.items()}


@lru_cache(maxsize=1024)
def _digests(shares: tuple[Share, ...], parts: tuple[Part, ...]) -> dict[str, str]:
    return {team: digest(";".join(f"{f}={x.nominal}/{x.borrowing_limit}/{x.lending_limit}"
                                   for f, x in sorted(by_flavor.items())))
            for team, by_flavor in split_all(list(shares), list(parts)).items()}


def digest(text: str) -> str:
    """A short digest of `text`, the same in every process (the reconcile loop's memory keeps it)."""
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def _parts(plan: Plan, pools: Mapping[tuple[str, str], list[FlavorPool]], domain: Mapping[str, str | None],
           priority: Mapping[str, int], spot_jobs: frozenset[str],
           ) -> Iterator[tuple[str, str, tuple[Share, ...], tuple[Part, ...], dict[tuple[str, str], int]]]:
    """Per (cluster, accelerator) with flavors and quota entries: the teams' shares, the flavors as parts, and
    (team, flavor) -> the spot part."""
    holds: dict[tuple[str, str, str], list[Hold]] = defaultdict(list)
    spot_holds: dict[tuple[str, str, str], list[Hold]] = defaultdict(list)
    acc_of = {(c, f.name): acc for (c, acc), flav in pools.items() for f in flav}
    for p in plan.placements:
        acc = acc_of.get((p.cluster, p.pool))
        if acc is not None:
            mine = spot_holds if p.job in spot_jobs else holds
            mine[(p.cluster, p.job.split("/")[0], acc)].append(Hold.of(p, priority.get(p.job, 0), p.pool))
    by_part: dict[tuple[str, str], list[QuotaPlan]] = defaultdict(list)
    for q in plan.quotas:
        if pools.get((q.cluster, q.accelerator)):
            by_part[(q.cluster, q.accelerator)].append(q)
    for (cluster, acc), entries in sorted(by_part.items()):
        parts = tuple(Part(f.name, float(f.capacity), f.unit) for f in pools[(cluster, acc)])
        shares = tuple(Share(q.team, domain.get(q.team), q.nominal, q.borrowing_limit, q.lending_limit,
                             tuple(holds.get((cluster, q.team, acc), ())))
                       for q in sorted(entries, key=lambda q: q.team))
        yield cluster, acc, shares, parts, _spot_parts(entries, [f for f in pools[(cluster, acc)] if f.spot],
                                                       spot_holds)


def _spot_parts(entries: list[QuotaPlan], flavors: list[FlavorPool],
                spot_holds: Mapping[tuple[str, str, str], list[Hold]]) -> dict[tuple[str, str], int]:
    """(team, flavor) -> its part of the team's `spot:` quota in this cluster (`QuotaPlan.spot`, the plan's split
    over clusters): split over the cluster's spot flavors like a team that neither lends nor borrows, raised
    where its spot-only work runs. Kueue charges a workload to the flavor it runs on: the spot flavors hold it."""
    out: dict[tuple[str, str], int] = {}
    if not flavors:
        return out
    parts = [Part(f.name, float(f.capacity), f.unit) for f in flavors]
    for q in entries:
        if q.spot:
            mine = tuple(spot_holds.get((q.cluster, q.team, q.accelerator), ()))
            share = Share(q.team, None, q.spot, None, None, mine)
            out.update(((q.team, f), x.nominal) for f, x in split_all([share], parts)[q.team].items() if x.nominal)
    return out
