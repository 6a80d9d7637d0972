"""The floor of per-event acknowledgement on PostgreSQL: how many events a second 16 processes
can settle, a durable commit an event, when each runs nothing but the two statements such a
queue needs, by hand, on oncefire's own tables. Beside oncefire's per-event drain (16
processes x 1 thread, batch_size 1: `bench/throughput.py`) it says how much of the time is
the database's and the machine's, whatever a worker does in Python.

Each process loops: one transaction that ends the delivery it ran (the delivery made
succeeded and its attempt written, one statement) and leases the next due one (`FOR UPDATE
SKIP LOCKED`, its event's payload read in the same statement), then commits; the function is
a no-op. No hour buckets, no solo or ordering rules, no lease renewal, no statistics: less
than oncefire must do, so a floor of its cost. `--pipelined` sends the transaction's four
statements (BEGIN, end, lease, COMMIT) in one round trip. `--begin`, `--lease` and `--end
oncefire` put oncefire's own statement in that place instead (its turn's BEGIN with its
settings, `lease_due`, `end_succeeded_many`, with the arguments its store passes);
`--oncefire-sql` all three: what oncefire's SQL costs, without its worker around it.

The backlog is oncefire's (documents written by the App with one trigger, untimed); once
2.5 % has run, the events settled within a window (--window seconds) are counted, as in the
throughput scenario.

    python bench/ab/per_event_floor.py --n 60000 --window 10 --runs 3
    python bench/ab/per_event_floor.py --n 60000 --window 10 --runs 3 --pipelined
    python bench/ab/per_event_floor.py --n 60000 --window 10 --runs 3 --oncefire-sql
    python bench/ab/per_event_floor.py --n 60000 --runs 3 --begin oncefire --end oncefire
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROCESSES = 16

LEASE = """
WITH due AS (
    SELECT id FROM oncefire_deliveries
    WHERE state = 'pending' AND run_at <= %(now)s
    ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED
)
UPDATE oncefire_deliveries d SET state = 'running', lease_token = %(token)s,
    lease_until = %(until)s, worker = %(worker)s, attempt = d.attempt + 1, started_at = %(now)s
FROM due WHERE d.id = due.id
RETURNING d.id, d.function, d.attempt, (SELECT data FROM oncefire_events e WHERE e.id = d.event_id)
"""

END = """
WITH d AS (
    UPDATE oncefire_deliveries SET state = 'succeeded', lease_token = NULL, lease_until = NULL,
        finished_at = %(finished)s
    WHERE id = %(id)s AND lease_token = %(token)s
    RETURNING id, event_id, function, attempt, worker, started_at
)
INSERT INTO oncefire_attempts (delivery_id, event_id, function, number, worker, started_at,
    finished_at, outcome)
