"""Where the cost of a watched table's bulk INSERT goes (issue 17's goal: a 100,000-row INSERT
in one transaction at >= 50 % of the unwatched rate), on SQLite and PostgreSQL side by side.

The same one-statement INSERT ... SELECT of --bulk rows into five tables of the same columns:

    none     no trigger (the unwatched rate);
    bare     a trigger that inserts only the row's integer key into a table with no index (on
             SQLite a rowid table; on PostgreSQL a heap, per statement from the transition
             table): the floor of any capture in a trigger;
    copy     the same with the row's values, copied into a table of the same columns: the
             floor of a capture that keeps the row without making JSON of it;
    stamped  the copy with what a change needs beside the row: the database's time in ms
             and the change's kind (on SQLite, once a row: its triggers are per row);
    json     the same plus building the row's JSON (json_object / to_jsonb);
    outbox   the same JSON row into a table shaped like oncefire's outbox (text primary key,
             the partial routing index), with a cheap id: what the outbox's indexes add;
    oncefire oncefire's real trigger (an on_row_inserted function watching the table).

Each rate is the median of --runs runs, the tables and sinks emptied before each; the ratio is
against `none`. The load average is written beside the figures (the CPU is shared).

    python bench/tables_floor.py --bulk 100000 --runs 3
"""

from __future__ import annotations

import os
import time
from typing import Any

from benchlib import BENCH, common_args, log, summarize, write_json
from tables import Database, watch, with_transaction

VARIANTS = ("none", "bare", "copy", "stamped", "json", "outbox", "oncefire")
TABLE = {v: f"t_floor_{v}" for v in VARIANTS} | {"oncefire": "t_bench_watched"}
SINKS = (
    "floor_sink_bare",
    "floor_sink_copy",
    "floor_sink_stamped",
    "floor_sink_json",
    "floor_sink_outbox",
)
COLUMNS = "id INTEGER PRIMARY KEY, status TEXT, amount INTEGER, note TEXT"

SQLITE_JSON = (
    "json_object('id', NEW.id, 'status', NEW.status, 'amount', NEW.amount, 'note', NEW.note)"
)
SQLITE_SETUP = [
    "CREATE TABLE floor_sink_bare (x INTEGER)",
    "CREATE TABLE floor_sink_copy (id INTEGER, status TEXT, amount INTEGER, note TEXT)",
    "CREATE TABLE floor_sink_stamped (ms INTEGER, type TEXT, id INTEGER, status TEXT, "
    "amount INTEGER, note TEXT)",
    "CREATE TABLE floor_sink_json (x INTEGER, data TEXT)",
    "CREATE TABLE floor_sink_outbox (id TEXT PRIMARY KEY, source TEXT NOT NULL, data TEXT NOT "
    "NULL, routing TEXT)",
    "CREATE INDEX floor_sink_outbox_routing ON floor_sink_outbox (routing, id) "
    "WHERE routing IS NOT NULL",
    "CREATE TRIGGER floor_bare AFTER INSERT ON t_floor_bare BEGIN "
    "INSERT INTO floor_sink_bare VALUES (NEW.id); END",
    "CREATE TRIGGER floor_copy AFTER INSERT ON t_floor_copy BEGIN "
    "INSERT INTO floor_sink_copy VALUES (NEW.id, NEW.status, NEW.amount, NEW.note); END",
    "CREATE TRIGGER floor_stamped AFTER INSERT ON t_floor_stamped BEGIN "
    "INSERT INTO floor_sink_stamped VALUES (CAST((julianday('now') - 2440587.5) * 86400000 "
    "AS INTEGER), 'row.inserted', NEW.id, NEW.status, NEW.amount, NEW.note); END",
    "CREATE TRIGGER floor_json AFTER INSERT ON t_floor_json BEGIN "
    f"INSERT INTO floor_sink_json VALUES (NEW.id, {SQLITE_JSON}); END",
    "CREATE TRIGGER floor_outbox AFTER INSERT ON t_floor_outbox BEGIN "
    "INSERT INTO floor_sink_outbox VALUES (printf('%012d', NEW.id), 't/' || NEW.id, "
    f"{SQLITE_JSON}, 'new'); END",
]
POSTGRES_SETUP = [
    "CREATE TABLE floor_sink_bare (x integer)",
    "CREATE TABLE floor_sink_copy (id integer, status text, amount integer, note text)",
    "CREATE TABLE floor_sink_stamped (ms bigint, type text, id integer, status text, "
    "amount integer, note text)",
    "CREATE TABLE floor_sink_json (x integer, data jsonb)",
    "CREATE TABLE floor_sink_outbox (id text PRIMARY KEY, source text NOT NULL, data jsonb NOT "
    "NULL, routing text)",
    "CREATE INDEX floor_sink_outbox_routing ON floor_sink_outbox (routing, id) "
    "WHERE routing IS NOT NULL",
    "CREATE FUNCTION floor_bare() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO floor_sink_bare SELECT id FROM new_rows; RETURN NULL; END $$",
    "CREATE FUNCTION floor_copy() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO floor_sink_copy SELECT * FROM new_rows; RETURN NULL; END $$",
    "CREATE FUNCTION floor_stamped() RETURNS trigger LANGUAGE plpgsql AS $$ DECLARE ms bigint "
    ":= floor(extract(epoch FROM clock_timestamp()) * 1000); BEGIN "
    "INSERT INTO floor_sink_stamped SELECT ms, 'row.inserted', n.* FROM new_rows n; "
    "RETURN NULL; END $$",
    "CREATE FUNCTION floor_json() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO floor_sink_json SELECT id, to_jsonb(n) FROM new_rows n; RETURN NULL; END $$",
    "CREATE FUNCTION floor_outbox() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO floor_sink_outbox SELECT lpad(id::text, 12, '0'), 't/' || id, to_jsonb(n), "
    "'new' FROM new_rows n; RETURN NULL; END $$",
    *(
        f"CREATE TRIGGER floor_{v} AFTER INSERT ON t_floor_{v} REFERENCING NEW TABLE AS "
        f"new_rows FOR EACH STATEMENT EXECUTE FUNCTION floor_{v}()"
        for v in ("bare", "copy", "stamped", "json", "outbox")
    ),
]


