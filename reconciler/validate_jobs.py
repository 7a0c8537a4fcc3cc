"""Job rules of stage 3 (see `validate.py`). Pure.

- the file is jobs/<team>/<name>.yaml for the job's own team and name; the team exists;
- the priority class exists and is not above the team's `max_priority`; a class that requires spot is not
  contradicted by `spot: never`; only inference jobs have replicas;
- every option resolves (catalog accelerator; TPU: exactly one of topology/count, valid shape; GPU: count,
  whole nodes above one node);
- at least one option fits some pool of the fleet as it could be at `max` (hardware, shape, spot policy,
  node size), else an error naming, per option, the closest pool and why it does not fit;
- at least one option is within what the team's quota could ever admit (nominal plus what it may borrow: its
  borrowing limit, and no more than its cohort-mates lend; nothing outside a cohort), else a warning;
- a stated `spread: zone|cluster` of a job with a `data_region` can be met inside that region (its active
  pools that can run an option span two domains, plan/spread.py), else a warning: the rule then takes a
  replica out of the region (`data_residency: preferred`) or leaves it waiting (`required`); the default
  spread is best effort and never leaves the region;
- no env value or command argument looks like a secret;
- what the cluster will enforce (see `kube_rules.py`): the job name is a DNS-1035 label with room for the child Job
  and pod names the JobSet controller derives from it on any pool the job could get; two teams that share a
  namespace do not both have a job of one name (one JobSet name); the image is a valid reference; env names
  are C identifiers; command and env values are bounded.

Speed: pools are grouped by their fit-relevant signature once, so the fit check costs O(options x distinct
pool kinds), not O(options x pools) (10,000 jobs x 1,000 pools in the benchmark).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import kube_rules as kube
from .catalog import Catalog, shape_chips
from .models import Job, PriorityClass, Team, TeamsDoc
from .problems import Problem, Severity
from .reporter import Reporter
from .resolve import FitIndex, ResolvedOption, ResolvedPool, domain, gang_fit, resolve_option, spot_policy, spread_of
from .resolve import repeated as repeated_shapes
from .secrets import secret_reason
from .validate_container import ContainerMemo
from .validate_container import check_container as _check_container
from .validate_workloads import check_groups, check_lws_names, check_workload_job, check_workload_names

_JOB_PATH = re.compile(r"^jobs/([^/]+)/([^/]+)\.yaml$")


@dataclass
class JobChecks:
    """Each job file's problems and options, kept between validations (`fleet reconcile` validates whenever a
    file changed; few of 10,000 do). A job's rules read its own model and path and the context (catalog, teams,
    priorities, pools, regions): kept while its model is the same object (`load.ParseCache` keeps it while the
    bytes are) and the context is equal. Rules across jobs run whole every time."""

    context: tuple[object, ...] = ()
    entries: dict[str, tuple[Job, tuple[Problem, ...], tuple[ResolvedOption, ...] | None]] = \
        field(default_factory=dict)


def check_jobs(r: Reporter, catalog: Catalog, pools: tuple[ResolvedPool, ...],
               memo: JobChecks | None = None) -> dict[str, tuple[ResolvedOption, ...]]:
    """Every job's rules (module docstring); a job whose model and context are those of `memo`'s last run gets
    that run's problems and options again."""
    loaded = r.loaded
    teams = {t.name: t for t in loaded.teams.teams} if loaded.teams else None
    prio = loaded.priorities
    classes = {c.name: c for c in prio.classes} if prio else None
    index = FitIndex(pools)
    node_sizes: dict[str, set[int]] = defaultdict(set)
    for p in pools:
        if p.shape is None:
            node_sizes[p.accelerator].add(p.unit_accelerators)
    regions = {c.region for c in loaded.clusters}
    in_region: dict[str, list[ResolvedPool]] = defaultdict(list)   # active pools by region (spread rules)
    for p in pools:
        if p.status == "active":
            in_region[p.region].append(p)
    units = _unit_kinds(pools)
    by_kind: dict[tuple[str, str | None], list[ResolvedPool]] = defaultdict(list)   # every pool (LWS names)
    for p in pools:
        by_kind[(p.accelerator, p.shape)].append(p)
    longest_pool = max((len(p.name) for p in pools), default=0)
    ceilings: dict[tuple[str, str], tuple[int, int]] = {}   # (team, accelerator) -> quota_ceiling, once each
    verdicts: dict[tuple[tuple[object, ...], ...], OptionsVerdict] = {}   # by the options' fields, once each
    container = ContainerMemo()   # each distinct image and command judged once
    longest: dict[tuple[int, int, int], tuple[object, Longest]] = {}   # by options, replicas, length of the name
    out: dict[str, tuple[ResolvedOption, ...]] = {}
    whole = loaded.fleet_whole    # a cluster file that did not load: no rule over the whole fleet (no cascade)
    context = (catalog, loaded.teams, prio, pools, tuple(sorted(regions)), whole)
    kept = memo.entries if memo is not None and memo.context == context else {}
    now: dict[str, tuple[Job, tuple[Problem, ...], tuple[ResolvedOption, ...] | None]] = {}
    for job in loaded.jobs:
        jid = job.id
        path = loaded.job_paths[jid]
        hit = kept.get(path)
        if hit is not None and hit[0] is job:
            r.problems.extend(hit[1])
            if hit[2] is not None:
                out[jid] = hit[2]
            now[path] = hit
            continue
        start = len(r.problems)
        _check_identity(r, path, job, teams)
        _check_container(r, path, job, container)
        cls = _check_priority(r, path, job, teams, classes, prio.default if prio else None)
        if job.kind != "inference" and job.replicas > 1:
            r.add(path, ("replicas",), f"only inference jobs have replicas; this is a {job.kind} job",
                  "set `kind: inference`, or remove `replicas`")
        resolved = check_workload_job(r, path, job, _check_options(r, path, job, catalog, node_sizes, verdicts),
                                      node_sizes)
        spot = spot_policy(job, cls.spot if cls else None)
        if cls is not None and cls.spot == "required" and "spot" in job.model_fields_set and job.spot == "never":
            r.add(path, ("spot",), f"priority class `{cls.name}` requires spot capacity, but the job says `never`",
                  "remove `spot: never`, or use another priority class")
        if resolved is not None:
            if whole:
                _check_fit(r, path, job, resolved, spot, index)
                _check_spread_region(r, path, job, resolved, spot, in_region)
            if loaded.teams is not None and job.team in (teams or {}):
                _check_quota(r, path, job, resolved, loaded.teams, ceilings)
            _check_derived_names(r, path, job, resolved, units, longest)
            check_lws_names(r, path, job, resolved, by_kind, longest_pool)
            out[jid] = resolved
        if job.data_region is not None and regions and job.data_region not in regions and whole:
            r.add(path, ("data_region",), f"no cluster is in region `{job.data_region}`, so no placement can be near "
                  "the data", "check the spelling; regions of the fleet: " + ", ".join(sorted(regions)),
                  severity=Severity.WARNING)
        if job.data_residency == "required" and job.data_region is None:
            r.add(path, ("data_residency",), "`data_residency: required` needs a `data_region` to stay in",
                  "add `data_region: REGION`, or remove `data_residency`")
        if job.spread is not None and job.kind != "inference":
            r.add(path, ("spread",), f"only inference replicas are spread; this is a {job.kind} job",
                  "remove `spread`, or set `kind: inference`")
        for key in sorted(job.env):
            why = secret_reason(key, job.env[key])
            if why:
                r.add(path, ("env", key), f"env `{key}` {why}; secrets must not be committed",
                      "remove it (and rotate it: git history keeps it); put it in a Kubernetes Secret in the "
                      "team's namespace and name that Secret in `env_from_secrets: [NAME]`")
        check_workload_fields(r, path, job)
        now[path] = (job, tuple(r.problems[start:]), out.get(jid))
    if memo is not None:
        memo.context, memo.entries = context, now
    if teams is not None:
        _check_shared_namespaces(r, teams)
        check_workload_names(r, list(loaded.jobs), loaded.job_paths, teams, loaded.clusters)
    check_groups(r, list(loaded.jobs), loaded.job_paths, {j.id: j.priority or (prio.default if prio else "")
                                                           for j in loaded.jobs})
    return out


