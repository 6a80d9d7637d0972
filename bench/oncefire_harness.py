"""oncefire under test: fresh stores, worker processes, document writes and the backlog count."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import workload
from benchlib import (
    BENCH,
    DB_SUFFIX,
    ONCEFIRE_PG_DB,
    PG_ADMIN_URL,
    SRC,
    WORK,
    ensure_database,
    pg_url,
    running,
)

from oncefire import App

WORKER_PROCESSES = 2
DOC = {"amount": 500, "item": "coffee beans", "note": "x" * 48}  # ~90 bytes of JSON
PREFILL_BATCH = 2000
# One sitting of bench/run_all: what is built once a sitting (the backlog templates) is
# rebuilt in the next one, which may measure other code.
SITTING = os.environ.get("BENCH_SITTING") or f"{os.getpid()}-{time.time_ns()}"


@dataclass(frozen=True, slots=True)
class Target:
    """A store oncefire is measured on."""

    kind: str  # "sqlite" or "postgres"
    url: str
    path: Path | None = None  # the SQLite file

    @property
    def label(self) -> str:
        return "SQLite" if self.kind == "sqlite" else "PostgreSQL"


def target(kind: str, tag: str = "main") -> Target:
    """The benchmark store of a kind: a file under bench/.work or the oncefire_bench database."""
    if kind == "sqlite":
        WORK.mkdir(parents=True, exist_ok=True)
        path = WORK / f"oncefire-{tag}.db"
        return Target("sqlite", f"sqlite:///{path}", path)
    if kind == "postgres":
        return Target(
            "postgres", pg_url(ONCEFIRE_PG_DB if tag == "main" else f"{tag}_bench{DB_SUFFIX}")
        )
    raise SystemExit(f"unknown store kind {kind!r}: use sqlite or postgres")


def postgres_unavailable() -> str | None:
    """Why oncefire cannot be measured on PostgreSQL here, or None when it can."""
    try:
        ensure_database(ONCEFIRE_PG_DB)
    except Exception as exc:
        return f"no PostgreSQL server ({str(exc).strip().splitlines()[0]})"
    probe = target("postgres")
    try:
        reset(probe)
        app = workload.build(probe.url, "noop")
        app.db.collection("bench").document("probe").set(DOC)
        summary = app.drain()
        app.close()
        if summary.attempts != 1:
            return f"the PostgreSQL store ran {summary.attempts} attempts for one write"
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"PostgreSQL store unavailable ({type(exc).__name__}: {first})"
    return None


def reset(t: Target) -> None:
    """Make the store empty: a new SQLite file, or a new schema in the benchmark database."""
    if t.kind == "sqlite":
        assert t.path is not None
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{t.path}{suffix}").unlink(missing_ok=True)
        return
    import psycopg

    ensure_database(t.url.rsplit("/", 1)[1])
    with psycopg.connect(t.url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")


class Backlog:
    """Counts the deliveries not yet settled (pending or running), on its own connection.

    Each state is counted on its own, from the store's partial indexes on pending and on
    running deliveries. That count still reads the row of every entry (an index entry does
    not say whether its row is settled), so each poll costs more as the backlog's rows spread
    over a large history. A drain polls `ended_counter()` instead, whose cost does not grow
    with the history or the backlog. (The benchmark stores run one function, so no filter on
    it is needed.)"""

    SQL = (
        "SELECT (SELECT count(*) FROM oncefire_deliveries WHERE state = 'pending')"
        " + (SELECT count(*) FROM oncefire_deliveries WHERE state = 'running')"
    )
    EXISTS = (
        "SELECT EXISTS (SELECT 1 FROM oncefire_deliveries WHERE state = 'pending')"
        " OR EXISTS (SELECT 1 FROM oncefire_deliveries WHERE state = 'running')"
    )

    def __init__(self, t: Target, function: str) -> None:
        self.target = t
        self.function = function
        self.queries = 0  # each one a transaction of its own (autocommit)
        self._conn: Any
        if t.kind == "sqlite":
            self._conn = sqlite3.connect(str(t.path), timeout=30)
        else:
            import psycopg

            self._conn = psycopg.connect(t.url, autocommit=True)

    def __call__(self) -> int:
        self.queries += 1
        return int(self._conn.execute(self.SQL).fetchone()[0])

    ENDED = (
        "SELECT (SELECT coalesce(sum(count), 0) FROM oncefire_buckets"
        " WHERE outcome = 'succeeded' AND hour >= ?)"
        " + (SELECT coalesce(sum(count), 0) FROM oncefire_dead_counts)"
    )

    # A store from before the hour buckets (schema 9), as an A/B against an old tree measures:
    # its succeeded attempts, counted (their cost grows with the drain).
    RAN = "SELECT count(*) FROM oncefire_attempts WHERE outcome = 'succeeded'"

    def _has_buckets(self) -> bool:
        catalog = (
            "sqlite_master WHERE name"
            if self.target.kind == "sqlite"
            else "pg_tables WHERE tablename"
        )
        return bool(self.count(f"SELECT count(*) FROM {catalog} = 'oncefire_buckets'"))

    def ended_counter(self) -> Callable[[], int]:
        """What is left of the backlog as it stands now: the count of its unsettled
        deliveries, less the deliveries settled since, polled from the counters the store keeps
        in the transactions that settle them (succeeded attempts in the hour buckets, dead
        letters in their counter): a few small rows a poll, however large the history or the
        backlog. Exact for a backlog that nothing adds to while it drains."""
        since_hour = float(int(time.time() // 3600) * 3600 - 3600)  # the store's clock may lag
        left = self()
        query, args = (self.ENDED, (since_hour,)) if self._has_buckets() else (self.RAN, ())
        ended = int(self.count(query, args))

        def remaining() -> int:
            return left - (int(self.count(query, args)) - ended)

        return remaining

    def has_work(self) -> bool:
        """Whether any delivery is still pending or running: the first entry of a partial
        index (sequential scans off, which would read the settled rows first)."""
        self.queries += 1
        if self.target.kind == "sqlite":
            return bool(self._conn.execute(self.EXISTS).fetchone()[0])
        with self._conn.transaction():
            self._conn.execute("SET LOCAL enable_seqscan = off")
            return bool(self._conn.execute(self.EXISTS).fetchone()[0])

    def count(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        """One value from a query of the store (for checks after a run)."""
        if self.target.kind == "postgres":
            sql = sql.replace("?", "%s")
        self.queries += 1
        return self._conn.execute(sql, args).fetchone()[0]

    def close(self) -> None:
        self._conn.close()


def worker_env(function: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of worker processes: this checkout's code, and the function to run."""
    paths = [str(SRC), str(BENCH), os.environ.get("PYTHONPATH", "")]
    return {
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "BENCH_FUNCTION": function,
        **(extra or {}),
    }


