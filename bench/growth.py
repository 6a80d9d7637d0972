"""Scenario 4, growth: every measure on an empty store and on one holding a large history,
side by side in one run, on SQLite and on PostgreSQL.

The history (growth_seed.py) is made by the database from the rows one real success and
one real dead letter leave: 10,000,000 finished deliveries and 1,000,000 dead letters by
default, with a 1,000,000-document collection queried by a declared field and 1,000,000
documents under a TTL policy (nothing due). It is built once and kept between sittings
(bench/.work for SQLite, the oncefire_growth_bench database for PostgreSQL); each run
removes what it added. Every run places the same backlog the same way on both stores
(growth_store.place_backlog), then measures: the drain of n events by two worker
processes (keeping the whole history: KEEP_HISTORY), document writes one transaction each,
`stats()` over 24 hours, `dead_letters.count()` and `list(limit=50)`, a query by the
declared field with limit 10 (time and traced memory), and a TTL sweep with nothing due
(and its index probe alone).
The loaded/empty ratio of drain and write rates is given with its spread (the ratio of the
extremes); a spread that holds 1 reads "no measurable change".

    python bench/growth.py --store both                      # the full sizes (build: see RESULTS)
    python bench/growth.py --store both --quick              # small sizes, to see it work
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from typing import Any

import workload
from benchlib import LoadSampler, common_args, facts, log, phase, summarize, write_json
from drain import Setup, describe_run, drain_backlog
from growth_seed import EXPIRING, QUERIED, connect
from growth_store import (
    backlog_rows,
    empty_store,
    loaded_store,
    place_backlog,
    remove_added,
)
from oncefire_harness import WORKER_PROCESSES, Target, write_each

from oncefire.features import ttl
from oncefire.model.index_keys import expired_ranges

REPEAT = 20
# The drains' workers keep the whole history. The history's times span the last 7 days, the
# default retention, so from its build on its oldest part is due for purging, and the loaded
# store's workers would purge it during their drains only, more the older the build
# (docs/performance.md, "How the benchmark measures"). What retention's purge costs is the
# soak's measure (bench/soak.py).
KEEP_HISTORY = Setup(
    "defaults, history kept", WORKER_PROCESSES, (("succeeded_retention", str(365 * 86400)),)
)
FULL = {"history": 10_000_000, "dead": 1_000_000, "queried": 1_000_000, "expiring": 1_000_000}
QUICK = {"history": 20_000, "dead": 2_000, "queried": 10_000, "expiring": 10_000}


def timed_ms(call: Any, repeat: int = REPEAT) -> float:
    """The median time of a call in milliseconds (after one call to warm up)."""
    call()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def traced_kib(call: Any) -> float:
    """The peak of memory Python allocates during a call, in KiB."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1] / 1024
    finally:
        tracemalloc.stop()


def measure(
    t: Target, backlog: dict[str, Any], first_id: int, n: int, writes: int, max_seconds: float
) -> dict[str, Any]:
    """One run on one store: the backlog placed and drained, then the reads."""
    with phase(f"the backlog of {n:,} in place"):
        place_backlog(t, backlog, first_id)
    pages = backlog_pages(t)
    drained = drain_backlog(t, "noop", n, max_seconds, setup=KEEP_HISTORY)
    app = workload.build(t.url, "noop")
    queried = app.db.collection(QUERIED)
    queried.index("status")  # declared already on the loaded store: nothing to do
    app.ttl(EXPIRING, field="expires_at")
    query = queried.where("status", "==", "s17").limit(10)
    try:
        with phase(f"{writes:,} writes"):
            written, seconds = write_each(app, writes, "w", max_seconds)
        with phase("stats, dead letters, query, TTL sweep"):
            figures = {
                "stats_ms": timed_ms(lambda: app.stats(86400), 3),
                "count_ms": timed_ms(lambda: app.dead_letters.count()),
                "list_ms": timed_ms(lambda: app.dead_letters.list(limit=50)),
                "query_ms": timed_ms(query.get),
                "query_kib": traced_kib(query.get),
                "query_found": len(query.get()),
                "sweep_ms": timed_ms(lambda: ttl.sweep(app.runtime)),
                "probe_ms": timed_ms(
                    lambda: app.store.expired_paths(
                        EXPIRING, "expires_at", expired_ranges(app.clock.now()), 500
                    )
                ),
            }
    finally:
        app.close()
    return {
        "drain": drained,
        "drain_rate": drained["rate"],
        "write_rate": written / seconds,
        "capped": drained["capped"],
        "backlog_pages": pages,
        **figures,
    }


def backlog_pages(t: Target) -> int | None:
    """PostgreSQL: the heap pages the backlog's deliveries lie on (a backlog spread one a page
    over the history makes every lease read and dirty a page a delivery). None on SQLite,
    whose rows lie in id order."""
    if t.kind != "postgres":
        return None
    with connect(t) as conn:
        row = conn.execute(
            "SELECT count(DISTINCT (ctid::text::point)[0]) FROM oncefire_deliveries"
            " WHERE state = 'pending'"
        ).fetchone()
    return int(row[0])