RESERVED_MOUNTS = ("/dev", "/proc", "/sys", "/var/run/secrets", "/run/secrets", "/etc")
"""Mount points a job's volumes may not cover: device nodes, kernel interfaces and the ServiceAccount token
(Kubernetes mounts it under /var/run/secrets/kubernetes.io), and /etc, where the kubelet writes hosts and
resolv.conf. `/dev/shm` is Fleet's own memory volume for GPU jobs (render/jobset.py)."""


def check_workload_fields(r: Reporter, path: str, job: Job) -> None:
    """The production fields: names only (the namespace is always the team's, and no field reaches the host
    or privileged settings), serving fields only on inference jobs, volumes that make sense."""
    if job.kind != "inference":
        for field in ("port", "readiness_path"):
            if getattr(job, field) is not None:
                r.add(path, (field,), f"`{field}` is for inference services; this is a {job.kind} job",
                      f"remove `{field}`, or set `kind: inference`")
    elif job.port is None and job.readiness_path is None:
        r.add(path, ("kind",), "an inference job without `port` gets a headless Service and no readiness probe: "
              "nothing can reach it through the Service, and rollouts cannot wait for it to be ready",
              "add `port: N` (and `readiness_path: /health` if the server answers HTTP)", severity=Severity.WARNING)
    elif job.readiness_path is not None and job.port is None:
        r.add(path, ("readiness_path",), "a readiness probe needs the port it asks",
              "add `port: N` (the port the server listens on)")
    if job.readiness_path is not None and (not job.readiness_path.startswith("/")
                                           or any(c.isspace() for c in job.readiness_path)):
        r.add(path, ("readiness_path",), f"`{job.readiness_path}` is not an HTTP path",
              "write it as an absolute path without spaces, e.g. /health")
    if job.kind == "inference" and job.max_restarts is not None:
        r.add(path, ("max_restarts",), "inference replicas restart for ever (they are services); "
              "`max_restarts` is for training and batch jobs", "remove `max_restarts`")
    if job.service_account in kube.FLEET_SERVICE_ACCOUNTS:
        r.add(path, ("service_account",), f"ServiceAccount `{job.service_account}` is Fleet's own; a job never runs "
              "as Fleet", "name a ServiceAccount of the team's own, or remove `service_account` (the pods then run "
              "as `default`)")
    for field in ("env_from_secrets", "image_pull_secrets"):
        names: tuple[str, ...] = getattr(job, field)
        for i, name in enumerate(names):
            if name in names[:i]:
                r.add(path, (field, i), f"Secret `{name}` is listed twice", "list each Secret once")
            elif name in kube.FLEET_SECRETS:
                r.add(path, (field, i), f"Secret `{name}` holds Fleet's own credentials; no job may read it",
                      "name a Secret of the team's own (not one of " + ", ".join(sorted(kube.FLEET_SECRETS)) + ")")
    seen_names: dict[str, int] = {}
    seen_paths: dict[str, int] = {}
    for i, vol in enumerate(job.volumes):
        where = ("volumes", i)
        if (vol.claim is None) == (vol.config_map is None):
            r.add(path, where, f"volume `{vol.name}` needs exactly one of `claim` and `config_map`",
                  "name a PersistentVolumeClaim (`claim: NAME`) or a ConfigMap (`config_map: NAME`) of the "
                  "team's namespace")
        if vol.config_map is not None and not vol.read_only:
            r.add(path, (*where, "read_only"), "ConfigMap volumes are always read-only",
                  "remove `read_only: false`, or use a `claim`")
        if vol.name in seen_names or vol.name == SHM_VOLUME:
            r.add(path, (*where, "name"), f"volume name `{vol.name}` is used twice" if vol.name in seen_names
                  else f"volume name `{SHM_VOLUME}` is Fleet's own (the /dev/shm of GPU jobs)",
                  "give every volume its own name")
        seen_names.setdefault(vol.name, i)
        why = _mount_problem(vol.mount_path)
        if why:
            r.add(path, (*where, "mount_path"), f"mount_path `{vol.mount_path}` {why}",
                  "mount under a path of your own, e.g. /data or /models")
        elif vol.mount_path.rstrip("/") in seen_paths:
            r.add(path, (*where, "mount_path"), f"mount_path `{vol.mount_path}` is already used by volume "
                  f"{seen_paths[vol.mount_path.rstrip('/')]}", "give every volume its own mount_path")
        seen_paths.setdefault(vol.mount_path.rstrip("/"), i)


