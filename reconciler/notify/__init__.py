"""Notifications: job events routed per team to Slack-compatible webhooks (`policies/notifications.yaml`).

- `model`: the document (frozen, strict) and its cross-document rules.                         pure
- `events`: which events happened, from the previous and the current snapshot and plan.           pure
- `send`: the webhook POSTs and the memory of what was sent (across cycles and restarts).         EFFECT
"""