def prepare(db: Database) -> None:
    """The variants' tables and triggers, beside the watched table `tables.Database` made."""
    for variant in VARIANTS[:-1]:
        db.conn.execute(f"CREATE TABLE {TABLE[variant]} ({COLUMNS})")
    for statement in SQLITE_SETUP if db.kind == "sqlite" else POSTGRES_SETUP:
        db.conn.execute(statement)


def reset(db: Database) -> None:
    for table in (*TABLE.values(), *SINKS, "oncefire_events"):
        db.conn.execute(f"DELETE FROM {table}")
    db.empty_row_changes()
    if db.kind == "postgres":
        db.conn.execute("VACUUM")
    db.settle()


def bulk(db: Database, table: str, count: int) -> float:
    sql = f"INSERT INTO {table} " + db.series.format(start=1, end=count)
    t0 = time.perf_counter()
    with_transaction(db.conn, lambda: db.conn.execute(sql))
    return count / (time.perf_counter() - t0)


def measure(kind: str, count: int, runs: int) -> dict[str, Any]:
    db = Database(kind)
    watch(db.url)
    prepare(db)
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for run in range(runs):
        order = VARIANTS if run % 2 == 0 else tuple(reversed(VARIANTS))
        for variant in order:
            reset(db)
            rates[variant].append(bulk(db, TABLE[variant], count))
        figures = ", ".join(f"{v} {rates[v][-1]:,.0f}" for v in VARIANTS)
        log(f"  {kind} run {run + 1}/{runs}: {figures}")
    db.conn.close()
    plain = summarize(rates["none"])["median"]
    result: dict[str, Any] = {}
    for variant in VARIANTS:
        median = summarize(rates[variant])["median"]
        result[variant] = {
            "rows_per_s": round(median),
            "ratio": round(median / plain, 3),
            "runs": [round(r) for r in rates[variant]],
        }
    return result


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--bulk", type=int, default=100_000, help="rows of the bulk INSERT")
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    kinds = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    load_before = os.getloadavg()
    results = {kind: measure(kind, args.bulk, args.runs) for kind in kinds}
    out = {
        "bulk": args.bulk,
        "runs": args.runs,
        "load_average": {
            "before": [round(x, 2) for x in load_before],
            "after": [round(x, 2) for x in os.getloadavg()],
        },
        "cpus": os.cpu_count(),
        "results": results,
    }
    write_json(args.json or BENCH / "tables_floor.json", out)


if __name__ == "__main__":
    main()
