"""The growth benchmark's history, made by the database: one real success and one real dead
letter are run through oncefire (App, drain, a TestClock), then their rows (document, event,
delivery, attempts) are cloned by SQL (INSERT ... SELECT over a series) with fresh ids,
paths and times spread over the past 7 days. Two large collections are made the same way:
one queried by a declared field, one under a TTL policy (nothing due)."""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

import workload
from benchlib import log
from oncefire_harness import Target

from oncefire import App
from oncefire.model.buckets import DURATION_BOUNDS
from oncefire.model.index_keys import index_key
from oncefire.testing import TestClock

TABLES = (
    "oncefire_documents",
    "oncefire_events",
    "oncefire_deliveries",
    "oncefire_attempts",
    "oncefire_index_entries",
)
TIME_COLUMNS = {
    "create_time",
    "update_time",
    "time",
    "run_at",
    "created_at",
    "lease_until",
    "dead_at",
    "started_at",
    "finished_at",
}
SEED_TIME = 1_700_000_000.0
HISTORY_DAYS = 7
FINISHED_PREFIX, DEAD_PREFIX = "bench/h", "poison/x"

# -- the seed: real rows from the real code path ------------------------------------------


def seed(t: Target) -> dict[str, list[dict[str, Any]]]:
    """Run one success and one dead letter through oncefire; return their rows by table."""
    clock = TestClock(SEED_TIME)
    logging.getLogger("oncefire").setLevel(logging.ERROR)  # the seed's dead letter is expected
    app = App(t.url, clock=clock)
    app.on_document_created("bench/{id}", name="noop")(lambda event: None)

    def poison(event: Any) -> None:
        raise workload.PoisonError(f"poison event {event.params['id']}")

    app.on_document_created("poison/{id}", name="poison", retry_policy=workload.POISON_POLICY)(
        poison
    )
    app.db.document(f"{FINISHED_PREFIX}seed").set(workload_doc())
    app.db.document(f"{DEAD_PREFIX}seed").set(workload_doc())
    for _ in range(20):
        app.drain()
        clock.advance(2.0)
        if app.dead_letters.count() == 1:
            break
    assert app.dead_letters.count() == 1, "the seed poison event did not become a dead letter"
    app.close()
    return read_seed_rows(t)


def workload_doc() -> dict[str, Any]:
    from oncefire_harness import DOC

    return dict(DOC)


def read_seed_rows(t: Target) -> dict[str, list[dict[str, Any]]]:
    queries = {
        "oncefire_documents": "SELECT * FROM oncefire_documents ORDER BY path",
        "oncefire_events": "SELECT * FROM oncefire_events ORDER BY source",
        "oncefire_deliveries": "SELECT * FROM oncefire_deliveries ORDER BY id",
        "oncefire_attempts": "SELECT * FROM oncefire_attempts ORDER BY id",
    }
    with connect(t) as conn:
        out = {}
        for table, sql in queries.items():
            cursor = conn.execute(sql)
            names = [d[0] for d in cursor.description]
            out[table] = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return out


def connect(t: Target) -> Any:
    if t.kind == "sqlite":
        conn = sqlite3.connect(str(t.path), isolation_level=None, timeout=60)
        return _Closing(conn)
    import psycopg

    return psycopg.connect(t.url, autocommit=True)


class _Closing:
    """A sqlite3 connection that closes at the end of a with block."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


# -- cloning ------------------------------------------------------------------------------


def history_id(kind: int, i: int) -> str:
    """UUID-shaped event ids that sort before every real (time-based) one."""
    return f"00000000-{kind:04x}-7000-8000-{i:012x}"


class CloneSql:
    """The SQL dialect of one store for cloning a seed row over a series 0 .. count-1 (g.i).

    The rows are made by the database itself (INSERT ... SELECT from the seed row, joined to
    a series), not sent one by one: every column is the seed's, except the keys (ids as
    history_id() makes them, paths FINISHED_PREFIX or DEAD_PREFIX and 7 digits) and the
    times, spread over the past HISTORY_DAYS."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.p = "?" if kind == "sqlite" else "%s"

    def series(self, count: int) -> tuple[str, str, list[Any]]:
        """(WITH clause, FROM item, its parameters) of the series g(i), i = 0 .. count-1."""
        if self.kind == "sqlite":
            return (
                "WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < ?) ",
                "g",
                [count],
            )
        return "", "generate_series(0, %s::bigint - 1) AS g(i)", [count]

    def padded(self, prefix: str, width: int, hexadecimal: bool) -> tuple[str, list[Any]]:
        """prefix followed by g.i in `width` digits (hexadecimal or decimal)."""
        if self.kind == "sqlite":
            return f"printf('%s%0{width}{'x' if hexadecimal else 'd'}', ?, g.i)", [prefix]
        digits = "to_hex(g.i)" if hexadecimal else "g.i::text"
        return f"(%s::text || lpad({digits}, {width}, '0'))", [prefix]

    def shift(self, base: float, span: float, count: int) -> tuple[str, list[Any]]:
        """The time shift of row i: base + span * i / count (seconds)."""
        cast = "" if self.kind == "sqlite" else "::float8"
        p = self.p
        return f"({p}{cast} + {p}{cast} * g.i / {p}{cast})", [base, span, float(max(count, 1))]


