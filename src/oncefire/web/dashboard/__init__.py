"""The dashboard: functions, dead letters, events and the audit trail, with a JSON API,
Prometheus metrics, and the guards that make its actions safe."""

from oncefire.web.dashboard.server import create_app, serve

__all__ = ["create_app", "serve"]
