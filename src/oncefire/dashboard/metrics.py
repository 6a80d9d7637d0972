"""Prometheus metrics read from the store at scrape time: every figure is the shared store's,
whichever process answers the scrape (the dashboard, or a worker's own exporter)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from oncefire.app import App
from oncefire.buckets import hour_of
from oncefire.dashboard.views import known
from oncefire.errors import ConfigError
from oncefire.stores import dashboard_queries as q

log = logging.getLogger(__name__)

BUCKETS = (("0.01", "le_0_01"), ("0.05", "le_0_05"), ("0.1", "le_0_1"), ("0.5", "le_0_5"),
           ("1.0", "le_1"), ("5.0", "le_5"), ("30.0", "le_30"), ("60.0", "le_60"),
           ("300.0", "le_300"))  # fmt: skip


class StoreCollector(Collector):
    """Deliveries, attempts, dead letters, backlog, durations, dedupe hits and unrouted events
    of an app."""

    def __init__(self, app: App, window: float = 3600.0) -> None:
        self.app = app
        self.window = window

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        """Read the store once per scrape."""
        store, now = self.app.store, self.app.clock.now()
        since = now - self.window
        span = f"{self.window:g}"
        deliveries = GaugeMetricFamily(
            "oncefire_deliveries", "Deliveries by function and state.", labels=["function", "state"]
        )
        for r in q.rows(store, "states_by_function"):
            deliveries.add_metric([r["function"], r["state"]], int(r["n"]))
        yield deliveries
        dead = GaugeMetricFamily("oncefire_dead_letters", "Dead letters.", labels=["function"])
        for name in known(self.app):
            dead.add_metric([name], self.app.dead_letters.count(name))
        yield dead
        attempts = GaugeMetricFamily(
            "oncefire_attempts",
            "Attempts that ended in the last `window` seconds, by function and outcome.",
            labels=["function", "outcome", "window"],
        )
        rescues = GaugeMetricFamily(
            "oncefire_rescues",
            "Attempts counted as crashed (their worker died) in the last `window` seconds.",
            labels=["function", "window"],
        )
        for r in q.rows(store, "bucket_outcomes_since", since_hour=hour_of(since)):
            attempts.add_metric([r["function"], r["outcome"], span], int(r["n"]))
            if r["outcome"] == "crashed":
                rescues.add_metric([r["function"], span], int(r["n"]))
        yield attempts
        yield rescues
        backlog = GaugeMetricFamily("oncefire_backlog", "Pending deliveries.", labels=["function"])
        age = GaugeMetricFamily(
            "oncefire_oldest_pending_age_seconds",
            "How long the oldest due pending delivery has waited.",
            labels=["function"],
        )
        for name, b in self.app.history.backlog().items():
            backlog.add_metric([name], b.pending)
            age.add_metric([name], b.oldest_age or 0.0)
        yield backlog
        yield age
        durations = HistogramMetricFamily(
            "oncefire_attempt_duration_seconds",
            "Durations of the attempts that ended in the last `window` seconds.",
            labels=["function", "window"],
        )
        for r in q.rows(store, "durations_since", since_hour=hour_of(since)):
            buckets = [(bound, int(r[column] or 0)) for bound, column in BUCKETS]
            buckets.append(("+Inf", int(r["n"])))
            durations.add_metric([r["function"], span], buckets, float(r["total"] or 0.0))
        yield durations
        dedupe = GaugeMetricFamily(
            "oncefire_dedupe_hits",
            "Duplicates skipped by the idempotency helpers in the last `window` seconds.",
            labels=["function", "window"],
        )
        for r in q.rows(store, "dedupe_since", since_hour=hour_of(since)):
            dedupe.add_metric([r["function"], span], int(r["n"]))
        yield dedupe
        yield GaugeMetricFamily(
            "oncefire_unrouted_events",
            "Events no function has taken yet of a source a function used to take or "
            "keep_unrouted names (app.unrouted_report().awaited).",
            value=self.app.unrouted_report().awaited,
        )


def _registry(app: App, window: float) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(app, window))
    return registry


def exposition(app: App, window: float = 3600.0) -> bytes:
    """The metrics of an app in Prometheus's text format."""
    return generate_latest(_registry(app, window))


@contextmanager
def serving_metrics(app: App, host: str, port: int, window: float = 3600.0) -> Iterator[int]:
    """GET /metrics of app on host:port (a worker's own scrape target: `oncefire worker
    --metrics-port`) while the block runs; yields the port (port 0: a free one)."""
    try:
        server, thread = start_http_server(port, addr=host, registry=_registry(app, window))
    except OSError as exc:
        raise ConfigError(f"Cannot serve metrics on {host}:{port}: {exc.strerror or exc}.") from exc
    log.info("metrics on http://%s:%d/metrics", host, server.server_port)
    try:
        yield int(server.server_port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