# The `oncefire` command run by this interpreter, on the oncefire its PYTHONPATH names.
ONCEFIRE = [
    sys.executable,
    "-c",
    "import sys; from oncefire.cli import main; sys.argv[0] = 'oncefire'; main()",
]


def worker_command(t: Target, processes: int = WORKER_PROCESSES) -> list[str]:
    """`oncefire worker bench/workload.py --store URL --processes N --force`, with this
    interpreter (--force: the per-event set-up runs more processes than 4 a CPU on purpose)."""
    return [
        *ONCEFIRE,
        "worker",
        str(BENCH / "workload.py"),
        "--store",
        t.url,
        "--processes",
        str(processes),
        "--force",
    ]


@contextmanager
def workers(
    t: Target,
    function: str,
    *,
    extra_env: dict[str, str] | None = None,
    processes: int = WORKER_PROCESSES,
    first_path: str = "",
) -> Iterator[Any]:
    """oncefire worker processes serving the benchmark function, stopped (SIGTERM) on exit
    (`first_path` goes first on their PYTHONPATH)."""
    WORK.mkdir(parents=True, exist_ok=True)
    log_path = WORK / f"workers-{t.kind}-{function}.log"
    env = worker_env(function, extra_env)
    if first_path:
        env["PYTHONPATH"] = os.pathsep.join((first_path, env["PYTHONPATH"]))
    with running(worker_command(t, processes), env=env, log_path=log_path) as process:
        yield process


