"""Issue 17's goals for triggers on the application's own tables, on SQLite and PostgreSQL side
by side: what a watched table costs the application's writes, against the same table unwatched.

1. one-row INSERT transactions (goal: >= 70 % of the unwatched rate);
2. one INSERT ... SELECT of --bulk rows in one transaction (goal: >= 50 %);
3. one-row UPDATE transactions of a column no function watches (goal: >= 95 %).

The application writes through the raw driver (sqlite3 in WAL with synchronous=FULL, as
oncefire opens its file; psycopg with synchronous_commit on), on the store's own database. The
watched table has an on_row_inserted function and an on_row_updated(columns=["status"]) one;
no worker runs, so the cost measured is the trigger's one INSERT into oncefire_row_changes.
Watched and unwatched are measured alternately in each run, the outbox emptied before each.

    python bench/tables.py --rows 1000 --bulk 100000 --runs 3    # the issue's bulk size
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from benchlib import PG_ADMIN_URL, WORK, common_args, log, summarize, write_json

from oncefire import App

DATABASE = "test_tables_bench"  # this branch's own database, never a shared one
TABLES = ("t_bench_watched", "t_bench_plain")
GOALS = {"one_row_insert": 0.70, "bulk_insert": 0.50, "unwatched_column_update": 0.95}


class Database:
    """The application's connection, with the statements of each measure per dialect."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.conn: Any
        if kind == "sqlite":
            WORK.mkdir(parents=True, exist_ok=True)
            path = WORK / "tables.db"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            self.url = f"sqlite:///{path}"
            App(self.url).store.migrate()  # oncefire's file: WAL, then the app's connection
            self.conn = sqlite3.connect(path, isolation_level=None, timeout=30)
            self.conn.execute("PRAGMA synchronous = FULL")
            self.param = "?"
            self.series = (
                "WITH RECURSIVE n(i) AS (SELECT {start} UNION ALL SELECT i + 1 FROM n "
                "WHERE i < {end}) SELECT i, 'new', i, 'x' FROM n"
            )
        else:
            import psycopg

            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}"')
                admin.execute(f'CREATE DATABASE "{DATABASE}"')
            self.url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{DATABASE}"
            self.conn = psycopg.connect(self.url, autocommit=True)
            self.param = "%s"
            self.series = "SELECT i, 'new', i, 'x' FROM generate_series({start}, {end}) AS i"
        for table in TABLES:
            self.conn.execute(
                f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, status TEXT, amount INTEGER, "
                "note TEXT)"
            )

    def reset(self) -> None:
        """Empty both tables and the outbox."""
        for table in (*TABLES, "oncefire_events"):
            self.conn.execute(f"DELETE FROM {table}")
        self.empty_row_changes()
        self.settle()

    def empty_row_changes(self) -> None:
        """Empty the table triggers write into (from schema 16 on; an older tree measured
        against this one has none)."""
        with suppress(Exception):
            self.conn.execute("DELETE FROM oncefire_row_changes")

    def row_changes(self) -> int:
        """How many row changes the triggers have captured and no worker moved yet."""
        return int(self.conn.execute("SELECT count(*) FROM oncefire_row_changes").fetchone()[0])

    def settle(self) -> None:
        """Write back what earlier phases left (SQLite's WAL, PostgreSQL's dirty pages), so a
        phase does not pay for the one before."""
        if self.kind == "sqlite":
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            self.conn.execute("CHECKPOINT")

    def one_row_inserts(self, table: str, count: int) -> float:
        sql = f"INSERT INTO {table} VALUES ({self.param}, 'new', 5, 'x')"
        t0 = time.perf_counter()
        for i in range(count):
            self.conn.execute(sql, (i,))
        return count / (time.perf_counter() - t0)

    def bulk_insert(self, table: str, count: int) -> float:
        sql = f"INSERT INTO {table} " + self.series.format(start=1, end=count)
        t0 = time.perf_counter()
        with_transaction(self.conn, lambda: self.conn.execute(sql))
        return count / (time.perf_counter() - t0)

    def note_updates(self, table: str, count: int) -> float:
        sql = f"UPDATE {table} SET note = {self.param} WHERE id = {self.param}"
        t0 = time.perf_counter()
        for i in range(count):
            self.conn.execute(sql, (f"n{i}", i))
        return count / (time.perf_counter() - t0)


def with_transaction(conn: Any, body: Callable[[], Any]) -> None:
    conn.execute("BEGIN")
    body()
    conn.execute("COMMIT")


def watch(url: str) -> None:
    """Register the watched table's functions and install its triggers."""
    app = App(url)

    @app.on_row_inserted("t_bench_watched")
    def placed(event: Any) -> None: ...

    @app.on_row_updated("t_bench_watched", columns=["status"])
    def paid(event: Any) -> None: ...

    log(f"  {app.watch_tables()}")
    app.close()


def measure(kind: str, rows: int, bulk: int, runs: int) -> dict[str, Any]:
    db = Database(kind)
    watch(db.url)
    figures: dict[str, dict[str, list[float]]] = {g: {t: [] for t in TABLES} for g in GOALS}
    unwatched_captures = 0
    for run in range(runs):
        for table in TABLES if run % 2 == 0 else reversed(TABLES):
            db.reset()
            figures["one_row_insert"][table].append(db.one_row_inserts(table, rows))
            db.settle()
            captured = db.row_changes()
            figures["unwatched_column_update"][table].append(db.note_updates(table, rows))
            # An update of the unwatched column runs no trigger: it captures nothing.
            unwatched_captures += db.row_changes() - captured
            db.reset()
            figures["bulk_insert"][table].append(db.bulk_insert(table, bulk))
        log(f"  {kind} run {run + 1}/{runs} done")
    result: dict[str, Any] = {}
    for goal, by_table in figures.items():
        watched = summarize(by_table["t_bench_watched"])["median"]
        plain = summarize(by_table["t_bench_plain"])["median"]
        ratio = watched / plain
        result[goal] = {
            "watched_rows_per_s": round(watched),
            "unwatched_rows_per_s": round(plain),
            "ratio": round(ratio, 3),
            "goal": GOALS[goal],
            "met": ratio >= GOALS[goal],
        }
        log(f"  {kind} {goal}: {watched:,.0f} vs {plain:,.0f} rows/s = {ratio:.0%}")
    result["unwatched_column_update"]["row_changes_captured"] = unwatched_captures
    db.conn.close()
    return result


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--rows", type=int, default=1000, help="one-row transactions per run")
    parser.add_argument("--bulk", type=int, default=100_000, help="rows of the bulk INSERT")
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    kinds = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    load_before = os.getloadavg()
    results = {kind: measure(kind, args.rows, args.bulk, args.runs) for kind in kinds}
    out = {
        "rows": args.rows,
        "bulk": args.bulk,
        "runs": args.runs,
        # The CPU is shared: the 1, 5 and 15 minute load averages around the measures.
        "load_average": {
            "before": [round(x, 2) for x in load_before],
            "after": [round(x, 2) for x in os.getloadavg()],
        },
        "cpus": os.cpu_count(),
        "results": results,
    }
    write_json(args.json, out)


if __name__ == "__main__":
    main()
