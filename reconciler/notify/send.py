"""The sending edge of notifications: webhook POSTs, and the memory of what was sent.  EFFECT (network, files,
environment).

- Each routed event is one POST of Slack-compatible JSON (`{"text": ...}`) to the URL in the route's
  `webhook_env` variable, with a timeout (`TIMEOUT_S`): a webhook that hangs cannot hold the loop.
- At most once: an event counts as sent once a POST was attempted, unless the connection was refused or the
  name did not resolve (nothing was delivered: it is tried again next cycle). A timeout or an error answer
  after the request went out is not retried, since the receiver may have shown it.
- The state (events.State) is written to `state_file` after each cycle that changed it, atomically (safeio),
  so a restarted reconciler neither repeats nor loses what it sent; a first run with no state file sends
  nothing for what already runs, it only remembers it (a new deployment does not announce the whole fleet).
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from ..observe.model import Snapshot
from ..plan.types import Plan
from ..problems import UsageError
from ..safeio import write_file
from ..validate import Validated
from .events import JobEvent, State, happened, routed, slack_message, unsent_key, unsent_route

TIMEOUT_S = 5.0


class Notifier:
    """Sends each new job event once to the routes that carry it; remembers what it sent in `state_file`."""

    def __init__(self, state_file: Path | None, say: Callable[[str], None],
                 environ: Callable[[str], str | None] = os.environ.get) -> None:
        self.state_file, self.say, self.environ = state_file, say, environ
        self.first = state_file is None or not state_file.exists()
        self.state = _read(state_file) if not self.first and state_file is not None else State()

    def cycle(self, v: Validated, previous: Snapshot | None, current: Snapshot, plan: Plan, now: datetime) -> int:
        """Send this cycle's new events; the number of POSTs that went out."""
        doc = v.loaded.notifications
        if doc is None or not doc.routes:
            return 0
        events, after = happened(v, previous, current, plan, self.state, now)
        if self.first:           # a new deployment: remember what runs, announce nothing of it
            self.first = False
            self._keep(after, always=True)
            return 0
        owed: dict[str, set[str | None]] = {}      # a retried event goes only to the routes that missed it
        for entry in self.state.unsent:
            owed.setdefault(unsent_key(entry), set()).add(unsent_route(entry))
        sent, retry = 0, set()
        for route, env, event in routed(doc, events):
            if event.key in owed and None not in owed[event.key] and route not in owed[event.key]:
                continue
            url = self.environ(env)
            if not url:
                self.say(f"notifications: route {route}: ${env} is not set, so `{event.text}` is not sent")
                continue
            outcome = post(url, event)
            if outcome is None:
                sent += 1
                continue
            self.say(f"notifications: route {route}: {outcome}")
            if outcome.startswith("cannot connect"):
                retry.add(f"{route}|{event.key}")
        self._keep(State(after.sent - {unsent_key(r) for r in retry}, after.pending_since, frozenset(retry)))
        return sent

    def _keep(self, state: State, *, always: bool = False) -> None:
        if (always or state != self.state) and self.state_file is not None:
            write_file(self.state_file, json.dumps({"sent": sorted(state.sent), "unsent": sorted(state.unsent),
                                                    "pending_since": {k: t.isoformat() for k, t in
                                                                      sorted(state.pending_since.items())}},
                                                   indent=1) + "\n")
        self.state = state


def post(url: str, event: JobEvent) -> str | None:
    """POST the event's message; None when the webhook took it (2xx), else what went wrong."""
    body = json.dumps(slack_message(event)).encode()
    try:                                   # the URL is a credential: never said
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            return f"the webhook URL is not an http(s) URL, so `{event.text}` is not sent (fix the variable's value)"
        req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json",
                                                                            "User-Agent": "fleet-reconciler"})
    except ValueError:
        return f"the webhook URL is not a valid URL, so `{event.text}` is not sent (fix the variable's value)"
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            resp.read()
        return None
    except urllib.error.HTTPError as e:
        return f"the webhook answered HTTP {e.code} to `{event.text}` (not sent again)"
    except urllib.error.URLError as e:
        if isinstance(e.reason, (ConnectionRefusedError, socket.gaierror)):
            return f"cannot connect to the webhook ({e.reason}); `{event.text}` is tried again next cycle"
        return f"the webhook did not answer ({e.reason}) to `{event.text}` (not sent again)"
    except (TimeoutError, OSError, ValueError) as e:
        return f"the webhook did not answer ({e}) to `{event.text}` (not sent again)"


def _read(path: Path) -> State:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return State(frozenset(str(k) for k in doc["sent"]),
                     {str(k): datetime.fromisoformat(t) for k, t in doc["pending_since"].items()},
                     frozenset(str(k) for k in doc.get("unsent", ())))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UsageError(f"{path}: not the notifier's memory ({' '.join(str(e).split())[:200]})",
                         "remove the file: the notifier then starts afresh (announcing nothing of what runs)") from None