def clone(
    conn: Any,
    sql: CloneSql,
    table: str,
    where: str,
    where_args: list[Any],
    count: int,
    shift: tuple[float, float],
    changes: dict[str, tuple[str, list[Any]]],
) -> int:
    """Insert `count` copies of the seed rows of `table` matching `where` (alias s)."""
    names = [d[0] for d in conn.execute(f"SELECT * FROM {table} WHERE 1 = 0").description]
    with_clause, series, series_args = sql.series(count)
    shift_sql, shift_args = sql.shift(shift[0], shift[1], count)
    exprs: list[str] = []
    args: list[Any] = []
    for name in names:
        if name in changes:
            expr, expr_args = changes[name]
            exprs.append(expr)
            args.extend(expr_args)
        elif name in TIME_COLUMNS:
            exprs.append(f"s.{name} + {shift_sql}")  # NULL stays NULL
            args.extend(shift_args)
        else:
            exprs.append(f"s.{name}")
    statement = (
        f"{with_clause}INSERT INTO {table} ({', '.join(names)})"
        f" SELECT {', '.join(exprs)} FROM {table} s CROSS JOIN {series} WHERE {where}"
    )
    if sql.kind == "sqlite":
        params = [*series_args, *args, *where_args]
    else:
        params = [*args, *series_args, *where_args]
    cursor = conn.execute(statement, params)
    if sql.kind == "sqlite":  # its rowcount is -1 for a statement that starts with WITH
        return int(conn.execute("SELECT changes()").fetchone()[0])
    return int(cursor.rowcount)


def clone_history(
    conn: Any,
    kind_of_store: str,
    rows: dict[str, list[dict[str, Any]]],
    history: int,
    dead: int,
    now: float,
) -> int:
    """Clone the seed: history - 1 successes and dead - 1 dead letters (the seeds are the
    last of each); each clone with its document, event, delivery and attempts."""
    sql = CloneSql(kind_of_store)
    p = sql.p
    deliveries = rows["oncefire_deliveries"]
    events = {e["id"]: e for e in rows["oncefire_events"]}
    next_delivery = max(d["id"] for d in deliveries) + 1
    next_attempt = max(a["id"] for a in rows["oncefire_attempts"]) + 1
    span = HISTORY_DAYS * 86400
    base = now - span - SEED_TIME
    loaded = 0
    plan = [(d, history - 1 if d["state"] == "succeeded" else dead - 1) for d in deliveries]
    for kind, (template, count) in enumerate(plan, start=1):
        if count <= 0:
            continue
        event = events[template["event_id"]]
        prefix = FINISHED_PREFIX if template["state"] == "succeeded" else DEAD_PREFIX
        attempts = sorted(
            a["id"] for a in rows["oncefire_attempts"] if a["delivery_id"] == template["id"]
        )
        path = sql.padded(prefix, 7, hexadecimal=False)
        event_id = sql.padded(f"00000000-{kind:04x}-7000-8000-", 12, hexadecimal=True)
        delivery_id = (f"({p} + g.i)", [next_delivery])
        shift = (base, float(span))
        loaded += clone(
            conn,
            sql,
            "oncefire_documents",
            f"s.path = {p}",
            [event["source"]],
            count,
            shift,
            {"path": path},
        )
        loaded += clone(
            conn,
            sql,
            "oncefire_events",
            f"s.id = {p}",
            [event["id"]],
            count,
            shift,
            {"id": event_id, "source": path},
        )
        loaded += clone(
            conn,
            sql,
            "oncefire_deliveries",
            f"s.id = {p}",
            [template["id"]],
            count,
            shift,
            {"id": delivery_id, "event_id": event_id},
        )
        if attempts:
            # The template's attempts in id order: clone i's attempt j gets
            # next_attempt + i * len(attempts) + j, as they are numbered in a real history.
            ordinal = (
                "CASE s.id "
                + " ".join(f"WHEN {a} THEN {j}" for j, a in enumerate(attempts))
                + " END"
            )
            loaded += clone(
                conn,
                sql,
                "oncefire_attempts",
                f"s.delivery_id = {p}",
                [template["id"]],
                count,
                shift,
                {
                    "id": (f"({p} + g.i * {len(attempts)} + {ordinal})", [next_attempt]),
                    "delivery_id": delivery_id,
                    "event_id": event_id,
                },
            )
        next_delivery += count
        next_attempt += count * len(attempts)
    return loaded


