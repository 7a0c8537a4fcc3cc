"""The clock, read at the edges only (the CLI commands and the reconcile loop). EFFECT (reads the time and
the environment).

`FLEET_NOW` (RFC 3339) pins it, for reproducible snapshots, reports and tests."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from .problems import UsageError


def now() -> datetime:
    """`FLEET_NOW` if set, else the current UTC time to the second."""
    pinned = os.environ.get("FLEET_NOW")
    if pinned:
        try:
            return datetime.fromisoformat(pinned)
        except ValueError:
            raise UsageError(f"FLEET_NOW={pinned} is not an RFC 3339 time",
                             "e.g. FLEET_NOW=2026-11-23T04:00:00Z") from None
    return datetime.now(UTC).replace(microsecond=0)
