"""What a change does to robots, for review (`fleet plan`, `fleet cost`, the pull-request comment). Pure.

For every deployment the change adds, edits or removes: which robots get which model in which wave, the bytes
to move to each site (each robot pulls the model once, over the site's shared uplink) and how long that takes
on the link (`uplink_mbps`). The comment leads with it: a rollout to robots is the riskiest deploy a change
makes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..load import Loaded
from ..plan.markdown import table_cell
from ..problems import printable
from .validate import transfer_hours, wave_robots


@dataclass(frozen=True)
class WaveChange:
    name: str
    robots: tuple[str, ...]
    soak_minutes: float


@dataclass(frozen=True)
class DeploymentChange:
    deployment: str
    fleet: str
    verb: str                       # adds | changes the model of | changes | removes
    model: str                      # the artifact (new, or the removed one)
    before: str | None              # the base's artifact, when it changes
    from_job: str | None
    waves: tuple[WaveChange, ...]
    gigabytes: float                # to the site: robots x model size
    link_hours: float               # on the site's uplink
    uplink_mbps: float

    def as_dict(self) -> dict[str, object]:
        return {"deployment": self.deployment, "fleet": self.fleet, "verb": self.verb, "model": self.model,
                "before": self.before, "from_job": self.from_job, "bytes": round(self.gigabytes * 1e9),
                "link_hours": round(self.link_hours, 3), "uplink_mbps": self.uplink_mbps,
                "waves": [{"name": w.name, "robots": list(w.robots), "soak_minutes": w.soak_minutes}
                          for w in self.waves]}


def robot_changes(head: Loaded, base: Loaded | None) -> tuple[DeploymentChange, ...]:
    """The deployments `head` changes against `base` (without a base: every deployment, as added)."""
    fleets = {f.name: f for _, f in head.robot_fleets}
    before = {d.name: d for _, d in base.deployments} if base else {}
    base_fleets = {f.name: f for _, f in base.robot_fleets} if base else {}
    out = []
    for _, d in head.deployments:
        old = before.pop(d.name, None)
        fleet = fleets.get(d.fleet)
        if fleet is None or (old == d and base_fleets.get(d.fleet) == fleet):
            continue
        verb = "adds" if old is None else "changes the model of" if old.model.artifact != d.model.artifact \
            else "changes"
        waves = tuple(WaveChange(w.name, rs, w.soak_minutes) for w, rs in wave_robots(d, fleet))
        n = sum(len(w.robots) for w in waves)
        moves = verb != "changes" or old is None
        out.append(DeploymentChange(d.name, fleet.name, verb, d.model.artifact,
                                    old.model.artifact if old and old.model.artifact != d.model.artifact else None,
                                    d.model.from_job, waves, d.model.size_gb * n if moves else 0.0,
                                    transfer_hours(d.model.size_gb, n, fleet.link.uplink_mbps) if moves else 0.0,
                                    fleet.link.uplink_mbps))
    for name, d in sorted(before.items()):      # its robots keep what they run; nothing is pushed to them
        old_fleet = base_fleets.get(d.fleet)
        waves = tuple(WaveChange(w.name, rs, w.soak_minutes) for w, rs in wave_robots(d, old_fleet)) \
            if old_fleet else ()
        out.append(DeploymentChange(name, d.fleet, "removes", d.model.artifact, None, d.model.from_job, waves, 0.0,
                                    0.0, 0.0))
    return tuple(sorted(out, key=lambda c: (c.fleet, c.deployment)))


def _short(artifact: str) -> str:
    name, _, digest = artifact.partition("@")
    return f"{name.rsplit('/', 1)[-1]}@{digest[:19]}" if digest else name


def robots_markdown(changes: tuple[DeploymentChange, ...]) -> str:
    """The review section, empty when the change touches no robot."""
    if not changes:
        return ""
    robots = sum(len(w.robots) for c in changes for w in c.waves)
    lines = [f"### Robots: {robots} robot(s) in {len({c.fleet for c in changes})} site(s) touched", "",
             "| deployment | change | model | from job | waves (robots) | to the site | on the link |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in changes:
        model = _short(c.model) + (f" (was {_short(c.before)})" if c.before else "")
        waves = "; ".join(f"{w.name}: {', '.join(w.robots[:8])}{' ...' if len(w.robots) > 8 else ''} "
                          f"({len(w.robots)}{f', soak {w.soak_minutes:g} min' if w.soak_minutes else ''})"
                          for w in c.waves)
        size = f"{c.gigabytes:,.1f} GB" if c.gigabytes else "-"
        link = f"{c.link_hours:.1f} h at {c.uplink_mbps:g} Mbit/s" if c.link_hours else "-"
        cells = [f"{c.fleet}/{c.deployment}", c.verb, model, c.from_job or "-", waves or "-", size, link]
        lines.append("| " + " | ".join(table_cell(printable(x)) for x in cells) + " |")
    return "\n".join(lines) + "\n\n"
