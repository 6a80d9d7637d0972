"""The App: registers functions, owns the store, and is what the CLI and dashboard drive."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from oncefire import idempotency
from oncefire.clock import Clock, SystemClock
from oncefire.decorators import Decorators, RowTriggers
from oncefire.documents import Database
from oncefire.engine.routing import warn_stranded
from oncefire.engine.runtime import Runtime
from oncefire.engine.worker import DrainSummary, Worker
from oncefire.errors import ConfigError
from oncefire.features import retention, ticks, ttl
from oncefire.features.alerts import Alerts, DeadLetterCallback
from oncefire.features.stats import FunctionStats
from oncefire.model.outbox import subscribers
from oncefire.model.paths import check_id
from oncefire.operations import unrouted
from oncefire.operations.actions import Operators
from oncefire.operations.deadletters import DeadLetters
from oncefire.operations.functions import Functions
from oncefire.operations.history import History
from oncefire.operations.unrouted import UnroutedReport
from oncefire.retry import is_count, is_real
from oncefire.settings import Settings
from oncefire.stores.base import Store
from oncefire.triggers import (
    Trigger,
)

if TYPE_CHECKING:
    from pathlib import Path

    from oncefire.audit import Report
    from oncefire.features.cost import CostReport

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


class App(Decorators, RowTriggers):
    """An oncefire application: functions, their triggers, and the store they share."""

    def __init__(
        self,
        store: str | None = None,
        *,
        clock: Clock | None = None,
        max_payload_bytes: int | None = None,
        settings: Settings | None = None,
        **overrides: Any,
    ) -> None:
        if settings is not None and not isinstance(settings, Settings):
            raise ConfigError(f"settings={settings!r}: pass a Settings (oncefire.Settings).")
        if clock is not None and not callable(getattr(clock, "now", None)):
            raise ConfigError(
                f"clock={clock!r} has no now(): pass a TestClock (oncefire.testing) or a clock "
                "whose now() returns epoch seconds."
            )
        given = {"store": store, "max_payload_bytes": max_payload_bytes, **overrides}
        given = {k: v for k, v in given.items() if v is not None}
        given_settings = replace(settings, **given) if settings else Settings.from_env(**given)
        # What the engine runs on; the engine's modules take it, never this App.
        self.runtime = Runtime(given_settings, clock or SystemClock(), app=self)
        self.routes: dict[str, Trigger] = {}
        self.body_limits: dict[str, int] = {}  # HTTP path -> most bytes of a request body
        self.subpath_routes: set[str] = set()  # HTTP paths whose function serves below them
        self.dead_letters = DeadLetters(self.runtime)
        self.history = History(self.runtime)
        self.functions = Functions(self.runtime)
        self.operators = Operators(self.runtime, self.dead_letters, self.functions)
        self.alerts = Alerts(self.runtime, self.dead_letters, self.history)
        self.runtime.alerts = (
            self.alerts
        )  # the workers check them; the budget guard fires budget ones
        self._lock = threading.RLock()

    # -- runtime -----------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """The settings (arguments over ONCEFIRE_* variables over defaults)."""
        return self.runtime.settings

    @property
    def clock(self) -> Clock:
        """The clock every time-based rule reads (a TestClock in tests)."""
        return self.runtime.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.runtime.clock = clock

    @property
    def triggers(self) -> dict[str, Trigger]:
        """The registered functions, by name."""
        return self.runtime.triggers

    @property
    def store(self) -> Store:
        """The store, opened (and migrated) on first use."""
        return self.runtime.store

    @property
    def db(self) -> Database:
        """The document database (`app.db.collection(...)`)."""
        return self.runtime.db

    def close(self) -> None:
        """Close the store's connections."""
        self.runtime.close()

    def migrate(self) -> int:
        """Create or upgrade the store's schema and return its version (what `oncefire
        migrate` runs). The one way to add oncefire's tables to a database that holds tables
        of its own: opening a store there is refused with ForeignDatabaseError."""
        return self.runtime.migrate()

    def _add(self, trigger: Trigger) -> None:
        with self._lock:
            if trigger.name in self.triggers:
                raise ConfigError(
                    f"A function named {trigger.name!r} is already registered: pass name=... "
                    "to give one of them another name."
                )
            check_id(trigger.name, "function name")
            idempotency.check_registration(trigger.name, trigger.fn, trigger.options)
            retention.check_registration(self.settings, trigger.name, trigger.options)
            self.runtime.add(trigger)
            with suppress(AttributeError, TypeError):  # lets @idempotent spot a wrong order
                trigger.fn.__oncefire_trigger__ = trigger.name  # type: ignore[attr-defined]

    # -- events ------------------------------------------------------------------------

    def publish(self, topic: str, data: Any, *, attributes: dict[str, str] | None = None) -> str:
        """Publish a message on a topic; return its id (the event id).

        Inside `app.db.transaction()` on this thread the message joins that transaction: it
        is delivered only if the transaction commits.
        """
        active = self.db.active_transaction()
        if active is not None:
            return active.publish(topic, data, attributes)
        with self.db.transaction() as tx:
            return tx.publish(topic, data, attributes)

    def subscribers(self, event_type: str, source: str) -> list[str]:
        """Names of the stored functions an event of this type and source would start."""
        with self.store.read() as tx:
            return subscribers(tx.functions(), event_type, source)

    def fire_due_schedules(self) -> int:
        """Emit the tick of each schedule that is due (once across all workers); how many."""
        return ticks.fire_due(self.runtime)

    def ttl(self, collection: str, *, field: str) -> None:
        """Delete documents of a collection once the time in `field` has passed."""
        ttl.add_policy(self.runtime, collection, field)

    # -- running -----------------------------------------------------------------------

    def drain(self, *, functions: Sequence[str] | None = None) -> DrainSummary:
        """Run every delivery due now, in this process, until none is due (of the functions
        named, or of all the app's event functions), warning once of functions this app does
        not define whose deliveries wait."""
        if functions is not None:
            self._check_names(functions)
        warn_stranded(self.runtime)
        worker = Worker(self.runtime, functions=functions)
        try:
            return worker.drain()
        finally:
            worker.shutdown()

    def run_worker(self, *, concurrency: int | None = None, is_process: bool = False) -> None:
        """Serve deliveries in this process until SIGTERM or SIGINT."""
        if concurrency is not None and (not is_count(concurrency) or concurrency < 1):
            raise ConfigError(f"concurrency={concurrency!r}: run at least 1 attempt at once.")
        worker = Worker(self.runtime, concurrency=concurrency, is_process=is_process)

        def stop(signum: int, _frame: Any) -> None:
            log.info("signal %d: stopping after in-flight attempts", signum)
            worker.stop_requested.set()

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
        worker.run()

    def _check_names(self, functions: Sequence[str]) -> None:
        """Refuse what is not a list of the app's event functions, by name."""
        names = [n for n, t in self.triggers.items() if t.kind.is_run_by_workers]
        if isinstance(functions, str) or not isinstance(functions, Sequence) or not functions:
            raise ConfigError(
                f"functions={functions!r}: give a list of function names, such as "
                f"{names[:1]!r}, or None for all."
            )
        for name in functions:
            if name not in names:
                raise ConfigError(
                    f"No event function named {name!r} is registered on this app; its event "
                    f"functions are: {', '.join(names) or 'none'}."
                )

    def stats(self, window: float = 86400) -> dict[str, FunctionStats]:
        """Per-function figures over the last `window` seconds."""
        if not is_real(window) or window <= 0:
            raise ConfigError(f"window={window!r}: stats cover a positive number of seconds.")
        counts = self.runtime.read_store.counts(self.clock.now() - window)
        return {name: FunctionStats.from_counts(name, c) for name, c in sorted(counts.items())}

    def purge(self, *, dry_run: bool = False) -> retention.PurgeCounts:
        """Purge the history retention lets go now, or with dry_run count it (by table)."""
        return retention.purge(self.runtime, dry_run=dry_run)

    def unrouted_count(self) -> int:
        """How many events no function has taken yet (kept for `unrouted_retention`), from
        any source; the warnings count only those of `unrouted_report().awaited`."""
        return self.store.count_unrouted()

    def unrouted_report(self) -> UnroutedReport:
        """The unrouted events kept, and those the warnings count: of a collection, topic or
        table some function took, or that keep_unrouted names (operations/unrouted.py)."""
        return unrouted.report(self.store)

    def keep_unrouted(self, *sources: str) -> None:
        """Warn about the unrouted events of these sources as about those of a source some
        function used to take: a name is a topic, a collection and a table; a path like
        'users/{u}/orders' a collection (recorded in the store)."""
        unrouted.keep(self.store, sources, self.clock.now())

    def ignore_unrouted(self, *sources: str) -> int:
        """Warn no more about the unrouted events of these sources (named as keep_unrouted
        takes them), still kept for a function registered later; how many were awaited."""
        return unrouted.ignore(self.store, sources)

    def audit(self, *, since: float = 86400, **options: Any) -> Report:
        """Static rules over this app's functions and runtime rules over `since` seconds of
        its store's history (see docs/audit.md)."""
        from oncefire.audit import audit

        return audit(self.runtime, since=since, **options)

    def cost(self, *, since: float = 7 * 86400, prices: str | Path | None = None) -> CostReport:
        """Each function's invocations, failed attempts, store reads and writes, CPU seconds
        and money over `since` seconds, priced by the TOML file `prices` (see docs/audit.md)."""
        from oncefire.features.cost import estimate
        from oncefire.features.prices import PriceTable

        return estimate(self.runtime, since=since, prices=PriceTable.load(prices))

    def on_dead_letter(self, callback: DeadLetterCallback) -> DeadLetterCallback:
        """Call callback(dead_letter) once per new dead letter, from the workers."""
        return self.alerts.on_dead_letter(callback)