SHM_VOLUME = "dshm"


def _mount_problem(mount: str) -> str | None:
    if not mount.startswith("/"):
        return "is not an absolute path"
    parts = mount.split("/")
    if any(p in (".", "..") for p in parts) or "//" in mount or any(c.isspace() or c == ":" for c in mount):
        return "is not a plain absolute path (no `.`, `..`, `//`, `:` or spaces)"
    clean = mount.rstrip("/") or "/"
    if clean == "/":
        return "would hide the whole image"
    for reserved in RESERVED_MOUNTS:
        if clean == reserved or clean.startswith(reserved + "/"):
            return f"is under `{reserved}`, which belongs to the system"
    return None


def quota_ceiling(teams: TeamsDoc, team: str, acc: str) -> tuple[int, int]:
    """The most of `acc` the team could ever hold: (its nominal, what it could borrow at most): its
    borrowing limit, and at most what the other teams of its cohort tree lend (min(lending limit, nominal));
    0 outside a cohort."""
    domains = teams.domains()
    own = next(t for t in teams.teams if t.name == team)
    q = own.quota.get(acc)
    nominal = q.nominal if q else 0
    if domains.get(team) is None:
        return nominal, 0
    lent = 0
    for t in teams.teams:
        tq = t.quota.get(acc)
        if t.name != team and tq is not None and domains.get(t.name) == domains[team]:
            lent += min(tq.nominal, tq.nominal if tq.lending_limit is None else tq.lending_limit)
    borrow = lent if q is None or q.borrowing_limit is None else min(lent, q.borrowing_limit)
    return nominal, borrow


