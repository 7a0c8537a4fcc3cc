"""Cross-document rules of `policies/notifications.yaml`, each a located problem with a hint. Pure."""

from __future__ import annotations

from ..reporter import Reporter
from ..suggest import did_you_mean
from .model import NOTIFICATIONS


def check_notifications(r: Reporter) -> None:
    """Route names are unique and name teams of policies/teams.yaml."""
    doc = r.loaded.notifications
    if doc is None:
        return
    teams = {t.name for t in r.loaded.teams.teams} if r.loaded.teams else None
    first: dict[str, int] = {}
    for i, route in enumerate(doc.routes):
        if route.name in first:
            r.add(NOTIFICATIONS, ("routes", i, "name"), f"route `{route.name}` is defined twice "
                  f"(also routes[{first[route.name]}])", "give each route a name of its own")
        first.setdefault(route.name, i)
        for k, team in enumerate(route.teams):
            if teams is not None and team not in teams:
                r.add(NOTIFICATIONS, ("routes", i, "teams", k), f"team `{team}` does not exist",
                      did_you_mean(team, teams, choose="teams of policies/teams.yaml"))
