"""Scenario 4, growth: throughput and dead-letter listing with a large history, against an
empty store.

The history is a faithful bulk load: one document write is run to success and one poison
event to its dead letter through the real code path (App, drain, a TestClock), then their
rows (document, event, delivery, attempts) are cloned by SQL with fresh ids, paths and times
spread over the past 7 days: 1,000,000 finished deliveries and 100,000 dead letters with 6
failed attempts each. The loaded store is built once and kept under bench/.work (SQLite) or
in the oncefire_growth_bench database (PostgreSQL); each run then removes what it added.

Each run measures, on an empty store and on the loaded one: drain-only throughput of N
events (as in the throughput scenario), document writes per second, and the time of
`app.dead_letters.list()` (median of 20 calls), `dead_letters.count()` and `app.stats()`.

    python bench/growth.py --store sqlite --history 1000000 --dead 100000 --n 20000
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import statistics
import time
from typing import Any

import workload
from benchlib import WORK, common_args, ensure_database, log, phase, summarize, write_json
from harness import (
    Target,
    copy_store,
    describe_run,
    drain_backlog,
    drain_only,
    prefill,
    reset,
    target,
    write_each,
)

from oncefire import App
from oncefire.testing import TestClock

LOADER_VERSION = 2
TABLES = ("oncefire_documents", "oncefire_events", "oncefire_deliveries", "oncefire_attempts")
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
LIST_CALLS = 20
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
    from harness import DOC

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


def bulk_load(t: Target, history: int, dead: int) -> None:
    """Seed the store through oncefire, then clone the seed's rows inside the database."""
    rows = seed(t)
    now = time.time()
    if t.kind == "sqlite":
        with connect(t) as conn:
            conn.execute("PRAGMA synchronous = OFF")  # set-up only: the rows are the same
            conn.execute("BEGIN")
            loaded = clone_history(conn, t.kind, rows, history, dead, now)
            conn.execute("COMMIT")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        with connect(t) as conn:
            with conn.transaction():
                loaded = clone_history(conn, t.kind, rows, history, dead, now)
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


# -- the loaded store, built once ----------------------------------------------------------


def schema_signature(t: Target) -> str:
    """A digest of the store's columns, so a schema change rebuilds the loaded store."""
    if t.kind == "sqlite":
        sql = "SELECT name, sql FROM sqlite_master WHERE name LIKE 'oncefire%' ORDER BY name"
    else:
        sql = (
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_name LIKE 'oncefire%' ORDER BY table_name, column_name"
        )
    with connect(t) as conn:
        rows = conn.execute(sql).fetchall()
    return hashlib.sha256(json.dumps([list(r) for r in rows]).encode()).hexdigest()[:16]


def loaded_store(kind: str, history: int, dead: int) -> tuple[Target, dict[str, int]]:
    """A store holding the history: reused when its key matches, built otherwise."""
    probe = target(kind, "oncefire_growth_probe" if kind == "postgres" else "growth-probe")
    reset(probe)
    App(probe.url).store  # noqa: B018 - a fresh schema, to read its signature
    key = f"{LOADER_VERSION}-{schema_signature(probe)}-{history}-{dead}"
    if kind == "sqlite":
        WORK.mkdir(parents=True, exist_ok=True)
        template = WORK / f"growth-{key}.db"
        live = target("sqlite", "growth")
        if not template.exists():
            for old in WORK.glob("growth-*.db"):
                old.unlink()
            build = target("sqlite", "growth-build")
            reset(build)
            log(f"building the loaded SQLite store ({history:,} + {dead:,} dead letters)")
            bulk_load(build, history, dead)
            assert build.path is not None
            build.path.replace(template)
        reset(live)
        assert live.path is not None
        copy_store(template, live.path)
    else:
        live = target("postgres", "oncefire_growth")
        ensure_database(live.url.rsplit("/", 1)[1])
        with connect(live) as conn:
            has_meta = conn.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_name = 'bench_growth_meta'"
            ).fetchone()
            stored = (
                conn.execute("SELECT key FROM bench_growth_meta").fetchone() if has_meta else None
            )
        if stored is None or stored[0] != key:
            reset(live)
            log(f"building the loaded PostgreSQL store ({history:,} + {dead:,} dead letters)")
            bulk_load(live, history, dead)
            with connect(live) as conn:
                conn.execute("CREATE TABLE bench_growth_meta (key text)")
                conn.execute("INSERT INTO bench_growth_meta VALUES (%s)", (key,))
    return live, watermarks(live)