def _check_quota(r: Reporter, path: str, job: Job, options: tuple[ResolvedOption, ...], teams: TeamsDoc,
                 ceilings: dict[tuple[str, str], tuple[int, int]]) -> None:
    over = []
    for o in options:
        key = (job.team, o.accelerator)
        if key not in ceilings:
            ceilings[key] = quota_ceiling(teams, job.team, o.accelerator)
        nominal, borrow = ceilings[key]
        need = o.count * job.replicas
        if need <= nominal + borrow:
            return
        over.append(f"option {o.index} needs {need} {o.accelerator}, team {job.team} has a nominal {nominal} "
                    f"and may borrow at most {borrow}")
    r.add(path, ("options",), "no quota can ever admit this job: " + "; ".join(over),
          f"lower the count or replicas, add an option that fits, or ask a fleet admin to raise team {job.team}'s "
          "quota or borrowing limit", severity=Severity.WARNING)


def _unit_kinds(pools: tuple[ResolvedPool, ...]) -> dict[tuple[str, str | None], list[ResolvedPool]]:
    """One pool per distinct unit of each (accelerator, slice shape): the pools a job option could get."""
    seen: dict[tuple[str, str | None, int, int], ResolvedPool] = {}
    for p in pools:
        seen.setdefault((p.accelerator, p.shape, p.unit_accelerators, p.nodes_per_unit), p)
    out: dict[tuple[str, str | None], list[ResolvedPool]] = defaultdict(list)
    for (acc, shape, _, _), p in sorted(seen.items(), key=lambda kv: repr(kv[0])):
        out[(acc, shape)].append(p)
    return out


