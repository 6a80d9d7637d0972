"""The soak: a steady stream of events for an hour, with retention set short, while the store's
size and the workers' memory are recorded every minute. Both must stay flat.

A producer writes `--rate` documents a second (a transaction of rate/10 every 100 ms) on
"bench/{id}", each starting bench/workload.py's "soak" function (a no-op with retry=False),
and deletes the documents written `--window` seconds earlier, so the documents themselves
stay a fixed number and what could grow is the history: events, deliveries, attempts. Two
worker processes (`oncefire worker`) run the deliveries. Retention (`--retention` seconds)
is set on the producer's App (`App(url, succeeded_retention=...)`) and on the workers
(ONCEFIRE_SUCCEEDED_RETENTION, ...): the Settings fields named in RETAINED.

The function runs with retry=False because a retention shorter than a function's
max_event_age plus its retry window is refused at registration, and the default
RetryPolicy's window is 1,860 s: with retries on, 600 s of retention would be refused.
statistics_retention is left as is (90 days): statistics are hour buckets, a few rows an
hour, and a retention under an hour would delete the hour being counted.

Every `--sample-every` seconds: the store's size (the SQLite file with its WAL, or the
total size of PostgreSQL's oncefire tables), the workers' resident memory (the process
tree), the events written and the deliveries not yet run.

    python bench/soak.py --store sqlite                      # 60 minutes at 1,000/s
    python bench/soak.py --store postgres --minutes 3 --rate 200 --sample-every 20
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path
from typing import Any

import workload
from benchlib import log, write_json
from oncefire_harness import DOC, Backlog, Target, reset, target, workers

from oncefire import App, OncefireError
from oncefire.settings import Settings

# The history the soak's retention shortens: succeeded deliveries with their attempts and
# events, and events no function took.
RETAINED = ("succeeded_retention", "unrouted_retention")
FUNCTION = "soak"


def retention_overrides(seconds: float | None) -> dict[str, Any]:
    """The retention settings set to `seconds`; a clear exit if this oncefire has none."""
    if seconds is None:
        return {}
    names = {f.name for f in fields(Settings)}
    missing = [name for name in RETAINED if name not in names]
    if missing:
        raise SystemExit(
            f"--retention: this oncefire has no setting {', '.join(missing)}; "
            "run the soak on a version that purges history, or pass --no-retention."
        )
    return dict.fromkeys(RETAINED, seconds)


def store_bytes(t: Target) -> int:
    """The store's size on disk: the SQLite file and its WAL, or PostgreSQL's tables."""
    if t.kind == "sqlite":
        assert t.path is not None
        return sum(
            Path(f"{t.path}{s}").stat().st_size
            for s in ("", "-wal")
            if Path(f"{t.path}{s}").exists()
        )
    import psycopg

    with psycopg.connect(t.url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            " AND c.relname LIKE 'oncefire%%'"
        ).fetchone()
    return int(row[0]) if row else 0


def tree_rss_kib(pid: int) -> int:
    """The resident memory of a process and all its descendants, in KiB (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def produce(app: App, rate: int, window: float, seconds: float, sample: Any, writers: int) -> int:
    """Write `rate` documents a second for `seconds`, deleting those `window` seconds old, in
    `writers` transactions at once a tick; call sample(written) at each of its times. How
    many were written."""
    per_tick, tick = max(writers, rate // 10), 0.1
    col = app.db.collection("bench")
    written, kept = 0, max(1, int(window / tick))
    started = time.monotonic()
    warned = 0.0

    def write(first: int, count: int) -> None:
        with app.db.transaction() as tx:
            for i in range(first, first + count):
                tx.set(col.document(f"s{i}"), DOC)
                if i - kept * per_tick >= 0:
                    tx.delete(col.document(f"s{i - kept * per_tick}"))

    share = per_tick // writers
    with ThreadPoolExecutor(writers) as pool:
        while time.monotonic() - started < seconds:
            firsts = [written + k * share for k in range(writers)]
            counts = [share] * (writers - 1) + [per_tick - share * (writers - 1)]
            list(pool.map(write, firsts, counts))
            written += per_tick
            sample(written)
            pause = started + (written / per_tick) * tick - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            elif -pause > 5 and time.monotonic() - warned > 30:
                warned = time.monotonic()
                log(f"  the producer is {-pause:.0f} s behind {rate}/s")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=1000, help="events a second (default 1000)")
    parser.add_argument("--retention", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--no-retention", action="store_true", help="leave retention as is")
    parser.add_argument("--window", type=float, default=60.0, help="seconds a document lives")
    parser.add_argument("--sample-every", type=float, default=60.0)
    parser.add_argument(
        "--sweep-every",
        type=float,
        default=None,
        help="the workers' ONCEFIRE_SWEEP_EVERY (their purge step runs in each sweep)",
    )
    parser.add_argument(
        "--writers",
        type=int,
        default=None,
        help="transactions written at once a tick (default: 1 on SQLite, 4 on PostgreSQL)",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    overrides = retention_overrides(None if args.no_retention else args.retention)
    t = target(args.store, "soak" if args.store == "sqlite" else "oncefire_soak")
    reset(t)
    try:
        app = App(t.url, **overrides)
        # The workers run bench/workload.py's "soak" no-op; the producer registers it too
        # (the same options), so that its first writes start deliveries whether or not the
        # workers have registered yet.
        app.on_document_created(workload.PATTERN, name=FUNCTION, retry=False)(lambda e: None)
        app.store  # noqa: B018 - the schema before the workers start
    except OncefireError as exc:
        raise SystemExit(f"--retention {args.retention}: {exc}") from exc
    env = {f"ONCEFIRE_{k.upper()}": str(v) for k, v in overrides.items()}
    if args.sweep_every is not None:
        env["ONCEFIRE_SWEEP_EVERY"] = str(args.sweep_every)
    writers = args.writers or (1 if t.kind == "sqlite" else 4)
    samples: list[dict[str, Any]] = []
    backlog = Backlog(t, FUNCTION)
    log(
        f"soak on {t.label}: {args.rate}/s for {args.minutes} min, retention {overrides or 'as is'}"
    )
    started_at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with workers(t, FUNCTION, extra_env=env) as process:
        started = time.monotonic()
        next_sample = started

        def sample(written: int, last: bool = False) -> None:
            nonlocal next_sample
            if not last and time.monotonic() < next_sample:
                return
            next_sample += args.sample_every
            row = {
                "minute": round((time.monotonic() - started) / 60, 2),
                "store_bytes": store_bytes(t),
                "worker_rss_kib": tree_rss_kib(process.pid),
                "written": written,
                "backlog": backlog(),
                "history": backlog.count("SELECT count(*) FROM oncefire_deliveries"),
                "load": round(os.getloadavg()[0], 2),
            }
            samples.append(row)
            log(
                f"  {row['minute']:6.1f} min  store {row['store_bytes'] / 2**20:8.1f} MiB"
                f"  workers {row['worker_rss_kib'] / 1024:7.1f} MiB"
                f"  written {written:,}  backlog {row['backlog']:,}"
                f"  deliveries {row['history']:,}  load {row['load']}"
            )
            if args.json and not last:  # what is known so far, in case the run is cut short
                partial = summarize(samples, args, overrides)
                partial.update(started_at=started_at, complete=False)
                write_json(args.json, partial)

        written = produce(app, args.rate, args.window, args.minutes * 60, sample, writers)
        sample(written, last=True)
        elapsed = time.monotonic() - started
    backlog.close()
    app.close()
    result = summarize(samples, args, overrides)
    result["achieved_rate"] = round(written / elapsed, 1)
    result.update(started_at=started_at, complete=True, server=server_facts(t))
    write_json(args.json, result)


def server_facts(t: Target) -> dict[str, str]:
    """The PostgreSQL server's port and autovacuum setting, read from it (what reclaims the
    deleted rows' space); nothing for SQLite."""
    if t.kind != "postgres":
        return {}
    import psycopg

    with psycopg.connect(t.url, autocommit=True) as conn:
        (autovacuum,) = conn.execute("SHOW autovacuum").fetchone() or ("?",)
        (port,) = conn.execute("SHOW port").fetchone() or ("?",)
    return {"autovacuum": str(autovacuum), "port": str(port)}


def summarize(samples: list[dict[str, Any]], args: Any, overrides: dict[str, float]) -> Any:
    """The samples, and the goals' ratios: size at the end over size at a third of the way
    (20 of 60 minutes), memory at the end over memory at a twelfth (5 of 60 minutes)."""

    def at(fraction: float, key: str) -> float:
        minute = samples[-1]["minute"] * fraction
        return float(min(samples, key=lambda s: abs(s["minute"] - minute))[key])

    last = samples[-1]
    return {
        "scenario": "soak",
        "store": args.store,
        "rate": args.rate,
        "minutes": args.minutes,
        "retention": overrides,
        "sample_every": args.sample_every,
        "sweep_every": args.sweep_every,
        "writers": args.writers or (1 if args.store == "sqlite" else 4),
        "window": args.window,
        "size_growth": last["store_bytes"] / max(1.0, at(1 / 3, "store_bytes")),
        "rss_growth": last["worker_rss_kib"] / max(1.0, at(1 / 12, "worker_rss_kib")),
        "samples": samples,
    }


if __name__ == "__main__":
    main()
