"""The model of `policies/notifications.yaml` (optional). Pure; its cross-document rules are in `checks`.

```yaml
routes:
  - name: rl-slack                 # unique; names the route in warnings
    teams: [rl]                    # the teams whose jobs it carries; leave out for every team
    events: [started, failed, preempted, waiting]   # leave out for every event
    webhook_env: FLEET_WEBHOOK_RL  # the environment variable holding the webhook URL
```
The URL is never in git: a Slack incoming webhook's URL is its credential, so the reconciler reads it from
its environment (a Kubernetes Secret), as `webhook_env` names it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..models import Model, Name

NOTIFICATIONS = "policies/notifications.yaml"
EventKind = Literal["started", "finished", "failed", "preempted", "moved", "waiting"]
EVENT_KINDS: tuple[EventKind, ...] = ("started", "finished", "failed", "preempted", "moved", "waiting")


class Route(Model):
    name: Name = Field(description="the route's name, unique; warnings about it name it")
    teams: tuple[Name, ...] = Field((), description="teams (policies/teams.yaml) whose job events it carries; "
                                    "empty or left out: every team")
    events: tuple[EventKind, ...] = Field(EVENT_KINDS, description="started, finished, failed, preempted (Kueue "
                                          "evicted it for another job), moved (the plan moved it), waiting (queued "
                                          "longer than its class's queue-wait objective in policies/slos.yaml)")
    webhook_env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]{0,127}$", description="the environment variable that "
                             "holds the webhook URL (Slack-compatible: a POST of {\"text\": ...}); never the URL")


class NotificationsDoc(Model):
    """policies/notifications.yaml: where job events go."""

    routes: tuple[Route, ...] = Field((), description="each route sends the events of its teams to one webhook")
