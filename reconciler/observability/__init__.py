"""Observability: Fleet's own Prometheus metrics, the SLO document, and the monitoring files render writes.

- `names`: metric names and the queue-wait bucket edges, shared by the metrics, the rules and the dashboard;
- `metrics`: `FleetMetrics`, the registry the reconcile loop updates and serves;
- `slos` / `checks`: the model of `policies/slos.yaml` and its cross-document rules;
- `rules` / `dashboard`: `monitoring/prometheus-rules.yaml` and `monitoring/grafana-dashboard.json`.
Nothing is imported here, so the pure modules stay importable without the effectful one.
"""