def ratio(
    empty_rates: list[float | None], loaded_rates: list[float | None]
) -> dict[str, Any] | None:
    """loaded / empty as a ratio of medians, with the spread of the extremes; None when a
    run was not timed (a smoke run's few hundred events can drain between two counts)."""
    empty = [r for r in empty_rates if r]
    loaded = [r for r in loaded_rates if r]
    if len(empty) < len(empty_rates) or len(loaded) < len(loaded_rates) or not empty:
        return None
    med = statistics.median(loaded) / statistics.median(empty)
    low, high = min(loaded) / max(empty), max(loaded) / min(empty)
    reads = "no measurable change" if low <= 1 <= high else f"{med - 1:+.0%}"
    return {"ratio": med, "low": low, "high": high, "reads": reads}


def said(r: dict[str, Any] | None) -> str:
    """What a ratio reads as, or that it was not timed."""
    return "not timed" if r is None else str(r["reads"])


def run_store(kind: str, sizes: dict[str, int], args: Any) -> dict[str, Any]:
    """Every run on the empty and on the loaded store of one kind, alternating."""
    started = time.monotonic()
    live, marks = loaded_store(kind, sizes, args.in_place)
    log(
        f"growth on {live.label}: {marks['deliveries']:,} deliveries, {marks['dead']:,} dead"
        f" letters (ready in {time.monotonic() - started:.0f} s)"
    )
    with phase(f"a backlog of {args.n:,} written through oncefire once"):
        backlog = backlog_rows(kind, args.n)
    first_id = int(marks["delivery"]) + 1  # the same ids on both stores
    empty: list[dict[str, Any]] = []
    loaded: list[dict[str, Any]] = []
    for run in range(args.runs):
        log(f"growth on {live.label}, run {run + 1}/{args.runs}: {args.n:,} events")
        fresh = empty_store(kind)
        empty.append(measure(fresh, backlog, first_id, args.n, args.writes, args.max_seconds))
        describe_run("empty store drain", empty[-1]["drain"])
        try:
            loaded.append(measure(live, backlog, first_id, args.n, args.writes, args.max_seconds))
        finally:
            with phase("remove what the run added"):
                remove_added(live, marks)
        describe_run("loaded store drain", loaded[-1]["drain"])
    figures = [k for k in empty[0] if k not in ("drain", "capped") and empty[0][k] is not None]
    return {
        "store": kind,
        "history": marks["deliveries"] - marks["dead"],
        "dead_letters": marks["dead"],
        "queried": sizes["queried"],
        "expiring": sizes["expiring"],
        "n": args.n,
        "empty": {f: summarize([r[f] for r in empty]) for f in figures},
        "loaded": {f: summarize([r[f] for r in loaded]) for f in figures},
        "drain_ratio": ratio([r["drain_rate"] for r in empty], [r["drain_rate"] for r in loaded]),
        "write_ratio": ratio([r["write_rate"] for r in empty], [r["write_rate"] for r in loaded]),
        "capped": any(r["capped"] for r in empty + loaded),
        "empty_runs": empty,
        "loaded_runs": loaded,
    }


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--quick", action="store_true", help="small sizes: " + str(QUICK))
    for name, value in FULL.items():
        parser.add_argument(f"--{name}", type=int, default=None, help=f"default {value:,}")
    parser.add_argument("--n", type=int, default=20_000, help="backlog events a run drains")
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="SQLite: measure on the kept history file itself, not a copy of it",
    )
    args = parser.parse_args()
    sizes = {k: v if getattr(args, k) is None else getattr(args, k) for k, v in FULL.items()}
    if args.quick:
        sizes = {k: QUICK[k] if getattr(args, k) is None else getattr(args, k) for k in FULL}
    kinds = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with LoadSampler() as sampler:
        results = {kind: run_store(kind, sizes, args) for kind in kinds}
    for r in results.values():
        r["facts"] = facts(sampler, started)
    for kind, r in results.items():
        log(
            f"{kind}: drain {said(r['drain_ratio'])}, writes {said(r['write_ratio'])};"
            f" stats {r['loaded']['stats_ms']['median']:.1f} ms,"
            f" count {r['loaded']['count_ms']['median']:.2f} ms,"
            f" list {r['loaded']['list_ms']['median']:.2f} ms,"
            f" query {r['loaded']['query_ms']['median']:.2f} ms"
            f" ({r['loaded']['query_kib']['median']:.0f} KiB),"
            f" sweep {r['loaded']['sweep_ms']['median']:.2f} ms"
            f" (probe {r['loaded']['probe_ms']['median']:.2f} ms)"
        )
    write_json(
        args.json,
        {"scenario": "growth", **results[kinds[0]]} if len(kinds) == 1 else results,
    )


if __name__ == "__main__":
    main()
