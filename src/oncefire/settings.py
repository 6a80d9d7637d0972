"""Runtime settings: one frozen dataclass; argument > ONCEFIRE_* environment variable > default."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any

from oncefire.errors import ConfigError
from oncefire.retry import is_count, is_real

DEFAULT_STORE = "sqlite:///oncefire.db"
# The URLs of an in-memory SQLite store, whose data ends with its process.
MEMORY_URLS = ("sqlite://:memory:", "sqlite:///:memory:", "sqlite://")
MAX_BATCH_SIZE = 10_000  # a lease's ids go into one statement; SQLite takes 32,766 parameters


@dataclass(frozen=True, slots=True)
class Settings:
    """How the runtime behaves; every duration is in seconds."""

    store: str = DEFAULT_STORE
    """Store URL: sqlite:///path, sqlite://:memory: or postgresql://..."""
    lease: float = 30.0
    """How long a leased delivery belongs to its worker without a renewal."""
    renew_every: float = 10.0
    """How often a worker renews the leases it holds."""
    sweep_every: float = 5.0
    """How often a worker looks for deliveries whose lease ran out."""
    poll_interval: float = 0.1
    """Longest an idle worker waits before looking for due deliveries again."""
    shutdown_grace: float = 30.0
    """How long SIGTERM waits for in-flight attempts before handing them back."""
    concurrency: int = 8
    """Attempts one worker process runs at once."""
    batch_size: int = 512
    """Most deliveries a worker leases at once (it leases about 50 ms of work at a time)."""
    max_payload_bytes: int = 512 * 1024
    """Events larger than this get one attempt; a failure makes them a dead letter at once
    (full payload kept for replay, shown truncated)."""
    read_store: str = ""
    """PostgreSQL: the URL of a read replica (a streaming standby) for the dashboard's, stats'
    and history's reads, so they take no load from the primary; empty: they read the store.
    What acts (a replay, a dismiss, a pause) reads and writes the store itself."""
    store_retry_window: float = 10.0
    """PostgreSQL: how long a store call waits for a server that takes writes (a restart, a
    failover to a standby, every connection busy) before it fails with StoreUnavailableError."""
    sqlite_synchronous: str = "FULL"
    """FULL (a commit survives power loss) or NORMAL (faster; may lose the last commits)."""
    max_event_depth: int = 16
    """An event written by a chain of this many function writes is a dead letter, not run
    (a function that writes what triggers it is stopped; 16, as AWS Lambda's)."""
    # Retention (docs/retention.md): what is kept how long. Dead letters, pending and running
    # deliveries and their events are never purged.
    succeeded_retention: float = 7 * 86400.0
    """How long succeeded (and forwarded) deliveries, their attempts and then their events are
    kept after they finished. Dead letters are never purged (docs/retention.md)."""
    unrouted_retention: float = 7 * 86400.0
    """How long an event no function takes is kept for a function registered later."""
    keep_unrouted: str = ""
    """Topics, collections or tables, comma-separated, whose unrouted events are warned about
    even if no function ever took them (as `app.keep_unrouted` names them)."""
    statistics_retention: float = 90 * 86400.0
    """How long the hour buckets of statistics (stats, dashboard, cost) are kept."""
    purge_batch: int = 100
    """Most rows one retention batch deletes: one short write transaction each."""
    project_id: str = ""
    """The Firebase project id a ported module sees (`params.PROJECT_ID`, `.env.<project>`)."""
    auth_verifier: str = ""
    """`module:function` or `path/file.py:function` checking callable functions' tokens, for
    a ported module that does not call `oncefire.firebase.set_auth_verifier` itself."""
    storage_dir: str = ""
    """The folder of oncefire.firebase's storage buckets' objects. Empty: `<file>-storage`
    beside a SQLite store's file, `oncefire-storage` in the working folder for PostgreSQL
    (set a folder every worker shares when they run on several machines)."""

    def __post_init__(self) -> None:
        self._check_types()
        check_store_url(self.store)
        if self.read_store:
            check_read_store(self.store, self.read_store)
        for name in (
            "lease",
            "renew_every",
            "sweep_every",
            "poll_interval",
            "store_retry_window",
            "unrouted_retention",
            "succeeded_retention",
            "statistics_retention",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"Setting {name} must be a positive number of seconds.")
        if self.renew_every >= self.lease:
            raise ConfigError("Setting renew_every must be shorter than lease.")
        if self.purge_batch < 1:
            raise ConfigError("Setting purge_batch must be at least 1.")
        if self.concurrency < 1 or self.batch_size < 1:
            raise ConfigError("Settings concurrency and batch_size must be at least 1.")
        if self.max_event_depth < 1:
            raise ConfigError("Setting max_event_depth must be at least 1.")
        if self.batch_size > MAX_BATCH_SIZE:
            raise ConfigError(f"Setting batch_size must be at most {MAX_BATCH_SIZE}.")
        if self.sqlite_synchronous.upper() not in ("FULL", "NORMAL"):
            raise ConfigError("Setting sqlite_synchronous must be FULL or NORMAL.")
        if self.max_payload_bytes < 1:
            raise ConfigError(
                f"Setting max_payload_bytes={self.max_payload_bytes} must be a whole number of "
                "bytes, at least 1."
            )

    def _check_types(self) -> None:
        """Each setting of the type its default has (a float setting takes an int too)."""
        for field in fields(self):
            value, default = getattr(self, field.name), field.default
            if isinstance(default, bool):
                is_right, kind = isinstance(value, bool), "True or False"
            elif isinstance(default, int):
                is_right, kind = is_count(value), "a whole number"
            elif isinstance(default, float):
                is_right, kind = is_real(value), "a finite number"
            elif isinstance(default, str):
                is_right, kind = isinstance(value, str), "a string"
            else:
                continue
            if not is_right:
                raise ConfigError(f"Setting {field.name}={value!r} must be {kind}.")

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        """Defaults, then ONCEFIRE_<NAME> variables, then the given overrides (None is ignored)."""
        values: dict[str, Any] = {}
        for field in fields(cls):
            raw = os.environ.get(f"ONCEFIRE_{field.name.upper()}")
            if raw is None:
                continue
            kind = type(getattr(cls(), field.name))
            try:
                values[field.name] = kind(raw)
            except ValueError as exc:
                raise ConfigError(
                    f"ONCEFIRE_{field.name.upper()}={raw!r} is not a valid {kind.__name__}."
                ) from exc
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ConfigError(f"Unknown setting(s): {', '.join(sorted(unknown))}.")
        return replace(cls(), **values)