def watermarks(t: Target) -> dict[str, Any]:
    with connect(t) as conn:
        d = conn.execute("SELECT max(id), count(*) FROM oncefire_deliveries").fetchone()
        a = conn.execute("SELECT max(id) FROM oncefire_attempts").fetchone()
        e = conn.execute("SELECT max(id) FROM oncefire_events").fetchone()
        dead = conn.execute(
            "SELECT count(*) FROM oncefire_deliveries WHERE state = 'dead'"
        ).fetchone()
    return {
        "delivery": d[0],
        "deliveries": d[1],
        "attempt": a[0],
        "event": e[0],
        "dead": dead[0],
    }


def remove_added(t: Target, marks: dict[str, Any]) -> None:
    """Delete what a run added, so every run sees the same history."""
    p = "?" if t.kind == "sqlite" else "%s"
    with connect(t) as conn:
        conn.execute(f"DELETE FROM oncefire_attempts WHERE id > {p}", (marks["attempt"],))
        conn.execute(f"DELETE FROM oncefire_deliveries WHERE id > {p}", (marks["delivery"],))
        conn.execute(f"DELETE FROM oncefire_events WHERE id > {p}", (marks["event"],))
        conn.execute(
            f"DELETE FROM oncefire_documents WHERE path NOT LIKE {p} AND path NOT LIKE {p}",
            (f"{FINISHED_PREFIX}%", f"{DEAD_PREFIX}%"),
        )
        if t.kind == "postgres":
            # Each run starts from a vacuumed history, as autovacuum eventually leaves it; the
            # dead tuples a run's own deliveries leave behind are part of what it measures.
            for table in TABLES:
                conn.execute(f"VACUUM {table}")


# -- measuring ----------------------------------------------------------------------------


