"""The Runtime: what the engine runs on. An App owns one and passes it to the worker, the
attempt code, @idempotent, dead letters, TTL and the other engine modules, which never see
the App itself."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

from oncefire.clock import Clock
from oncefire.documents import Database
from oncefire.model.rates import RateLimit
from oncefire.model.schedules import TickCursor
from oncefire.operations import unrouted
from oncefire.settings import Settings
from oncefire.stores import open_read_store, open_store
from oncefire.stores.base import FunctionEntry, Store
from oncefire.triggers import Trigger

BudgetCallback = Callable[[dict[str, Any]], Any]


class AlertHooks(Protocol):
    """What the engine calls of the app's alerts (`oncefire.features.alerts.Alerts`)."""

    budget_callbacks: list[BudgetCallback]
    budget_webhooks: list[str]

    def check(self, now: float) -> int:
        """Notify new dead letters and fire crossed thresholds; how many alerts fired."""
        ...

    def fire(
        self,
        key: str,
        name: str,
        body: dict[str, Any],
        hooks: Sequence[Callable[[dict[str, Any]], Any]],
        webhooks: Sequence[str],
        now: float,
    ) -> bool:
        """Fire an alert once under key (hooks called, webhooks posted); whether it fired."""
        ...


class Runtime:
    """Settings, clock, the registered functions (triggers), TTL policies, the alerts and the
    store, which is opened (and migrated) on first use."""

    def __init__(self, settings: Settings, clock: Clock, app: object = None) -> None:
        self.settings = settings
        self.clock = clock
        self.app = app  # what CURRENT_APP holds while a function runs; the engine never calls it
        self.triggers: dict[str, Trigger] = {}
        self.ttl_policies: dict[str, str] = {}  # collection path -> expiry field
        self.tick_cursors: dict[str, TickCursor] = {}  # schedule function -> where it stands
        self.tick_lock = threading.Lock()  # one look at the schedules at a time (ticks.py)
        self.alerts: AlertHooks | None = None
        self.warned: set[str] = set()  # warnings said once per process (routing.warn_stranded)
        self._store: Store | None = None
        self._read_store: Store | None = None
        self._db: Database | None = None
        self._lock = threading.RLock()

    @property
    def store(self) -> Store:
        """The store, opened (and migrated) on first use: the functions are recorded in it
        and each TTL policy's field indexed. A database that holds tables of its own and no
        oncefire schema is refused (ForeignDatabaseError): `migrate` adds the schema there."""
        if self._store is None:
            self._open(beside_tables=False)
        assert self._store is not None
        return self._store

    def _open(self, *, beside_tables: bool) -> None:
        with self._lock:
            if self._store is None:
                store = open_store(self.settings, beside_tables=beside_tables)
                store.use_clock(self.clock)
                self._store = store
                self.catalogue_functions(list(self.triggers.values()))
                for collection, field in self.ttl_policies.items():
                    self.db.collection(collection).index(field)
                kept = [n.strip() for n in self.settings.keep_unrouted.split(",") if n.strip()]
                if kept:
                    unrouted.keep(store, kept, self.clock.now())

    def migrate(self) -> int:
        """Create or upgrade the store's schema, even beside a database's own tables; its
        version."""
        if self._store is None:
            self._open(beside_tables=True)
        return self.store.migrate()

    @property
    def read_store(self) -> Store:
        """Where the dashboard, stats and history read: the read replica of
        Settings.read_store, opened on first use, else the store itself."""
        if not self.settings.read_store:
            return self.store
        if self._read_store is None:
            with self._lock:
                if self._read_store is None:
                    self._read_store = open_read_store(self.settings)
        return self._read_store

    @property
    def is_open(self) -> bool:
        """Whether the store has been opened (nothing opens it but a use of it)."""
        return self._store is not None

    @property
    def db(self) -> Database:
        """The document database over the store."""
        if self._db is None:
            with self._lock:
                if self._db is None:
                    self._db = Database(self.store, self.clock)
        return self._db

    def close(self) -> None:
        """Close the store's connections (the next use opens it again)."""
        if self._read_store is not None:
            self._read_store.close()
            self._read_store = None
        if self._store is not None:
            self._store.close()
            self._store = None
            self._db = None

    def add(self, trigger: Trigger) -> None:
        """Register a checked function: keep it, plan its first tick, record it if the store
        is open (else when it opens)."""
        with self._lock:
            if trigger.schedule is not None:
                now = self.clock.now()
                trigger.schedule.next_after(now)  # raises for a schedule that never fires
                # Looked at on the next fire_due: the ticks missed meanwhile (ticks.py).
                self.tick_cursors[trigger.name] = TickCursor(known_since=now, next_look=now)
            self.triggers[trigger.name] = trigger
            self.catalogue_functions([trigger])

    def catalogue_functions(self, triggers: Sequence[Trigger]) -> None:
        """Record these functions in the store, if it is open (HTTP functions are not stored)."""
        now = self.clock.now()
        records = [
            FunctionEntry(
                t.name,
                str(t.kind),  # the value, whatever a driver makes of an enum
                t.source,
                t.event_types,
                now,
                t.options.ordered_by,
                t.fields,
                t.attributes,
            )
            for t in triggers
            if t.kind.is_run_by_workers
        ]
        if records and self._store is not None:
            self._store.register_functions(records)
            found = [(r.name, r.kind, r.source) for r in records]
            unrouted.await_functions(self._store, found, now)

    def rate_limits(self, functions: Sequence[str]) -> dict[str, RateLimit]:
        """The rate limits of those functions that have one."""
        found = {n: self.triggers[n].options.rate for n in functions if n in self.triggers}
        return {name: rate for name, rate in found.items() if rate is not None}

    def register_all(self) -> None:
        """Record every function in the store again (after it was reopened)."""
        self.catalogue_functions(list(self.triggers.values()))


CURRENT_RUNTIME: ContextVar[Runtime | None] = ContextVar("oncefire_current_runtime", default=None)
"""The Runtime of the attempt running in this context (for @idempotent)."""