def prefill(app: App, count: int, prefix: str = "d") -> None:
    """Write `count` documents in a few large transactions (untimed set-up of a backlog).

    On PostgreSQL four threads write at once (each write is several round trips); SQLite
    has one writer at a time anyway."""
    col = app.db.collection("bench")

    def write(start: int) -> None:
        with app.db.transaction() as tx:
            for i in range(start, min(count, start + PREFILL_BATCH)):
                tx.set(col.document(f"{prefix}{i}"), DOC)

    starts = range(0, count, PREFILL_BATCH)
    if app.settings.store.startswith("sqlite"):
        for start in starts:
            write(start)
        return
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, starts))


def write_each(app: App, count: int, prefix: str, max_seconds: float) -> tuple[int, float]:
    """Write documents one transaction each, as an application would; (written, seconds)."""
    col = app.db.collection("bench")
    t0 = time.monotonic()
    deadline = t0 + max_seconds
    written = 0
    for i in range(count):
        col.document(f"{prefix}{i}").set(DOC)
        written += 1
        if (written & 63) == 0 and time.monotonic() >= deadline:
            break
    return written, time.monotonic() - t0


def backlog_store(t: Target, function: str, n: int) -> None:
    """Make the store hold a backlog of n pending events of `function`, and nothing else.

    The backlog is written once a sitting (BENCH_SITTING, which bench/run_all sets; else
    once a process) through oncefire's own write path (prefill) into a template store, and
    each run gets a copy of it: a copy of the SQLite file, or on PostgreSQL a database
    made with CREATE DATABASE ... TEMPLATE (the template analysed first, so that every copy
    starts with the same planner statistics). Every run then drains the same rows, and the
    20,000 writes a run (20 s on PostgreSQL here) are paid once."""
    key = f"{SITTING} {workload.__file__} {function} {n}"
    if t.kind == "sqlite":
        template = target("sqlite", f"backlog-{function}-{n}")
        assert template.path is not None and t.path is not None
        marker = Path(f"{template.path}.key")
        if not (template.path.exists() and marker.exists() and marker.read_text() == key):
            marker.unlink(missing_ok=True)
            write_backlog(template, function, n)
            with closing(sqlite3.connect(str(template.path))) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every row in the file
            marker.write_text(key)
        reset(t)
        copy_store(template.path, t.path)
        return
    import psycopg
    from psycopg import sql

    live = t.url.rsplit("/", 1)[1]
    name = f"oncefire_backlog_{function}_{n}_bench{DB_SUFFIX}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        row = admin.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (name,),
        ).fetchone()
        if row is None or row[0] != key:
            template = Target("postgres", pg_url(name))
            write_backlog(template, function, n)
            with psycopg.connect(template.url, autocommit=True) as conn:
                tables = conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                ).fetchall()
                for (table,) in tables:
                    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
            admin.execute(
                sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                    sql.Identifier(name), sql.Literal(key)
                )
            )
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(live))
        )
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(live), sql.Identifier(name)
            )
        )


def write_backlog(t: Target, function: str, n: int) -> None:
    """An empty store, then n documents written with no worker running (prefill)."""
    reset(t)
    app = workload.build(t.url, function)
    try:
        prefill(app, n)
    finally:
        app.close()


def copy_store(source: Path, dest: Path) -> None:
    """Copy a SQLite store file (the database must be checkpointed: no -wal beside it)."""
    for suffix in ("-wal", "-shm"):
        Path(f"{dest}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(source, dest)
