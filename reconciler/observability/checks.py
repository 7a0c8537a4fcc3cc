"""Cross-document rules of `policies/slos.yaml`, each a located problem with a hint. Pure.

- every objective names a priority class of policies/priorities.yaml;
- objective names are unique (they label the recording rules and alerts);
- an objective has exactly one SLI: `queue_wait` or `goodput`;
- `reconciler_not_cycling` waits at least a minute (0 would fire between any two cycles).
"""

from __future__ import annotations

from ..load import SLOS
from ..reporter import Reporter


def check_slos(r: Reporter) -> None:
    doc = r.loaded.slos
    if doc is None:
        return
    stale = doc.alerts.reconciler_not_cycling
    if stale.enabled and stale.for_minutes < 1:
        r.add(SLOS, ("alerts", "reconciler_not_cycling", "for_minutes"),
              "`reconciler_not_cycling` must allow at least 1 minute without a successful cycle",
              "set for_minutes above the loop's interval, e.g. 10, or `enabled: false`")
    classes = {c.name for c in r.loaded.priorities.classes} if r.loaded.priorities else None
    first: dict[str, int] = {}
    for i, o in enumerate(doc.objectives):
        if o.name in first:
            r.add(SLOS, ("objectives", i, "name"),
                  f"objective `{o.name}` is defined twice (also objectives[{first[o.name]}])",
                  "rename one: the name labels its recording rules and alerts")
        first.setdefault(o.name, i)
        if classes is not None and o.priority_class not in classes:
            r.add(SLOS, ("objectives", i, "priority_class"), f"priority class `{o.priority_class}` does not exist",
                  "use one of: " + ", ".join(sorted(classes)))
        if (o.queue_wait is None) == (o.goodput is None):
            both = o.queue_wait is not None
            r.add(SLOS, ("objectives", i, "goodput" if both else "name"),
                  f"objective `{o.name}` has " + ("both `queue_wait` and `goodput`" if both else "no objective"),
                  "give exactly one: `queue_wait: {percentile: 99, under_minutes: 30}` or "
                  "`goodput: {above_percent: 95}` (write two objectives for both)", key=both)