QUERIED, STATUSES = "queried", 100  # documents {"status": "s<i % 100>", "n": i}, indexed
EXPIRING, EXPIRIES = "sessions", 1000  # documents {"expires_at": <10 years on>}, under TTL


def fill_collections(conn: Any, kind: str, queried: int, expiring: int, now: float) -> int:
    """The queried and the expiring collections, made by the database with their index
    entries (keys as oncefire.model.index_keys makes them) and index declarations."""
    sql = CloneSql(kind)
    p = sql.p
    assert index_key("s7") == "4:s7"  # strings are keyed by themselves, after their rank
    conn.execute("CREATE TEMP TABLE bench_expiry (k integer PRIMARY KEY, at text, key text)")
    expiries = [now + 10 * 365 * 86400 + k for k in range(EXPIRIES)]
    rows = [(k, repr(at), index_key(at)) for k, at in enumerate(expiries)]
    for row in rows:
        conn.execute(f"INSERT INTO bench_expiry VALUES ({p}, {p}, {p})", row)
    cast = "" if kind == "sqlite" else "::text"
    mod = "%" if kind == "sqlite" else "%%"  # psycopg reads a lone % as a placeholder
    size = ", data_size" if kind == "postgres" else ""
    loaded = 0
    for collection, count, data, key, field in (
        (
            QUERIED,
            queried,
            "'{\"status\":\"s' || (g.i {mod} 100) || '\",\"n\":' || g.i || '}'",
            "'4:s' || (g.i {mod} 100)",
            "status",
        ),
        (
            EXPIRING,
            expiring,
            '\'{"expires_at":\' || e.at || \',"user":"u"}\'',
            "e.key",
            "expires_at",
        ),
    ):
        if count <= 0:
            continue
        data, key = data.replace("{mod}", mod), key.replace("{mod}", mod)
        with_clause, series, series_args = sql.series(count)
        path, path_args = sql.padded(f"{collection}/d", 7, hexadecimal=False)
        joined = f"{series} JOIN bench_expiry e ON e.k = g.i {mod} {EXPIRIES}"
        doc_data = data if kind == "sqlite" else f"({data})::jsonb"
        sizes = f", octet_length({data})" if kind == "postgres" else ""
        statement = (
            f"{with_clause}INSERT INTO oncefire_documents"
            f" (path, collection, data, create_time, update_time{size})"
            f" SELECT {path}, {p}{cast}, {doc_data}, {p}, {p}{sizes} FROM {joined}"
        )
        args = [*path_args, collection, now, now]
        conn.execute(
            statement, [*series_args, *args] if kind == "sqlite" else [*args, *series_args]
        )
        statement = (
            f"{with_clause}INSERT INTO oncefire_index_entries (collection, field, value, path)"
            f" SELECT {p}{cast}, {p}{cast}, {key}, {path} FROM {joined}"
        )
        args = [collection, field, *path_args]
        conn.execute(
            statement, [*series_args, *args] if kind == "sqlite" else [*args, *series_args]
        )
        conn.execute(
            f"INSERT INTO oncefire_index_fields (collection, field) VALUES ({p}, {p})",
            (collection, field),
        )
        loaded += 2 * count
    conn.execute("UPDATE oncefire_catalog SET version = version + 1")
    conn.execute("DROP TABLE bench_expiry")
    return loaded


# The history's hour buckets, made from its attempt rows as a real history's attempts made
# them one by one (the statistics read buckets, never attempts: without these, stats() on the
# loaded store would read the seed's few buckets only). On PostgreSQL spread over the 8 shards
# that the writing connections' pids spread them over (schema 20).
BUCKET_COLUMNS = (
    "function, hour, outcome, bin, count, duration_sum, cpu_sum, max_number, reads_sum, writes_sum"
)
SQLITE_BIN = " + ".join(f"(finished_at - started_at >= {b})" for b in DURATION_BOUNDS)
FILL_BUCKETS = {
    "sqlite": f"INSERT INTO oncefire_buckets ({BUCKET_COLUMNS}) "
    "SELECT function, hour, outcome, bin, count(*), sum(duration), sum(cpu), max(number), "
    "sum(reads), sum(writes) FROM (SELECT function, "
    "CAST(finished_at / 3600 AS INTEGER) * 3600.0 AS hour, outcome, number, "
    "max(finished_at - started_at, 0) AS duration, coalesce(cpu_seconds, 0) AS cpu, "
    f"coalesce(reads, 0) AS reads, coalesce(writes, 0) AS writes, {SQLITE_BIN} AS bin "
    "FROM oncefire_attempts WHERE outcome IS NOT NULL AND finished_at IS NOT NULL) "
    "GROUP BY function, hour, outcome, bin",
    "postgres": f"INSERT INTO oncefire_buckets ({BUCKET_COLUMNS}, shard) "
    "SELECT function, floor(finished_at / 3600) * 3600, outcome, "
    "width_bucket(finished_at - started_at, ARRAY["
    + ", ".join(str(b) for b in DURATION_BOUNDS)
    + "]::float8[]), count(*), sum(greatest(finished_at - started_at, 0)), "
    "sum(coalesce(cpu_seconds, 0)), max(number), sum(coalesce(reads, 0)), "
    "sum(coalesce(writes, 0)), id % 8 FROM oncefire_attempts "
    "WHERE outcome IS NOT NULL AND finished_at IS NOT NULL GROUP BY 1, 2, 3, 4, 11",
}


