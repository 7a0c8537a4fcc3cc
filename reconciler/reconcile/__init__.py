"""`fleet reconcile`: the live loop (DESIGN 3, 5 step 11).

- `decide`: the plan compared with what runs -> actions, and the loop's memory.          pure
- `act`: the `Actuator` protocol and `execute`, the order actions run in.                 pure
- `kube_act`: the actuator of real clusters (server-side apply, delete, Events, Pulumi).   EFFECT
- `lease`: one writer at a time (a coordination.k8s.io/v1 Lease).                         EFFECT
- `loop`: observe -> load the repository -> plan -> decide -> act -> record, every cycle.  EFFECT
- `model` (the values), `manifests` (one job's objects), `deploy` (the Deployment's manifests): pure;
  `kubeio` (one API request), `command` (the click commands): effects.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """`CLI`: the `fleet reconcile` and `fleet reconcile-manifests` commands cli.py's group carries, imported only
    when asked for (importing this package for `decide`, as `fleet simulate` does, loads no click)."""
    if name == "CLI":
        from .command import reconcile_cmd, reconcile_manifests_cmd

        return [reconcile_cmd, reconcile_manifests_cmd]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