def check_read_store(store: str, read_store: str) -> None:
    """Refuse a read replica that is not a PostgreSQL URL beside a PostgreSQL store."""
    schemes = ("postgresql:", "postgres:")
    if not (store.startswith(schemes) and read_store.startswith(schemes)):
        raise ConfigError(
            f"Setting read_store={read_store!r} names a read replica of a PostgreSQL store "
            "(postgresql://standby/db): SQLite stores have none; leave it empty."
        )


def check_store_url(url: str) -> None:
    """Refuse a store URL no store takes, when the App is made rather than on first use."""
    if url.startswith("sqlite:"):
        if url in MEMORY_URLS:
            return
        if not url.startswith("sqlite:///") or url == "sqlite:///":
            raise ConfigError(
                f"Bad SQLite store URL {url!r}: use sqlite:///relative/path.db, "
                "sqlite:////absolute/path.db or sqlite://:memory:."
            )
        if "?" in url:
            query = url[url.index("?") :]
            raise ConfigError(
                f"The SQLite store URL {url!r} has query parameters ({query!r}), which oncefire "
                "does not take: give the file's path alone; oncefire opens it read-write."
            )
        return
    if url.startswith(("postgresql:", "postgres:")):
        return
    raise ConfigError(
        f"Unknown store URL {url!r}: use sqlite:///path.db, sqlite://:memory: or "
        "postgresql://user@host/db."
    )