def fill_buckets(t: Target) -> bool:
    """Make the hour buckets of the history's attempts, unless they are there already (a
    store built before they were made); whether it made them. The failed attempts tell (the
    measured runs add successes to the buckets of their hour, never failures)."""
    failed = "outcome = 'failed'"
    with connect(t) as conn:
        counted = conn.execute(
            f"SELECT coalesce(sum(count), 0) FROM oncefire_buckets WHERE {failed}"
        ).fetchone()[0]
        attempts = conn.execute(f"SELECT count(*) FROM oncefire_attempts WHERE {failed}")
        if counted >= attempts.fetchone()[0]:
            return False
        conn.execute("DELETE FROM oncefire_buckets WHERE outcome <> 'dedupe'")
        conn.execute(FILL_BUCKETS[t.kind])
        if t.kind == "postgres":
            conn.execute("VACUUM (ANALYZE) oncefire_buckets")
    return True


RECOUNT_DEAD = (
    "UPDATE oncefire_dead_counts c SET count = (SELECT count(*) FROM oncefire_deliveries d"
    " WHERE d.state = 'dead' AND d.function = c.function)"
)


FILLFACTOR = (
    "SELECT coalesce((SELECT option_value FROM pg_options_to_table(reloptions)"
    " WHERE option_name = 'fillfactor'), '100') FROM pg_class"
    " WHERE oid = 'oncefire_deliveries'::regclass"
)


def bulk_load(t: Target, history: int, dead: int, queried: int, expiring: int) -> None:
    """Seed the store through oncefire, then clone the seed's rows inside the database."""
    rows = seed(t)
    now = time.time()
    if t.kind == "sqlite":
        with connect(t) as conn:
            conn.execute("PRAGMA synchronous = OFF")  # set-up only: the rows are the same
            conn.execute("BEGIN")
            loaded = clone_history(conn, t.kind, rows, history, dead, now)
            loaded += fill_collections(conn, t.kind, queried, expiring, now)
            conn.execute("COMMIT")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        with connect(t) as conn:
            with conn.transaction():
                # The deliveries' row triggers are off for the load, and what they keep is set
                # after it in the same transaction. The dead-letter counter's would upsert one
                # row a million times in one transaction, each update a new version of it that
                # the next one walks past (quadratic: it ran for over half an hour); the
                # ordering key's has no ordered function to key; the foreign key's checks
                # hold by construction (each clone's event is cloned with it).
                conn.execute("ALTER TABLE oncefire_deliveries DISABLE TRIGGER ALL")
                # The clone fills each page to the brim, as a history's own churn does (a
                # delivery's next versions take the room its page keeps, and the versions
                # they replace leave whole pages free). Cloned at the schema's fillfactor
                # instead, every page would end at nine tenths plus a sliver: room for one
                # pending delivery a page, which no history oncefire writes leaves
                # (docs/performance.md, "Retention and a long history").
                fill = conn.execute(FILLFACTOR).fetchone()[0]
                conn.execute("ALTER TABLE oncefire_deliveries SET (fillfactor = 100)")
                loaded = clone_history(conn, t.kind, rows, history, dead, now)
                loaded += fill_collections(conn, t.kind, queried, expiring, now)
                conn.execute(f"ALTER TABLE oncefire_deliveries SET (fillfactor = {int(fill)})")
                conn.execute("ALTER TABLE oncefire_deliveries ENABLE TRIGGER ALL")
                conn.execute(RECOUNT_DEAD)
            for table in ("oncefire_deliveries", "oncefire_attempts"):
                conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                    f" (SELECT max(id) FROM {table}))"
                )
            # What autovacuum would do soon after a load this size, done now so that it does
            # not run during the measurements; and the load's dirty pages written out.
            for table in TABLES:
                conn.execute(f"VACUUM (ANALYZE) {table}")
            conn.execute("CHECKPOINT")
    log(f"  loaded {loaded:,} rows")
