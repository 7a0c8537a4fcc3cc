"""Found by a hunt: notification defects (each test fails before the fix)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

from test_notifications import NOW, Webhook, first_start, fleet, snap, three_waiting

from reconciler.notify.events import State, happened
from reconciler.notify.send import Notifier
from reconciler.pipeline import plan


def test_waiting_is_announced_in_the_live_loop_where_previous_is_the_last_snapshot() -> None:
    """The loop passes its last snapshot as `previous`; plan-pending waits are computed from the same plan
    and pending_since for `previous` too, so the event was always in `before` and never sent."""
    v, p, waiting = three_waiting()
    _, state = happened(v, None, snap(), p, State(), NOW)
    later = NOW + timedelta(minutes=61)
    events, state = happened(v, snap(), snap(at=later), p, state, later)    # the loop's second cycle
    assert sorted(e.job for e in events if e.kind == "waiting") == waiting


def test_a_move_is_announced_in_the_live_loop() -> None:
    v = fleet()
    p = plan(v)
    first = p.placements[0]
    moved = dataclasses.replace(p, placements=(dataclasses.replace(first, status="moved", reason="draining"),
                                               *p.placements[1:]))
    _, state = happened(v, None, snap(), p, State(), NOW)
    events, _ = happened(v, snap(), snap(), moved, state, NOW)
    assert [(e.kind, e.job) for e in events] == [("moved", first.job)]


def test_an_event_on_two_routes_is_not_sent_twice_when_one_route_refuses(tmp_path: Path) -> None:
    """vision/train failing goes to vision-chat and everything-failed; vision-chat's URL refuses the
    connection, so the key is retried next cycle, and everything-failed, which took it, gets it again."""
    hook = Webhook()
    try:
        env = {"HOOK_VISION": "http://127.0.0.1:9/x", "HOOK_ALL": f"{hook.url}/all"}
        v = fleet()
        p = plan(v)
        n = Notifier(tmp_path / "s.json", lambda s: None, env.get)
        running = snap(("vision", "train", "running", 0))
        n.cycle(v, None, running, p, NOW)
        failed = snap(("vision", "train", "failed", 0))
        n.cycle(v, running, failed, p, NOW)
        n.cycle(v, failed, failed, p, NOW)
        failed_text = {"text": "[fleet] vision/train failed on gke-usc1"}
        assert [g for g in hook.got if g[0] == "/all"] == [("/all", failed_text)]
    finally:
        hook.server.shutdown()


def test_a_webhook_url_without_a_scheme_is_reported_not_raised(tmp_path: Path) -> None:
    """A Secret holding `hooks.slack.com/services/...` (no https://): urllib's Request raises ValueError outside
    post()'s try, Notifier.cycle lets it out, and the loop (which catches FleetError and OSError only) stops
    after acting and before it writes its memory."""
    env = {"HOOK_VISION": "hooks.example/services/T0/B0/x", "HOOK_ALL": "http://[::1"}
    n, v, p, said, running = first_start(tmp_path, env)
    failed = snap(("vision", "train", "failed", 0))
    assert n.cycle(v, running, failed, p, NOW) == 0
    assert any("the webhook URL is not an http(s) URL" in s for s in said)      # HOOK_VISION
    assert any("the webhook URL is not a valid URL" in s for s in said)         # HOOK_ALL
    assert not any("hooks.example/services" in s for s in said)    # the URL is the credential: never said
