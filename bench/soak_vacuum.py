"""VACUUM the PostgreSQL soak's tables every minute, beside a running bench/soak.py, where the
server runs with autovacuum off (`SHOW autovacuum`): what autovacuum would do, done by hand,
so that the soak shows whether batched deletes plus vacuum keep the tables flat.

Each round runs `VACUUM` on every oncefire table of the soak's database and records when it
started, how long it took and the tables' total size after it.

    python bench/soak_vacuum.py --minutes 25 --json bench/soak-postgres-vacuum.json
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg
from benchlib import log, write_json
from harness import target
from psycopg import sql

SIZE = (
    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'oncefire%%'"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=25.0)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between rounds")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    t = target("postgres", "oncefire_soak")
    rounds: list[dict[str, Any]] = []
    started = time.monotonic()
    with psycopg.connect(t.url, autocommit=True) as conn:
        row = conn.execute("SHOW autovacuum").fetchone()
        autovacuum = row[0] if row else "?"
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                " AND tablename LIKE 'oncefire%%'"
            ).fetchall()
        ]
        while time.monotonic() - started < args.minutes * 60:
            at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            t0 = time.monotonic()
            for table in tables:
                conn.execute(sql.SQL("VACUUM {}").format(sql.Identifier(table)))
            size = conn.execute(SIZE).fetchone()
            rounds.append(
                {
                    "at": at,
                    "seconds": round(time.monotonic() - t0, 2),
                    "store_bytes": int(size[0]) if size else 0,
                }
            )
            log(f"  VACUUM at {at}: {rounds[-1]['seconds']} s, {rounds[-1]['store_bytes']:,} B")
            if args.json:
                write_json(args.json, {"autovacuum": autovacuum, "rounds": rounds})
            time.sleep(max(0.0, t0 + args.every - time.monotonic()))
    write_json(args.json, {"autovacuum": autovacuum, "rounds": rounds})


if __name__ == "__main__":
    main()