Longest = tuple[int, str, str, int, int] | None
"""The longest pod name a job's options could give: (its length, where, and the replicated job, replicas and pods
`kube.child_jobs` gives there), or None when no pool could run them."""


def _check_derived_names(r: Reporter, path: str, job: Job, options: tuple[ResolvedOption, ...],
                         units: dict[tuple[str, str | None], list[ResolvedPool]],
                         longest: dict[tuple[int, int, int], tuple[object, Longest]]) -> None:
    """The JobSet name, its child Job names and pod names must be DNS-1035 labels on every pool the planner
    could choose (the JobSet webhook rejects the JobSet otherwise, at apply). Where the longest name comes from
    depends on the options, the replicas and the length of the name alone (a pod name is the job's name and
    what follows it), so it is found once for each (`longest`: by the options' identity, which jobs with equal
    options share (`_check_options`), the tuple kept beside the answer so that its id names it while the dict
    lives); the name in the message is the job's own."""
    if not kube.DNS1035_LABEL.match(job.name):
        r.add(path, ("name",), f"job name `{job.name}` starts with a digit, but the JobSet, its Service, Jobs and "
              "pods are named after it and those names must start with a letter (DNS-1035 label)",
              f"start the name with a letter, e.g. `job-{job.name}` (and rename the file to match)")
        return
    key = (id(options), job.replicas, len(job.name))
    hit = longest.get(key)
    if hit is not None and hit[0] is options:
        found = hit[1]
    else:
        found = _longest_pod(job, options, units)
        longest[key] = (options, found)
    if found is not None and found[0] > kube.MAX_LABEL:
        worst = (found[0], kube.longest_pod_name(job.name, *found[2:]), found[1])
        room = len(job.name) - (worst[0] - kube.MAX_LABEL)
        r.add(path, ("name",), f"job name `{job.name}` is too long for the names derived from it: with "
              f"{worst[2]} a pod would be named `{worst[1]}` ({worst[0]} characters; Kubernetes allows "
              f"{kube.MAX_LABEL}), and the JobSet webhook rejects the JobSet",
              f"shorten the name to at most {max(room, 1)} characters (and rename the file to match)")


def _longest_pod(job: Job, options: tuple[ResolvedOption, ...],
                 units: dict[tuple[str, str | None], list[ResolvedPool]]) -> Longest:
    worst: Longest = None
    for opt in options:
        for pool in units.get((opt.accelerator, opt.shape), ()):
            rjob, replicas, pods = kube.child_jobs(opt, pool, job.replicas)
            size = len(kube.longest_pod_name(job.name, rjob, replicas, pods))
            if worst is None or size > worst[0]:
                worst = (size, f"option {opt.index} on {pool.key}", rjob, replicas, pods)
    return worst


def _check_shared_namespaces(r: Reporter, teams: Mapping[str, Team]) -> None:
    """Two teams may share a namespace, but a JobSet is named after its job: equal job names would collide."""
    by_object: dict[tuple[str, str], list[Job]] = defaultdict(list)
    for job in r.loaded.jobs:
        team = teams.get(job.team)
        if team is not None:
            by_object[(team.queue_namespace, job.name)].append(job)
    for (namespace, name), jobs in sorted(kv for kv in by_object.items() if len(kv[1]) >= 2):
        first, *rest = sorted(jobs, key=lambda j: j.id)
        for job in rest:
            r.add(r.loaded.job_paths[job.id], ("name",),
                  f"job `{job.id}` and job `{first.id}` would both be JobSet `{name}` in namespace `{namespace}`, "
                  f"which teams `{first.team}` and `{job.team}` share",
                  "rename one of the two jobs, or give the teams namespaces of their own in policies/teams.yaml")


