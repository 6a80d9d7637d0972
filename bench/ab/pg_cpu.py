"""The PostgreSQL server's CPU against its commits, sampled while something else runs: every
--every seconds, the utime and stime of every postgres process on this machine (from /proc)
and the commits of every database (pg_stat_database), printed as the share of a core the
server used, commits a second, and the server's CPU per commit. Start it beside a drain and
read the lines of its steady part.

    python bench/ab/pg_cpu.py --samples 15 & python bench/ab/per_event_drain.py --store postgres
"""

from __future__ import annotations

import argparse
import os
import time

import psycopg

URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def server_cpu() -> float:
    """CPU seconds used so far by the processes named postgres."""
    ticks = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                text = stat.read()
        except OSError:
            continue  # it ended meanwhile
        if text[text.index("(") + 1 : text.rindex(")")].startswith("postgres"):
            fields = text[text.rindex(")") + 2 :].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def commits(conn: psycopg.Connection[tuple[int]]) -> int:
    """Transactions committed in every database so far."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute("SELECT sum(xact_commit)::bigint FROM pg_stat_database").fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--every", type=float, default=2.0)
    args = parser.parse_args()
    with psycopg.connect(URL, autocommit=True) as conn:
        before = (server_cpu(), commits(conn), time.monotonic())
        for _ in range(args.samples):
            time.sleep(args.every)
            now = (server_cpu(), commits(conn), time.monotonic())
            cpu, done, spent = (now[i] - before[i] for i in range(3))
            print(
                f"{time.strftime('%H:%M:%S')} server {100 * cpu / spent:4.0f} % of a core, "
                f"{done / spent:6.0f} commits/s, {1e6 * cpu / max(1, done):6.0f} µs a commit",
                flush=True,
            )
            before = now


if __name__ == "__main__":
    main()
