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
from collections.abc import Iterator
from typing import Any

import workload
from benchlib import WORK, common_args, ensure_database, log, summarize, write_json
from harness import (
    Backlog,
    Target,
    copy_store,
    describe_run,
    drain_only,
    prefill,
    reset,
    target,
    time_drain,
    workers,
    write_each,
)

from oncefire import App
from oncefire.testing import TestClock

LOADER_VERSION = 1
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
CHUNK = 20_000
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


def clones(
    rows: dict[str, list[dict[str, Any]]], history: int, dead: int, now: float
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Chunks of (table, rows) cloned from the seed: history successes, then dead letters."""
    deliveries = rows["oncefire_deliveries"]
    events = {e["id"]: e for e in rows["oncefire_events"]}
    docs = {d["path"]: d for d in rows["oncefire_documents"]}
    next_delivery = max(d["id"] for d in deliveries) + 1
    next_attempt = max(a["id"] for a in rows["oncefire_attempts"]) + 1
    span = HISTORY_DAYS * 86400
    start = now - span
    plan = [(d, history - 1 if d["state"] == "succeeded" else dead - 1) for d in deliveries]
    for kind, (template, count) in enumerate(plan, start=1):
        event = events[template["event_id"]]
        doc = docs[event["source"]]
        prefix = FINISHED_PREFIX if template["state"] == "succeeded" else DEAD_PREFIX
        attempts = [a for a in rows["oncefire_attempts"] if a["delivery_id"] == template["id"]]
        for first in range(0, count, CHUNK):
            batch: dict[str, list[dict[str, Any]]] = {table: [] for table in TABLES}
            for i in range(first, min(count, first + CHUNK)):
                shift = start + span * (i / max(count, 1)) - SEED_TIME
                path = f"{prefix}{i:07d}"
                event_id = history_id(kind, i)
                batch["oncefire_documents"].append(shifted(doc, shift, path=path))
                batch["oncefire_events"].append(shifted(event, shift, id=event_id, source=path))
                batch["oncefire_deliveries"].append(
                    shifted(template, shift, id=next_delivery, event_id=event_id)
                )
                for attempt in attempts:
                    batch["oncefire_attempts"].append(
                        shifted(
                            attempt,
                            shift,
                            id=next_attempt,
                            delivery_id=next_delivery,
                            event_id=event_id,
                        )
                    )
                    next_attempt += 1
                next_delivery += 1
            for table in TABLES:
                yield table, batch[table]


def shifted(row: dict[str, Any], shift: float, **changes: Any) -> dict[str, Any]:
    out = dict(row)
    for name in TIME_COLUMNS.intersection(out):
        if isinstance(out[name], int | float) and not isinstance(out[name], bool):
            out[name] = out[name] + shift
    out.update(changes)
    return out


def bulk_load(t: Target, history: int, dead: int) -> None:
    """Seed the store through oncefire, then clone the seed's rows by the hundred thousand."""
    rows = seed(t)
    now = time.time()
    loaded = 0
    if t.kind == "sqlite":
        with connect(t) as conn:
            conn.execute("PRAGMA synchronous = OFF")  # set-up only: the rows are the same
            conn.execute("BEGIN")
            for table, chunk in clones(rows, history, dead, now):
                if not chunk:
                    continue
                names = list(chunk[0])
                conn.executemany(
                    f"INSERT INTO {table} ({', '.join(names)})"
                    f" VALUES ({', '.join('?' * len(names))})",
                    [tuple(r[n] for n in names) for r in chunk],
                )
                loaded += len(chunk)
            conn.execute("COMMIT")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        from psycopg.types.json import Jsonb

        with connect(t) as conn:
            for table, chunk in clones(rows, history, dead, now):
                if not chunk:
                    continue
                names = list(chunk[0])
                with conn.cursor().copy(f"COPY {table} ({', '.join(names)}) FROM STDIN") as cp:
                    for r in chunk:
                        cp.write_row(
                            [Jsonb(r[n]) if isinstance(r[n], dict | list) else r[n] for n in names]
                        )
                loaded += len(chunk)
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


def measure(t: Target, n: int, writes: int, max_seconds: float, fresh: bool) -> dict[str, Any]:
    """Drain rate, write rate and dead-letter listing times on one store."""
    if fresh:
        result = drain_only(t, "noop", n, max_seconds)
    else:
        app = workload.build(t.url, "noop")
        prefill(app, n)
        app.close()
        backlog = Backlog(t, "noop")
        try:
            with workers(t, "noop"):
                result = time_drain(backlog, n, warmup=max(1, n // 40), max_seconds=max_seconds)
        finally:
            backlog.close()
    app = workload.build(t.url, "noop")
    try:
        written, seconds = write_each(app, writes, "w", max_seconds)
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
    for run in range(args.runs):
        log(f"growth on {live.label}, run {run + 1}/{args.runs}: {args.n:,} events")
        empty.append(measure(empty_t, args.n, args.writes, args.max_seconds, fresh=True))
        describe_run("empty store drain", empty[-1]["drain"])
        try:
            loaded.append(measure(live, args.n, args.writes, args.max_seconds, fresh=False))
        finally:
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