def _check_identity(r: Reporter, path: str, job: Job, teams: dict[str, Team] | None) -> None:
    m = _JOB_PATH.match(path)
    assert m is not None  # the loader only builds jobs from such paths
    folder, stem = m.groups()
    if job.team != folder:
        r.add(path, ("team",), f"job file is in jobs/{folder}/ but says `team: {job.team}`",
              f"move it to jobs/{job.team}/{job.name}.yaml, or set `team: {folder}`")
    if job.name != stem:
        r.add(path, ("name",), f"job `{job.name}` is in {stem}.yaml", f"rename the file to {job.name}.yaml")
    if teams is not None and job.team not in teams:
        r.add(path, ("team",), f"team `{job.team}` does not exist",
              "add it to policies/teams.yaml, or use one of: " + ", ".join(sorted(teams)))


def _check_priority(r: Reporter, path: str, job: Job, teams: dict[str, Team] | None,
                    classes: dict[str, PriorityClass] | None, default: str | None) -> PriorityClass | None:
    if classes is None:
        return None
    name = job.priority or default
    if name is None or name not in classes:
        if job.priority is not None:
            r.add(path, ("priority",), f"priority class `{job.priority}` does not exist",
                  "use one of: " + ", ".join(sorted(classes)))
        return None
    cls = classes[name]
    breach = above_ceiling(cls, teams.get(job.team) if teams else None, classes)
    if breach is not None:
        r.add(path, ("priority",) if job.priority else ("name",),
              f"team `{job.team}` may use priority classes up to `{breach.name}`, not `{cls.name}`",
              f"use `{breach.name}` or lower, or ask a fleet admin to raise the team's max_priority")
    return cls


def above_ceiling(cls: PriorityClass, team: Team | None, classes: Mapping[str, PriorityClass]) -> PriorityClass | None:
    """The team's ceiling class when `cls` is above it, else None. Shared with `fleet check` (ownership.py),
    which applies it with the base revision's policies so that a change cannot raise its own ceiling."""
    ceiling = classes.get(team.max_priority) if team and team.max_priority else None
    return ceiling if ceiling is not None and cls.value > ceiling.value else None


OptionsVerdict = tuple[tuple[tuple[tuple[str | int, ...], str, str, Severity], ...], tuple[ResolvedOption, ...] | None]
"""What `_options_verdict` finds of a job's options: (field path, message, hint, severity) of each problem, and the
resolved options (None when one does not resolve)."""


def _check_options(r: Reporter, path: str, job: Job, catalog: Catalog, node_sizes: dict[str, set[int]],
                   verdicts: dict[tuple[tuple[object, ...], ...], OptionsVerdict]) -> tuple[ResolvedOption, ...] | None:
    """The job's options resolved, their problems reported. The verdict reads the options' fields alone (and the
    catalog and node sizes, the same for every job of one validation): jobs share few distinct option lists, so
    each is judged once, keyed by every field of each option (strictly typed: equal values mean equal options)."""
    key = tuple(tuple(o.__dict__.values()) for o in job.options)
    found = verdicts.get(key)
    if found is None:
        found = verdicts[key] = _options_verdict(job, catalog, node_sizes)
    found_problems, resolved = found
    for fld, message, hint, severity in found_problems:
        r.add(path, fld, message, hint, severity=severity)
    return resolved