SELECT id, event_id, function, attempt, worker, started_at, %(finished)s, 'succeeded' FROM d
"""


class Turn:
    """The statements of one process's turn, each the least one or oncefire's own (with the
    arguments PostgresStore passes for one delivery at a time)."""

    def __init__(self, begin: str, lease: str, end: str, worker: str) -> None:
        from oncefire.buckets import DURATION_BOUNDS
        from oncefire.stores.postgres import SQL

        self.begin = SQL["begin_turn"] if begin == "oncefire" else "BEGIN"
        self.lease_sql = SQL["lease_due"] if lease == "oncefire" else LEASE
        self.end_sql = SQL["end_succeeded_many"] if end == "oncefire" else END
        self.is_oncefire_lease = lease == "oncefire"
        self.is_oncefire_end = end == "oncefire"
        self.bounds = list(DURATION_BOUNDS)
        self.worker = worker

    def lease(self, token: str, now: float) -> dict[str, Any]:
        if not self.is_oncefire_lease:
            return {"now": now, "token": token, "until": now + 60, "worker": self.worker}
        return {
            "token": token,
            "now": now,
            "lease_until": now + 60,
            "worker": self.worker,
            "limit": 1,
            "free": ["noop"],
            "ids": [],
            "is_alone": False,
            "is_ahead": True,
            "free_slots": 1,
        }

    def end(self, delivery_id: int, token: str, finished: float) -> dict[str, Any]:
        if not self.is_oncefire_end:
            return {"id": delivery_id, "token": token, "finished": finished}
        return {
            "ids": [delivery_id],
            "tokens": [token],
            "finished": [finished],
            "started": [finished],
            "cpu": [0.0],
            "reads": [0],
            "writes": [0],
            "bounds": self.bounds,
            "completions": "[]",
        }


def loop(url: str, index: int, done: Any, kinds: tuple[str, str, str], is_pipelined: bool) -> None:
    """Settle deliveries one commit each until none is due; done[index] counts them."""
    import psycopg

    turn = Turn(*kinds, worker=f"floor-{index}")
    with psycopg.connect(url, autocommit=True) as conn:
        ran: dict[str, Any] | None = None
        while True:
            now = time.time()
            token = uuid.uuid4().hex
            lease = turn.lease(token, now)
            if is_pipelined:
                with conn.pipeline():
                    conn.execute(turn.begin)
                    if ran is not None:
                        conn.execute(turn.end_sql, ran)
                    cursor = conn.execute(turn.lease_sql, lease)
                    conn.execute("COMMIT")
                row = cursor.fetchone()
            else:
                conn.execute(turn.begin)
                try:
                    if ran is not None:
                        conn.execute(turn.end_sql, ran)
                    row = conn.execute(turn.lease_sql, lease).fetchone()
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            if ran is not None:
                done[index] += 1
            if row is None:
                return
            # The row holds the event's payload, decoded by psycopg as a worker reads it; the
            # function is a no-op.
            ran = turn.end(row[0], token, time.time())


def window_rate(done: Any, total: int, window: float, procs: list[Any]) -> float:
    """Events a second settled over `window` seconds once 2.5 % were settled, timed as the
    throughput scenario times every system (benchlib.time_window)."""
    from benchlib import time_window

    def remaining() -> int:
        if any(p.exitcode not in (None, 0) for p in procs):  # 0: it found nothing due
            raise SystemExit("a process of the floor failed: see its error above")
        return total - int(sum(done))

    result = time_window(
        remaining, lambda: remaining() > 0, total, warmup=max(1, total // 40), window=window
    )
    if result["capped"] or result["short"]:
        raise SystemExit(f"the backlog of {total:,} ran out or never started: see --n")
    return float(result["rate"])


def run_once(n: int, window: float, kinds: tuple[str, str, str], is_pipelined: bool) -> float:
    import workload
    from harness import prefill, reset, target

    t = target("postgres")
    reset(t)
    app = workload.build(t.url, "noop")
    prefill(app, n)
    app.close()
    import psycopg

    with psycopg.connect(t.url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    done = mp.Array("q", PROCESSES, lock=False)
    procs = [
        mp.Process(target=loop, args=(t.url, i, done, kinds, is_pipelined))
        for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    try:
        rate = window_rate(done, n, window, procs)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=60_000)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pipelined", action="store_true")
    kinds = ["least", "oncefire"]
    parser.add_argument("--begin", choices=kinds, default="least", help="the turn's BEGIN")
    parser.add_argument("--lease", choices=kinds, default="least")
    parser.add_argument("--end", choices=kinds, default="least")
    parser.add_argument("--oncefire-sql", action="store_true", help="oncefire's three")
    args = parser.parse_args()
    os.environ.setdefault("BENCH_DB_SUFFIX", "_floor")
    chosen = ("oncefire",) * 3 if args.oncefire_sql else (args.begin, args.lease, args.end)
    if args.pipelined and chosen[0] == "oncefire":
        parser.error("oncefire's BEGIN is several statements in one: it cannot be pipelined")
    rates = [run_once(args.n, args.window, chosen, args.pipelined) for _ in range(args.runs)]
    shown = " / ".join(f"{r:,.0f}" for r in rates)
    kind = ", ".join(
        f"{part}: {k}" for part, k in zip(("begin", "lease", "end"), chosen, strict=True)
    )
    kind += ", pipelined" if args.pipelined else ""
    print(
        f"per-event floor ({kind}), {PROCESSES} processes: {shown} events/s, "
        f"median {statistics.median(rates):,.0f}"
    )


if __name__ == "__main__":
    main()
