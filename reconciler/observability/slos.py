"""The model of `policies/slos.yaml` (optional): service-level objectives per priority class, and the fleet
alerts. Pure; frozen and strict like every document (`models.py`); cross-document rules in `checks.py`.

An objective is one SLI with a target over a rolling window, as the SRE workbook frames them:
- `queue_wait: {percentile: 99, under_minutes: 30}`: 99% of the class's admissions waited under 30 minutes
  (the SLI is the share of admissions in the histogram's bucket at the threshold);
- `goodput: {above_percent: 95}`: of the accelerator-hours the class's jobs held, at most 5% were lost to
  disruptions (work redone after a failure, preemption or move since its last checkpoint).
`fleet render` turns each into recording rules and multi-window burn-rate alerts (`rules.py`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..models import Model, Name

Percent = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, lt=100)]
Minutes = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, le=43_200)]
ForMinutes = Annotated[int, Field(strict=True, ge=0, le=10_080)]


class QueueWait(Model):
    percentile: Percent = Field(description="share of admissions, in percent, that must wait less than "
                                "`under_minutes`, e.g. 99 for p99")
    under_minutes: Minutes = Field(description="the wait threshold, minutes from a job's creation to its "
                                   "admission; it becomes a bucket edge of fleet_queue_wait_seconds")


class Goodput(Model):
    above_percent: Percent = Field(description="accelerator-hours held that must count toward a job's "
                                   "completion, in percent (the rest is work lost to disruptions)")


class Objective(Model):
    name: Name = Field(description="the objective's name, unique; it labels its recording rules and alerts")
    priority_class: Name = Field(description="the priority class (policies/priorities.yaml) it is about")
    window_days: int = Field(28, strict=True, ge=1, le=90,
                             description="the rolling window the target is met over, in days (error budget)")
    queue_wait: QueueWait | None = Field(None, description="queue-wait objective (give this or `goodput`)")
    goodput: Goodput | None = Field(None, description="goodput objective (give this or `queue_wait`)")

    @property
    def target(self) -> float:
        """The SLI's target as a fraction, e.g. 0.99."""
        if self.queue_wait is not None:
            return self.queue_wait.percentile / 100
        assert self.goodput is not None
        return self.goodput.above_percent / 100


class AlertRule(Model):
    enabled: bool = Field(True, description="false: this alert is not rendered")
    for_minutes: ForMinutes = Field(description="how long the condition must hold before the alert fires")
    severity: Literal["page", "ticket"] = Field(description="page: wake someone; ticket: handle in work hours")


def _rule(for_minutes: int, severity: Literal["page", "ticket"]) -> AlertRule:
    return AlertRule(for_minutes=for_minutes, severity=severity)


class FleetAlerts(Model):
    cluster_lost: AlertRule = Field(default_factory=lambda: _rule(15, "page"),
                                    description="a cluster Fleet cannot read at all")
    pool_unhealthy: AlertRule = Field(default_factory=lambda: _rule(10, "ticket"),
                                      description="a pool with unhealthy units (NotReady, cordoned, "
                                      "accelerator unhealthy)")
    team_over_budget: AlertRule = Field(default_factory=lambda: _rule(60, "ticket"),
                                        description="a team whose running jobs cost more per month than its "
                                        "budget_monthly_usd")
    reconciler_not_cycling: AlertRule = Field(default_factory=lambda: _rule(10, "page"),
                                              description="no successful reconcile cycle for `for_minutes` "
                                              "(or Fleet's metrics are absent that long)")
    rollout_stuck: AlertRule = Field(default_factory=lambda: _rule(5, "ticket"),
                                     description="a robot rollout's wave running longer than its soak plus "
                                     "health timeout (robots offline, or waiting for a window)")


class SlosDoc(Model):
    """policies/slos.yaml: objectives per priority class, and which fleet alerts to render."""

    objectives: tuple[Objective, ...] = Field((), description="service-level objectives")
    alerts: FleetAlerts = Field(default_factory=FleetAlerts, description="fleet alerts; each is on by default")

    def wait_thresholds_s(self) -> tuple[float, ...]:
        """The queue-wait thresholds in seconds: bucket edges the histogram must have."""
        return tuple(sorted({o.queue_wait.under_minutes * 60 for o in self.objectives if o.queue_wait}))
