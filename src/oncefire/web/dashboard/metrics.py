"""Prometheus metrics read from the store at scrape time: every figure is the shared store's,
whichever process answers the scrape (the dashboard, or a worker's own exporter).

Counters (`_total`) and the duration histogram read the store's totals, which only grow:
retention purges history, never them. Gauges are only for what is true now.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from oncefire.app import App
from oncefire.errors import ConfigError
from oncefire.model.totals import FunctionTotals
from oncefire.operations.history import OUTCOMES
from oncefire.web.dashboard.views import known

log = logging.getLogger(__name__)

# Counters of one value a function: name, help, the FunctionTotals attribute they read.
COUNTERS = (
    ("oncefire_rescues", "Attempts counted crashed: their worker died while they ran.",
     "rescues"),
    ("oncefire_dedupe_hits", "Duplicates skipped by the idempotency helpers.", "dedupe_hits"),
    ("oncefire_deliveries_dead_lettered", "Deliveries that became dead letters.",
     "dead_letters"),
    ("oncefire_deliveries_rate_limited",
     "Deliveries that started later than they were due, waiting for the rate limit.",
     "rate_limited"),
    ("oncefire_deliveries_loop_stopped",
     "Deliveries made dead letters at once: their event stopped a recursive loop.",
     "loops_stopped"),
)  # fmt: skip


class StoreCollector(Collector):
    """Counters of attempts, dead letters, rescues, dedupe hits, rate-limited and loop-stopped
    deliveries; the duration histogram; gauges of deliveries, backlog and unrouted events."""

    def __init__(self, app: App) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        """Read the store at each scrape."""
        names = known(self.app)
        totals = self.app.history.totals(names)
        yield from _counters(totals)
        yield _durations(totals)
        yield from self._gauges(list(names))

    def _gauges(self, names: list[str]) -> Iterator[Metric]:
        deliveries = GaugeMetricFamily(
            "oncefire_deliveries", "Deliveries by function and state now.",
            labels=["function", "state"],
        )  # fmt: skip
        for function, state, n in self.app.runtime.read_store.reads.states_by_function():
            deliveries.add_metric([function, state], n)
        yield deliveries
        dead = GaugeMetricFamily("oncefire_dead_letters", "Dead letters now.", labels=["function"])
        for name in names:
            dead.add_metric([name], self.app.dead_letters.count(name))
        yield dead
        backlog = GaugeMetricFamily(
            "oncefire_backlog", "Pending deliveries now.", labels=["function"]
        )
        age = GaugeMetricFamily(
            "oncefire_oldest_pending_age_seconds",
            "How long the oldest due pending delivery has waited, now.",
            labels=["function"],
        )
        waiting = self.app.history.backlog()
        for name in sorted({*names, *waiting}):
            b = waiting.get(name)
            backlog.add_metric([name], b.pending if b else 0)
            age.add_metric([name], (b.oldest_age if b else None) or 0.0)
        yield backlog
        yield age
        yield GaugeMetricFamily(
            "oncefire_unrouted_events",
            "Events no function has taken yet of a source a function used to take or "
            "keep_unrouted names (app.unrouted_report().awaited).",
            value=self.app.unrouted_report().awaited,
        )


def _counters(totals: dict[str, FunctionTotals]) -> Iterator[Metric]:
    attempts = CounterMetricFamily(
        "oncefire_attempts", "Attempts that ended, by function and outcome.",
        labels=["function", "outcome"],
    )  # fmt: skip
    for name, t in totals.items():
        for outcome in sorted({*OUTCOMES, *t.attempts}):
            attempts.add_metric([name, outcome], t.attempts.get(outcome, 0))
    yield attempts
    for metric, text, attribute in COUNTERS:
        counter = CounterMetricFamily(metric, text, labels=["function"])
        for name, t in totals.items():
            counter.add_metric([name], getattr(t, attribute))
        yield counter


def _durations(totals: dict[str, FunctionTotals]) -> HistogramMetricFamily:
    durations = HistogramMetricFamily(
        "oncefire_attempt_duration_seconds", "Durations of the attempts that ended.",
        labels=["function"],
    )  # fmt: skip
    for name, t in totals.items():
        buckets = [(_bound(bound), count) for bound, count in t.cumulative()]
        durations.add_metric([name], buckets, t.duration_sum)
    return durations


def _bound(seconds: float) -> str:
    return "+Inf" if seconds == float("inf") else repr(seconds)


def _registry(app: App) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(app))
    return registry


def exposition(app: App) -> bytes:
    """The metrics of an app in Prometheus's text format."""
    return generate_latest(_registry(app))


@contextmanager
def serving_metrics(app: App, host: str, port: int) -> Iterator[int]:
    """GET /metrics of app on host:port (a worker's own scrape target: `oncefire worker
    --metrics-port`) while the block runs; yields the port (port 0: a free one)."""
    try:
        server, thread = start_http_server(port, addr=host, registry=_registry(app))
    except OSError as exc:
        raise ConfigError(f"Cannot serve metrics on {host}:{port}: {exc.strerror or exc}.") from exc
    log.info("metrics on http://%s:%d/metrics", host, server.server_port)
    try:
        yield int(server.server_port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
