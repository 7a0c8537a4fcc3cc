"""Validation of `robots/` and `deployments/` (DESIGN 4d): the rules across fields and documents. Pure.

- files are named after their `name`; robot names are unique in a fleet;
- a deployment names a fleet that exists, a team that exists, a `from_job` of the form <team>/<job> (one that
  is not a job of `jobs/` is a warning: `fleet gc` removes finished jobs' files);
  its model and server are pinned by digest; its selector picks at least one robot;
- waves: names unique; a wave without a selector (the rest) only last; no robot in two waves; every robot of
  the deployment in some wave; no wave empty; `max_unavailable` a count or a percent;
- the window's cron parses; the model fits each robot's disk next to the previous one it keeps;
- a robot is in one deployment at most (two would push it two desired states);
- warning: a wave whose robots cannot all be sent the model over the site's uplink within one window.
"""

from __future__ import annotations

import re

from ..load import Loaded
from ..problems import Severity
from ..reporter import Reporter
from . import cron
from .models import PINNED, Deployment, RobotFleet, Wave, selects


def wave_robots(dep: Deployment, fleet: RobotFleet) -> tuple[tuple[Wave, tuple[str, ...]], ...]:
    """Each wave with the robots it takes, in order: a wave with a selector takes the deployment's robots it
    matches; one without takes those no earlier wave took. (Overlaps are validation errors; here a robot
    goes to the first wave that names it.)"""
    mine = [r for r in fleet.robots if selects(dep.selector, r.labels)]
    taken: set[str] = set()
    out = []
    for w in dep.rollout.waves:
        names = tuple(r.name for r in mine if r.name not in taken and (not w.selector or selects(w.selector, r.labels)))
        taken.update(names)
        out.append((w, names))
    return tuple(out)


def transfer_hours(size_gb: float, robots: int, uplink_mbps: float) -> float:
    """Hours to send `robots` copies of a `size_gb` model over a `uplink_mbps` link (GB = 10^9 bytes)."""
    return size_gb * robots * 8_000 / uplink_mbps / 3600


def check_robots(r: Reporter) -> None:
    loaded = r.loaded
    fleets: dict[str, RobotFleet] = {}
    for path, f in loaded.robot_fleets:
        if path != f"robots/{f.name}.yaml":
            r.add(path, ("name",), f"robot fleet `{f.name}` is in {path}",
                  f"rename the file to robots/{f.name}.yaml, or set name: {path[7:-5]}")
        seen: set[str] = set()
        for i, robot in enumerate(f.robots):
            if robot.name in seen:
                r.add(path, ("robots", i, "name"), f"robot `{robot.name}` is listed twice",
                      "names are unique in a fleet")
            seen.add(robot.name)
        fleets.setdefault(f.name, f)
    claimed: dict[tuple[str, str], str] = {}
    for path, d in loaded.deployments:
        _check_deployment(r, loaded, path, d, fleets, claimed)