def timed_ms(call: Any, repeat: int) -> float:
    call()  # warm the connection and the caches
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def added_rows(t: Target, marks: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """The rows added to the loaded store since its watermarks, by table (what
    remove_added deletes), in the order they can be inserted again."""
    p = "?" if t.kind == "sqlite" else "%s"
    where = {
        "oncefire_documents": (
            f"path NOT LIKE {p} AND path NOT LIKE {p}",
            (f"{FINISHED_PREFIX}%", f"{DEAD_PREFIX}%"),
        ),
        "oncefire_events": (f"id > {p}", (marks["event"],)),
        "oncefire_deliveries": (f"id > {p}", (marks["delivery"],)),
        "oncefire_attempts": (f"id > {p}", (marks["attempt"],)),
    }
    with connect(t) as conn:
        return {
            table: conn.execute(f"SELECT * FROM {table} WHERE {sql}", args).fetchall()
            for table, (sql, args) in where.items()
        }


def insert_rows(t: Target, rows: dict[str, list[tuple[Any, ...]]]) -> None:
    """Insert rows read by added_rows() again, as they were (every column)."""
    with connect(t) as conn:
        if t.kind == "sqlite":
            conn.execute("BEGIN")
            for table, values in rows.items():
                if values:
                    marks = ", ".join("?" * len(values[0]))
                    conn.executemany(f"INSERT INTO {table} VALUES ({marks})", values)
            conn.execute("COMMIT")
            return
        from psycopg.types.json import Jsonb

        with conn.transaction():
            for table, values in rows.items():
                with conn.cursor().copy(f"COPY {table} FROM STDIN") as cp:
                    for row in values:
                        cp.write_row([Jsonb(v) if isinstance(v, dict | list) else v for v in row])


def measure(
    t: Target,
    n: int,
    writes: int,
    max_seconds: float,
    fresh: bool,
    backlog: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Drain rate, write rate and dead-letter listing times on one store.

    On the loaded store the backlog of n events is written through oncefire in the first
    run, and its rows are kept in `backlog` (with the store's watermarks): later runs insert
    those same rows again, in a second rather than the 20 s the writes take on PostgreSQL."""
    if fresh:
        result = drain_only(t, "noop", n, max_seconds)
    else:
        assert backlog is not None
        with phase(f"the backlog of {n:,} in place"):
            if "rows" in backlog:
                insert_rows(t, backlog["rows"])
            else:
                app = workload.build(t.url, "noop")
                prefill(app, n)
                app.close()
                backlog["rows"] = added_rows(t, backlog["marks"])
        result = drain_backlog(t, "noop", n, max_seconds)
    app = workload.build(t.url, "noop")
    try:
        with phase(f"{writes:,} writes"):
            written, seconds = write_each(app, writes, "w", max_seconds)
        with phase("dead-letter listing, count and stats"):
            lists = timed_ms(lambda: app.dead_letters.list(), LIST_CALLS)
            by_function = timed_ms(lambda: app.dead_letters.list(function="poison"), LIST_CALLS)
            counted = timed_ms(lambda: app.dead_letters.count(), 3)
            stats = timed_ms(lambda: app.stats(), 1)
    finally:
        app.close()
    return {
        "drain": result,
        "drain_rate": result["rate"],
        "write_rate": written / seconds,
        "list_ms": lists,
        "list_function_ms": by_function,
        "count_ms": counted,
        "stats_ms": stats,
        "capped": result["capped"],
    }


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--history", type=int, default=1_000_000)
    parser.add_argument("--dead", type=int, default=100_000)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--writes", type=int, default=1000)
    args = parser.parse_args()
    started = time.monotonic()
    live, marks = loaded_store(args.store, args.history, args.dead)
    log(
        f"growth on {live.label}: {marks['deliveries']:,} deliveries in the store,"
        f" {marks['dead']:,} dead letters (ready in {time.monotonic() - started:.0f} s)"
    )
    empty_t = target(args.store)
    empty: list[dict[str, Any]] = []
    loaded: list[dict[str, Any]] = []
    kept_backlog: dict[str, Any] = {"marks": marks}
    for run in range(args.runs):
        log(f"growth on {live.label}, run {run + 1}/{args.runs}: {args.n:,} events")
        empty.append(measure(empty_t, args.n, args.writes, args.max_seconds, fresh=True))
        describe_run("empty store drain", empty[-1]["drain"])
        try:
            loaded.append(measure(live, args.n, args.writes, args.max_seconds, False, kept_backlog))
        finally:
            with phase("remove what the run added"):
                remove_added(live, marks)
        describe_run("loaded store drain", loaded[-1]["drain"])
        log(
            f"  dead_letters.list(): {empty[-1]['list_ms']:.2f} ms empty,"
            f" {loaded[-1]['list_ms']:.2f} ms loaded"
        )
    figures = ("drain_rate", "write_rate", "list_ms", "list_function_ms", "count_ms", "stats_ms")
    write_json(
        args.json,
        {
            "scenario": "growth",
            "store": args.store,
            "history": marks["deliveries"] - marks["dead"],
            "dead_letters": marks["dead"],
            "n": args.n,
            "empty": {f: summarize([r[f] for r in empty]) for f in figures},
            "loaded": {f: summarize([r[f] for r in loaded]) for f in figures},
            "drain_slowdown": summarize(
                [
                    1 - lo["drain_rate"] / em["drain_rate"]
                    for em, lo in zip(empty, loaded, strict=True)
                    if em["drain_rate"] and lo["drain_rate"]
                ]
            ),
            "capped": any(r["capped"] for r in empty + loaded),
            "empty_runs": empty,
            "loaded_runs": loaded,
        },
    )


if __name__ == "__main__":
    main()
