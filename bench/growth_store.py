"""The growth benchmark's stores: the loaded one (history built once and kept between
sittings), the empty one, and the backlog every run drains, placed on both the same way."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import workload
from benchlib import WORK, ensure_database, log
from growth_seed import FINISHED_PREFIX, TABLES, bulk_load, connect, fill_buckets
from oncefire_harness import Target, copy_store, prefill, reset, target

from oncefire import App

LOADER_VERSION = 3

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


def loaded_store(
    kind: str, sizes: dict[str, int], in_place: bool = False
) -> tuple[Target, dict[str, int]]:
    """A store holding the history: reused when its key matches, built otherwise.

    sizes: history (finished deliveries), dead (dead letters), queried and expiring
    (documents of the two large collections). in_place (SQLite): measure on the kept file
    itself instead of a copy (each run removes what it added; a copy of the 15 GB file of
    10 M deliveries takes 20 minutes on a busy disk)."""
    probe = target(kind, "oncefire_growth_probe" if kind == "postgres" else "growth-probe")
    reset(probe)
    App(probe.url).store  # noqa: B018 - a fresh schema, to read its signature
    shape = "-".join(str(sizes[k]) for k in ("history", "dead", "queried", "expiring"))
    key = f"{LOADER_VERSION}-{schema_signature(probe)}-{shape}"
    if kind == "postgres":
        key += "-brim"  # its deliveries' pages cloned full (growth_seed.bulk_load)
    what = f"{sizes['history']:,} + {sizes['dead']:,} dead letters"
    load = (sizes["history"], sizes["dead"], sizes["queried"], sizes["expiring"])
    started = time.monotonic()
    if kind == "sqlite":
        WORK.mkdir(parents=True, exist_ok=True)
        template = WORK / f"growth-{key}.db"
        live = target("sqlite", "growth")
        if not template.exists():
            for old in WORK.glob("growth-*.db"):
                old.unlink()
            build = target("sqlite", "growth-build")
            reset(build)
            log(f"building the loaded SQLite store ({what})")
            bulk_load(build, *load)
            assert build.path is not None
            build.path.replace(template)
            log(f"  built in {time.monotonic() - started:.0f} s")
        if fill_buckets(Target("sqlite", f"sqlite:///{template}", template)):
            log("  its attempts' hour buckets made")
        if in_place:
            live = Target("sqlite", f"sqlite:///{template}", template)
        else:
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
            log(f"building the loaded PostgreSQL store ({what})")
            bulk_load(live, *load)
            with connect(live) as conn:
                conn.execute("CREATE TABLE bench_growth_meta (key text)")
                conn.execute("INSERT INTO bench_growth_meta VALUES (%s)", (key,))
            log(f"  built in {time.monotonic() - started:.0f} s")
        if fill_buckets(live):
            log("  its attempts' hour buckets made")
    return live, watermarks(live)


def empty_store(kind: str) -> Target:
    """A store with the schema and nothing else."""
    t = target(kind)
    reset(t)
    app = App(t.url)
    app.store  # noqa: B018 - the schema
    app.close()
    return t


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
        conn.execute(  # the backlog's and the writes' documents; not the history's
            f"DELETE FROM oncefire_documents WHERE collection = 'bench' AND path NOT LIKE {p}",
            (f"{FINISHED_PREFIX}%",),
        )
        if t.kind == "postgres":
            # Each run starts from a vacuumed history, as autovacuum eventually leaves it; the
            # dead tuples a run's own deliveries leave behind are part of what it measures.
            for table in TABLES:
                conn.execute(f"VACUUM {table}")


def backlog_rows(kind: str, n: int) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of a backlog of n pending events (documents, events, deliveries), written
    once through oncefire (prefill) into a scratch store and read back."""
    scratch = target(kind, "growth-backlog" if kind == "sqlite" else "oncefire_growth_backlog")
    reset(scratch)
    app = workload.build(scratch.url, "noop")
    try:
        prefill(app, n)
    finally:
        app.close()
    with connect(scratch) as conn:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("oncefire_documents", "oncefire_events", "oncefire_deliveries")
        }


def place_backlog(t: Target, rows: dict[str, list[tuple[Any, ...]]], first_id: int) -> None:
    """Insert a backlog's rows, its delivery ids from first_id on: the same statements on the
    empty and on the loaded store (and the same ids), then the planner's statistics."""
    start = min(row[0] for row in rows["oncefire_deliveries"])
    shifted = {
        **rows,
        "oncefire_deliveries": [
            (row[0] - start + first_id, *row[1:]) for row in rows["oncefire_deliveries"]
        ],
    }
    insert_rows(t, shifted)
    with connect(t) as conn:
        if t.kind == "postgres":
            conn.execute(
                "SELECT setval(pg_get_serial_sequence('oncefire_deliveries', 'id'),"
                " (SELECT max(id) FROM oncefire_deliveries))"
            )
            for table in TABLES:
                conn.execute(f"ANALYZE {table}")


def insert_rows(t: Target, rows: dict[str, list[tuple[Any, ...]]]) -> None:
    """Insert rows as they were read (every column)."""
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