def _check_deployment(r: Reporter, loaded: Loaded, path: str, d: Deployment, fleets: dict[str, RobotFleet],
                      claimed: dict[tuple[str, str], str]) -> None:
    if path != f"deployments/{d.name}.yaml":
        r.add(path, ("name",), f"deployment `{d.name}` is in {path}",
              f"rename the file to deployments/{d.name}.yaml, or set name: {path[12:-5]}")
    for fld, ref in ((("model", "artifact"), d.model.artifact), (("server", "image"), d.server.image)):
        if not PINNED.match(ref):
            r.add(path, fld, f"`{ref[:80]}` is not pinned by digest",
                  "write host/path@sha256:<64 lowercase hex digits> (a tag can be moved under a running robot)")
    teams = {t.name for t in loaded.teams.teams} if loaded.teams else None
    if d.team is not None and teams is not None and d.team not in teams:
        r.add(path, ("team",), f"team `{d.team}` is not in policies/teams.yaml", "name a team that exists")
    if d.model.from_job is not None:
        jobs = {j.id for j in loaded.jobs}
        if not re.fullmatch(r"[a-z0-9-]+/[a-z0-9-]+", d.model.from_job):
            r.add(path, ("model", "from_job"), f"`{d.model.from_job[:80]}` is not a job id",
                  "write <team>/<job>, e.g. foundation/pi05-towel-ft")
        elif d.model.from_job not in jobs and (file := f"jobs/{d.model.from_job}.yaml") not in loaded.unloaded \
                and file not in loaded.docs:
            # a warning: `fleet gc` removes the files of finished jobs; a file there that is not that job has its own
            r.add(path, ("model", "from_job"), f"`{d.model.from_job}` is not a job of jobs/",
                  f"name the training job that made the model (jobs/{d.model.from_job}.yaml does not exist; "
                  "fine if it finished and its file was removed)", severity=Severity.WARNING)
    if d.rollout.window is not None:
        got = cron.parse(d.rollout.window.cron)
        if isinstance(got, str):
            r.add(path, ("rollout", "window", "cron"), f"`{d.rollout.window.cron}` is not a cron expression: {got}",
                  "write 5 fields, e.g. `0 18 * * 1-5` (18:00 UTC, Monday to Friday)")
    fleet = fleets.get(d.fleet)
    if fleet is None and f"robots/{d.fleet}.yaml" in loaded.docs:
        return          # the fleet's file is there but did not load: its own errors say why, no cascade here
    if fleet is None:
        r.add(path, ("fleet",), f"robot fleet `{d.fleet}` does not exist",
              f"create robots/{d.fleet}.yaml or name one of: {', '.join(sorted(fleets)) or '(none yet)'}")
        return
    mine = [x for x in fleet.robots if selects(d.selector, x.labels)]
    if not mine:
        r.add(path, ("selector",) if d.selector else ("fleet",), f"selects no robot of fleet `{fleet.name}`",
              "match the labels of robots/" + fleet.name + ".yaml")
        return
    for robot in mine:
        other = claimed.setdefault((fleet.name, robot.name), d.name)
        if other != d.name:
            r.add(path, ("selector",) if d.selector else ("fleet",),
                  f"robot `{fleet.name}/{robot.name}` is also in deployment `{other}`",
                  "a robot runs one deployment: narrow one of the two selectors")
    _check_waves(r, path, d, fleet)
    if fleet.gitops is None and any(fleet.runtime(x) == "k3s" for x in mine):
        r.add(path, ("fleet",), f"robots of `{fleet.name}` run k3s, but robots/{fleet.name}.yaml has no `gitops`",
              "add gitops: {repo: https://..., branch: main, path: rendered} (where the rendered policy servers "
              "are committed for Rancher Fleet to read)")
    for robot in mine:
        disk = fleet.disk_gb(robot)
        if disk is not None and 2 * d.model.size_gb > disk:
            r.add(path, ("model", "size_gb"), f"a {d.model.size_gb:g} GB model does not fit robot `{robot.name}`'s "
                  f"{disk:g} GB disk next to the previous model it keeps (2 x {d.model.size_gb:g} GB)",
                  f"raise disk_gb of {robot.name} in robots/{fleet.name}.yaml, or deploy a smaller model")


def _check_waves(r: Reporter, path: str, d: Deployment, fleet: RobotFleet) -> None:
    waves = d.rollout.waves
    names: set[str] = set()
    mine = [x for x in fleet.robots if selects(d.selector, x.labels)]
    owner: dict[str, str] = {}
    for i, w in enumerate(waves):
        at = ("rollout", "waves", i)
        if w.name in names:
            r.add(path, (*at, "name"), f"wave `{w.name}` is named twice", "give each wave its own name")
        names.add(w.name)
        if isinstance(w.max_unavailable, str) and not re.fullmatch(r"(100|[1-9][0-9]?)%", w.max_unavailable.strip()):
            r.add(path, (*at, "max_unavailable"), f"`{w.max_unavailable}` is not a count or a percent",
                  "write a whole number of robots, e.g. 2, or a percent from 1% to 100%, e.g. 25%")
        if not w.selector and i != len(waves) - 1:
            r.add(path, (*at, "selector"), f"wave `{w.name}` has no selector but is not the last wave",
                  "a wave without a selector takes the robots no earlier wave took: make it the last, or "
                  "add a selector")
        for x in mine:
            if w.selector and selects(w.selector, x.labels):
                first = owner.setdefault(x.name, w.name)
                if first != w.name:
                    r.add(path, (*at, "selector"), f"robot `{x.name}` is in wave `{first}` and in wave `{w.name}`",
                          "waves must not overlap: narrow one of the two selectors")
    resolved = wave_robots(d, fleet)
    covered = {n for _, ns in resolved for n in ns}
    left = [x.name for x in mine if x.name not in covered]
    if left:
        r.add(path, ("rollout", "waves"), f"robot(s) {', '.join(left[:10])}{' ...' if len(left) > 10 else ''} "
              "of the deployment are in no wave", "add a last wave without a selector (the rest), or widen a selector")
    for i, (w, ns) in enumerate(resolved):
        if not ns:
            r.add(path, ("rollout", "waves", i), f"wave `{w.name}` takes no robot",
                  "its selector matches none of the deployment's robots that an earlier wave did not take")
    window = d.rollout.window
    if window is None:
        return
    for i, (w, ns) in enumerate(resolved):
        hours = transfer_hours(d.model.size_gb, len(ns), fleet.link.uplink_mbps)
        if hours > window.hours:
            r.add(path, ("rollout", "waves", i),
                  f"wave `{w.name}`: {len(ns)} robot(s) x {d.model.size_gb:g} GB take {hours:.1f} h on the "
                  f"{fleet.link.uplink_mbps:g} Mbit/s uplink of `{fleet.name}`, longer than the {window.hours:g} h "
                  "window", "robots not prestaged when the window opens switch in a later one: split the wave, "
                  "lengthen the window, or start prestaging earlier", severity=Severity.WARNING)
