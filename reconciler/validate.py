"""Stage 3, validate: cross-document and domain rules over the loaded models. Pure.

`validate(loaded, catalog)` returns a `Validated` value: every problem (the loader's and its own, sorted by
file, line, column) and the resolved pools, job options and unit prices that later stages use, so nothing
is resolved twice. Checks that need a document that failed to load are skipped rather than reported as a
cascade of follow-on errors.

Rules (each failure names the field and how to fix it):
- files are named after their `name`; a job's folder is its team;
- names are unique (teams, cohorts, classes, pools in a cluster); references exist (team, cohort, parent
  cohort, priority class, max_priority, accelerator keys in quotas and prices);
- the cohort tree has no cycle; quotas are consistent (lending_limit <= nominal);
- pools: topology valid for the generation, machine type matches accelerator/topology/provider, min <= max,
  owned and reserved pools fixed, owned only on-prem, a price is known; zone inside region; at most
  MAX_FLAVORS pools in a cluster of the accelerators one team may use (Kueue's flavors in a ClusterQueue);
- jobs: see `validate_jobs.py` (options, spot, priority ceiling, fit somewhere, secrets in env).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from operator import attrgetter

from .catalog import Catalog
from .kube_rules import FLEET_NAMESPACE, RESERVED_NAMESPACES, reserved_namespace
from .load import PLACEMENT, PRICES, PRIORITIES, TEAMS, Loaded, ParseCache
from .models import GITHUB_HANDLE, HANDLE_HINT, Cluster, Discount, Job, PriceOverride, PricesDoc
from .notify.checks import check_notifications
from .observability.checks import check_slos
from .pricing import UnitPrice, unit_price
from .problems import Problem, Severity, format_field
from .reporter import Reporter
from .resolve import ResolvedOption, ResolvedPool, resolve_pool
from .robots.validate import check_robots
from .slurm import rules as slurm_rules
from .suggest import did_you_mean
from .validate_jobs import JobChecks, check_jobs  # the job rules, split out to keep each module readable


@dataclass(frozen=True)
class Validated:
    loaded: Loaded
    problems: tuple[Problem, ...]
    pools: tuple[ResolvedPool, ...] = ()
    unit_prices: Mapping[str, UnitPrice] = field(default_factory=dict)
    options: Mapping[str, tuple[ResolvedOption, ...]] = field(default_factory=dict)
    respec: Mapping[str, str] = field(default_factory=dict)
    """job -> the fields of what its pods run (models.POD_FIELDS) that its file changed since the base commit
    (pipeline.change): planned against that base, such a job is re-created where it runs (plan/sticky.py)."""

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == Severity.ERROR)

    @property
    def ok(self) -> bool:
        return not self.errors

    @cached_property
    def job_by_id(self) -> Mapping[str, Job]:
        """Each job by id (the first of a repeated id, as a scan finds it), built once per repository."""
        out: dict[str, Job] = {}
        for j in self.loaded.jobs:
            out.setdefault(j.id, j)
        return out

    @cached_property
    def pool_by_key(self) -> Mapping[tuple[str, str], ResolvedPool]:
        """Each resolved pool by (cluster, pool name), built once per repository."""
        out: dict[tuple[str, str], ResolvedPool] = {}
        for x in self.pools:
            out.setdefault((x.cluster, x.name), x)
        return out


def validate(loaded: Loaded, catalog: Catalog, cache: ParseCache | None = None) -> Validated:
    """Run every rule; never raises for bad input. With `cache` (the one `loaded` was loaded through), a job
    whose file and context did not change since the last validation through it is not checked again."""
    r = Reporter(loaded)
    check_teams(r, catalog)
    check_priorities(r)
    check_prices(r, catalog)
    pools, prices = check_clusters(r, catalog)
    check_spot_quotas(r, pools)
    check_flavor_count(r, pools)
    check_reconcile(r)
    slurm_rules.check_lease(r)
    slurm_rules.check_jobs(r)
    if cache is not None and cache.checks is None:
        cache.checks = JobChecks()
    options = check_jobs(r, catalog, pools, cache.checks if cache is not None else None)
    check_slos(r)
    check_robots(r)
    check_notifications(r)
    return Validated(loaded, tuple(sorted(set(r.problems), key=_PROBLEM_ORDER)), pools, prices, options)


_PROBLEM_ORDER = attrgetter(*(f.name for f in fields(Problem) if f.compare))
"""`Problem`'s own order (its fields in turn, as `order=True` compares them), as a key: one tuple per problem
instead of a Python comparison per pair (the 100,000-job fleet has 29,000 warnings)."""


def _duplicates(names: list[str]) -> dict[int, int]:
    """index of each repeated name -> index of its first occurrence."""
    first: dict[str, int] = {}
    out: dict[int, int] = {}
    for i, n in enumerate(names):
        if n in first:
            out[i] = first[n]
        else:
            first[n] = i
    return out


def check_teams(r: Reporter, catalog: Catalog) -> None:
    doc = r.loaded.teams
    if doc is None:
        return
    cohorts = {c.name: c for c in doc.cohorts}
    for i, j in _duplicates([c.name for c in doc.cohorts]).items():
        r.add(TEAMS, ("cohorts", i, "name"), f"cohort `{doc.cohorts[i].name}` is defined twice (also cohorts[{j}])",
              "remove or rename one")
    for i, c in enumerate(doc.cohorts):
        if c.parent is not None and c.parent not in cohorts:
            r.add(TEAMS, ("cohorts", i, "parent"), f"parent cohort `{c.parent}` does not exist",
                  "define it under `cohorts:` or remove `parent`")
    reported: set[str] = set()
    for i, c in enumerate(doc.cohorts):
        seen = [c.name]
        cur = c
        while cur.parent is not None and cur.parent in cohorts:
            if cur.parent in seen:
                cycle = [*seen[seen.index(cur.parent):], cur.parent]
                if not reported & set(cycle):
                    r.add(TEAMS, ("cohorts", i, "parent"), "cohort tree has a cycle: " + " -> ".join(cycle),
                          "cohorts form a tree: make one of them a root (no `parent`)")
                    reported.update(cycle)
                break
            seen.append(cur.parent)
            cur = cohorts[cur.parent]

    for j, handle in enumerate(doc.admins):
        _check_handle(r, ("admins", j), handle)
    classes = {c.name for c in r.loaded.priorities.classes} if r.loaded.priorities else None
    for i, j in _duplicates([t.name for t in doc.teams]).items():
        r.add(TEAMS, ("teams", i, "name"), f"team `{doc.teams[i].name}` is defined twice (also teams[{j}])",
              "merge the two entries")
    for i, j in _duplicates([t.queue_namespace for t in doc.teams]).items():
        r.add(TEAMS, ("teams", i, "namespace" if doc.teams[i].namespace else "name"),
              f"team `{doc.teams[i].name}` shares namespace `{doc.teams[i].queue_namespace}` with team "
              f"`{doc.teams[j].name}` (teams[{j}]): a namespace is how Fleet knows whose objects are whose, so one "
              "team could stop or finish the other's jobs",
              "give each team a namespace of its own (`namespace:`)")
    for i, t in enumerate(doc.teams):
        for j, handle in enumerate(t.owners):
            _check_handle(r, ("teams", i, "owners", j), handle)
        if reserved_namespace(t.queue_namespace):
            owner = ("is Fleet's own (its reconciler, ServiceAccount, Lease, completion records and the kubeconfig "
                     "Secret of every cluster live there)" if t.queue_namespace == FLEET_NAMESPACE
                     else "belongs to the cluster's own components")
            r.add(TEAMS, ("teams", i, "namespace" if t.namespace else "name"),
                  f"namespace `{t.queue_namespace}` {owner}; Fleet does not put team queues and jobs there",
                  "give the team a namespace of its own, e.g. `namespace: "
                  f"team-{t.name}` (reserved: kube-*, " + ", ".join(sorted(RESERVED_NAMESPACES)) + ")")
        if t.cohort is not None and t.cohort not in cohorts:
            r.add(TEAMS, ("teams", i, "cohort"), f"cohort `{t.cohort}` does not exist",
                  "define it under `cohorts:` or remove the team's `cohort`")
        if t.max_priority is not None and classes is not None and t.max_priority not in classes:
            r.add(TEAMS, ("teams", i, "max_priority"), f"priority class `{t.max_priority}` does not exist",
                  "use one of: " + ", ".join(sorted(classes)))
        for acc, q in t.quota.items():
            if acc not in catalog.accelerators:
                r.add(TEAMS, ("teams", i, "quota", acc), f"unknown accelerator `{acc}` in quota",
                      did_you_mean(acc, catalog.accelerators, choose="use a catalog key", limit=99), key=True)
            if q.lending_limit is not None and q.lending_limit > q.nominal:
                r.add(TEAMS, ("teams", i, "quota", acc, "lending_limit"),
                      f"lending_limit {q.lending_limit} is more than the nominal quota {q.nominal}",
                      f"a team can lend at most what it has: set lending_limit <= {q.nominal}")
            if (q.borrowing_limit or q.lending_limit) and t.cohort is None:
                r.add(TEAMS, ("teams", i, "quota", acc),
                      f"team `{t.name}` sets borrowing/lending limits but belongs to no cohort",
                      "add `cohort:` to the team, or remove the limits", severity=Severity.WARNING)


MAX_FLAVORS = 64
"""Most flavors of one ClusterQueue resource group (Kueue's CRD: `resourceGroups[].flavors` maxItems 64)."""


def check_flavor_count(r: Reporter, pools: tuple[ResolvedPool, ...]) -> None:
    """A team's ClusterQueue in a cluster lists, in its one resource group, every pool there of each accelerator
    the team may use: its own quota's, and in a cohort its cohort tree's, which it may borrow (render/kueue.py,
    render/flavor_quota.py). More than MAX_FLAVORS and the API server rejects the queue, and with it the
    cluster's whole Kueue stack."""
    doc = r.loaded.teams
    if doc is None:
        return
    root = doc.domains()
    usable: dict[tuple[str, str], set[str]] = {}          # (kind, name) of a lending domain -> accelerators
    for t in doc.teams:
        cohort = root[t.name]
        usable.setdefault(("cohort", cohort) if cohort else ("team", t.name), set()).update(t.quota)
    for cluster in r.loaded.clusters:
        mine = [p for p in pools if p.cluster == cluster.name]
        worst = max(((sum(p.accelerator in accs for p in mine), who) for who, accs in usable.items()), default=None)
        if cluster.provider != "slurm" and worst is not None and worst[0] > MAX_FLAVORS:
            r.add(r.loaded.cluster_paths[cluster.name], ("pools",),
                  f"cluster `{cluster.name}` has {worst[0]} pools of the accelerators {worst[1][0]} `{worst[1][1]}` "
                  f"holds quota of; a team's ClusterQueue there lists each as a Kueue flavor, and Kueue allows "
                  f"{MAX_FLAVORS} flavors in one (the API server would reject the queue)",
                  f"merge pools (at most {MAX_FLAVORS} per cluster of the accelerators one team or cohort holds "
                  "quota of), or move some to another cluster")


def check_spot_quotas(r: Reporter, pools: tuple[ResolvedPool, ...]) -> None:
    """A `spot:` quota lives in the spot flavors of the clusters with spot pools of its accelerator; with none,
    it admits nothing anywhere, which is worth saying before a team waits on it."""
    doc = r.loaded.teams
    if doc is None:
        return
    spot = {p.accelerator for p in pools if p.capacity == "spot" and p.status != "down"}   # render's flavors
    for i, t in enumerate(doc.teams):
        for acc, q in t.quota.items():
            if q.spot is not None and q.spot > 0 and acc not in spot:
                r.add(TEAMS, ("teams", i, "quota", acc, "spot"),
                      f"team `{t.name}` has a spot quota of {q.spot} {acc}, but no pool of the fleet sells {acc} as "
                      "spot capacity (outside clusters that are down): its spot-only jobs have nowhere to run",
                      f"add a pool with `capacity: spot` of {acc}, or remove the spot quota",
                      severity=Severity.WARNING)


def _check_handle(r: Reporter, fld: tuple[str | int, ...], handle: str) -> None:
    if not GITHUB_HANDLE.match(handle):
        r.add(TEAMS, fld, f"{format_field(fld)} {handle!r} is not a GitHub user or team handle", HANDLE_HINT)


def check_priorities(r: Reporter) -> None:
    doc = r.loaded.priorities
    if doc is None:
        return
    names = [c.name for c in doc.classes]
    for i, j in _duplicates(names).items():
        r.add(PRIORITIES, ("classes", i, "name"), f"priority class `{names[i]}` is defined twice (also classes[{j}])",
              "remove or rename one")
    if doc.default not in names:
        r.add(PRIORITIES, ("default",), f"default class `{doc.default}` is not among the classes",
              "use one of: " + ", ".join(names))
    p = doc.preemption
    if p.reclaim_within_cohort == "never" and p.borrow_within_cohort.policy != "never":
        r.add(PRIORITIES, ("preemption", "borrow_within_cohort", "policy"),   # a CEL rule of Kueue's ClusterQueue
              f"borrow_within_cohort.policy is {p.borrow_within_cohort.policy} while reclaim_within_cohort is never; "
              "Kueue rejects a ClusterQueue that preempts to borrow but not to reclaim",
              "set reclaim_within_cohort to lower_priority or any, or borrow_within_cohort.policy to never")


def check_reconcile(r: Reporter) -> None:
    """placement.yaml `reconcile.lease_cluster` names a cluster of fleet/clusters/."""
    doc = r.loaded.placement
    lease = doc.reconcile.lease_cluster if doc is not None else None
    names = sorted(c.name for c in r.loaded.clusters)
    if lease is not None and lease not in names and r.loaded.fleet_whole:
        r.add(PLACEMENT, ("reconcile", "lease_cluster"), f"lease_cluster `{lease}` is not a cluster of fleet/clusters/",
              did_you_mean(lease, names, choose="name one of", limit=99) or "add a cluster to fleet/clusters/ first")


def check_prices(r: Reporter, catalog: Catalog) -> None:
    doc = r.loaded.prices
    if doc is None or PRICES not in r.loaded.docs:
        return
    subjects: list[tuple[str, int, PriceOverride | Discount]] = [
        *(("prices", i, e) for i, e in enumerate(doc.prices)),
        *(("discounts", i, e) for i, e in enumerate(doc.discounts))]
    for section, i, e in subjects:
        if (e.accelerator is None) == (e.machine_type is None):
            r.add(PRICES, (section, i), "give exactly one of `accelerator` and `machine_type`",
                  "an entry prices one accelerator (per chip/GPU-hour) or one machine type (per node-hour)")
        if e.accelerator is not None and e.accelerator not in catalog.accelerators:
            r.add(PRICES, (section, i, "accelerator"), f"unknown accelerator `{e.accelerator}`",
                  did_you_mean(e.accelerator, catalog.accelerators, choose="use a catalog key", limit=99))
        if e.machine_type is not None and e.machine_type not in catalog.machine_types:
            r.add(PRICES, (section, i, "machine_type"), f"unknown machine type `{e.machine_type}`",
                  "use a catalog machine type, or price the pool itself with `hourly_usd`")
    for i, p in enumerate(doc.prices):
        if p.on_demand_hourly_usd is None and p.spot_hourly_usd is None and p.reserved_hourly_usd is None:
            r.add(PRICES, ("prices", i), "the entry has no price",
                  "add on_demand_hourly_usd, spot_hourly_usd or reserved_hourly_usd")


def check_clusters(r: Reporter, catalog: Catalog) -> tuple[tuple[ResolvedPool, ...], dict[str, UnitPrice]]:
    pools: list[ResolvedPool] = []
    prices: dict[str, UnitPrice] = {}
    for cluster in r.loaded.clusters:
        path = r.loaded.cluster_paths[cluster.name]
        expected = f"fleet/clusters/{cluster.name}.yaml"
        if path != expected:
            r.add(path, ("name",), f"cluster `{cluster.name}` is in {path}",
                  f"rename the file to {expected} or change `name`")
        slurm_rules.check_cluster(r, path, cluster)
        if cluster.zone is not None and not cluster.zone.startswith(cluster.region + "-") \
                and cluster.provider not in ("onprem", "slurm"):
            r.add(path, ("zone",), f"zone `{cluster.zone}` is not in region `{cluster.region}`",
                  f"use a zone like {cluster.region}-a, or fix the region")
        for i, j in _duplicates([p.name for p in cluster.pools]).items():
            r.add(path, ("pools", i, "name"), f"pool `{cluster.pools[i].name}` is defined twice (also pools[{j}])",
                  "pool names are unique within a cluster")
        for i, pool in enumerate(cluster.pools):
            resolved = _check_pool(r, path, cluster, i, catalog)
            if resolved is None:
                continue
            pools.append(resolved)
            _check_gke_pool_name(r, path, cluster, i, resolved)
            price = unit_price(resolved, pool.hourly_usd, r.loaded.prices or PricesDoc(), catalog)
            if isinstance(price, str):
                r.add(path, ("pools", i, "capacity"), f"pool `{pool.name}` cannot be priced: {price}",
                      "see fleet/prices.yaml in the README; catalog gaps are listed in catalog.yaml")
            else:
                prices[resolved.key] = price
        if cluster.health_check and not any(p.cluster == cluster.name and p.kind == "gpu" for p in pools):
            r.add(path, ("health_check",), f"cluster `{cluster.name}` asks for GPU health checks but has no "
                  "NVIDIA GPU pool", "remove `health_check: true`, or add a pool of an nvidia-* accelerator")
    return tuple(pools), prices


GKE_POOL_NAME = 40
"""GKE node pool names: at most 40 characters, starting with a letter."""


def _check_gke_pool_name(r: Reporter, path: str, cluster: Cluster, i: int, pool: ResolvedPool) -> None:
    """GKE refuses a node pool name that starts with a digit. A longer GPU pool name than GKE allows would be
    shortened in the node pool (`render/stackspec.py`) but not in the `cloud.google.com/gke-nodepool` node
    selector of its jobs and flavor, so they would never schedule; TPU pools select on Fleet's own label."""
    if cluster.provider != "gcp":
        return
    if not pool.name[0].isalpha():
        r.add(path, ("pools", i, "name"), f"pool name `{pool.name}` starts with a digit, and GKE node pool names "
              "start with a letter", f"rename it, e.g. `pool-{pool.name}`")
    elif pool.kind != "tpu" and len(pool.name) > GKE_POOL_NAME:
        r.add(path, ("pools", i, "name"), f"pool name `{pool.name}` is {len(pool.name)} characters; a GKE node pool "
              f"name has at most {GKE_POOL_NAME}, and its jobs select the node pool by that name",
              f"shorten it to at most {GKE_POOL_NAME} characters")


def _check_pool(r: Reporter, path: str, cluster: Cluster, i: int, catalog: Catalog) -> ResolvedPool | None:
    pool = cluster.pools[i]
    at = ("pools", i)
    ok = True
    if pool.min > pool.max:
        r.add(path, (*at, "min"), f"min {pool.min} is more than max {pool.max}", "set min <= max")
        ok = False
    if cluster.provider == "onprem" and pool.capacity != "owned":
        r.add(path, (*at, "capacity"), f"an on-prem pool is owned hardware, not `{pool.capacity}`",
              "set `capacity: owned`")
        ok = False
    if cluster.provider not in ("onprem", "slurm") and pool.capacity == "owned":
        r.add(path, (*at, "capacity"), f"`owned` is for on-prem hardware; this is a {cluster.provider} cluster",
              "use `reserved` for committed cloud capacity")
        ok = False
    if pool.capacity == "owned" and pool.min != pool.max:
        r.add(path, (*at, "min"), f"owned pools have a fixed size, but min {pool.min} != max {pool.max}",
              f"set min and max to the number of nodes you own ({pool.max}?)")
        ok = False
    if pool.capacity == "reserved" and pool.min != pool.max:
        # A reservation (committed use) is paid in full whether used or not: its units are always there, so
        # the plan, the cost report and apply all see a pool of exactly the reserved size.
        r.add(path, (*at, "min"), f"a reserved pool is paid in full whether used or not, but min {pool.min} != "
              f"max {pool.max}", f"set min and max to the reservation's size ({pool.max}?); put capacity beyond "
              "it in an on-demand or spot pool")
        ok = False
    if pool.provisioning == "queued" and (cluster.provider != "gcp" or pool.capacity != "on-demand" or pool.min):
        r.add(path, (*at, "provisioning"), "queued provisioning is GKE's flex-start (Dynamic Workload Scheduler): "
              "on-demand capacity of a gcp cluster, granted per workload from zero nodes",
              "use it on an on-demand pool of a gcp cluster with `min: 0` (EC2 capacity blocks are a `reserved` "
              "pool), or remove `provisioning`")
        ok = False
    resolved, issues = resolve_pool(cluster, pool, catalog)
    r.issues(path, at, issues)
    return resolved if ok else None