def _options_verdict(job: Job, catalog: Catalog, node_sizes: dict[str, set[int]]) -> OptionsVerdict:
    found: list[tuple[tuple[str | int, ...], str, str, Severity]] = []
    resolved: list[ResolvedOption] = []
    for i, opt in enumerate(job.options):
        ro, issues = resolve_option(i, opt, catalog)
        found.extend((("options", i, *fld), message, hint, Severity.ERROR) for fld, message, hint in issues)
        if ro is None:
            continue
        if ro.shape is not None and opt.count is not None and opt.count != shape_chips(ro.shape):
            found.append((("options", i, "count"), f"{opt.count} chips is not a {ro.accelerator} slice size: the "
                          f"job gets a {ro.shape} slice ({shape_chips(ro.shape)} chips)",
                          f"ask for `count: {shape_chips(ro.shape)}` or `topology: {ro.shape}` to make it explicit",
                          Severity.WARNING))
        sizes = node_sizes.get(ro.accelerator, set())
        if ro.shape is None and sizes and all(ro.count > s and ro.count % s for s in sizes):
            s = max(sizes)
            lo, hi = ro.count // s * s, (ro.count // s + 1) * s
            found.append((("options", i, "count"),
                          f"{ro.count} {ro.accelerator} is more than one {s}-GPU node but not a whole number of nodes",
                          f"multi-node jobs take whole nodes: use {lo or s} or {hi}", Severity.ERROR))
            continue
        resolved.append(ro)
    found.extend((("options", i), m, hint, Severity.WARNING) for i, m, hint in repeated_shapes(resolved))
    if job.options and job.options[0].relative_speed != 1.0:
        found.append((("options", 0, "relative_speed"), "the first option is the reference: its relative_speed is "
                      "1.0", "remove relative_speed from the first option and scale the others to it",
                      Severity.WARNING))
    return tuple(found), (tuple(resolved) if len(resolved) == len(job.options) else None)


def _check_spread_region(r: Reporter, path: str, job: Job, options: tuple[ResolvedOption, ...], spot: str,
                         in_region: Mapping[str, list[ResolvedPool]]) -> None:
    """Warn when the job's stated `spread:` cannot be met inside its `data_region`: the active pools there
    that can run one of its options (`gang_fit`) span fewer than two domains (plan/spread.py)."""
    how, region = spread_of(job), job.data_region
    if job.spread is None or how == "none" or region is None:
        return
    able = [p for p in in_region.get(region, ()) if any(gang_fit(o, p, spot, job.kind) is None for o in options)]
    doms = sorted({domain(p, how) for p in able})
    if len(doms) >= 2:
        return
    where = f"all in {doms[0]}" if doms else "none"
    if job.data_residency == "required":
        then = f"so only one replica can run and the other {job.replicas - 1} wait (data_residency: required)"
    else:
        then = f"so the rule places {job.replicas - 1} of its {job.replicas} replicas outside {region}, away from " \
               "the data"
    r.add(path, ("spread",), f"`spread: {how}` cannot be met inside the job's data_region {region}: the active "
          f"pools there that can run the job are {where}, {then}",
          f"add a pool in another {how} of {region}, or remove `spread: {how}` (the default spread is best effort "
          f"and keeps every replica in {region})", severity=Severity.WARNING)


def _describe(opt: ResolvedOption) -> str:
    if opt.shape is not None:
        return f"{opt.accelerator} {opt.shape}" + (f" x{opt.slices} slices" if opt.slices > 1 else "")
    return f"{opt.count}x {opt.accelerator}"


def _check_fit(r: Reporter, path: str, job: Job, options: tuple[ResolvedOption, ...], spot: str,
               index: FitIndex) -> None:
    fitting = [index.fits(o, spot, job.kind) for o in options]
    if any(fitting):
        for o, ok in zip(options, fitting, strict=True):
            if not ok:
                r.add(path, ("options", o.index), f"option {o.index} ({_describe(o)}) fits no pool of the fleet "
                      "and will never be chosen", "remove it, or add a pool that can run it",
                      severity=Severity.WARNING)
        return
    why = []
    for o in options:
        near = index.closest(o, spot, job.kind)
        if near is None:
            why.append(f"option {o.index} ({_describe(o)}): the fleet has no pools")
        else:
            pool, reason = near
            why.append(f"option {o.index} ({_describe(o)}): closest pool {pool.key}, but {reason}")
    r.add(path, ("options",), "the job fits no pool in the fleet at all; " + "; ".join(why),
          "change the option to a shape and spot policy an existing pool offers, or ask a fleet admin for a pool",
          key=True)
