"""RESULTS.md, sections 2-6: write path, latency, growth, poison storm, idempotency."""

from __future__ import annotations

from typing import Any

from report_page import (
    CAPPED,
    DASH,
    LABEL,
    PEER_LABEL,
    Page,
    fig,
    mark,
    med,
    ratio,
)


def write_path(page: Page) -> None:
    page.add(
        "## 2. Write path",
        "",
        "One writer, one transaction per write, no worker running. Raw: a plain one-row "
        "INSERT per transaction on the same database with the same durability (SQLite WAL + "
        "synchronous=FULL; PostgreSQL synchronous_commit on, autocommit). oncefire: "
        "`doc.set({...})` with one trigger registered (the write, its event and its "
        "delivery in one transaction). Document and event only: those two rows by plain SQL "
        "on oncefire's schema, alternated with the others (`bench/plain_sql.py`): the least "
        "a write on this schema can store that commits its event with its document, so its "
        "share of raw is the ceiling of such a write path on this machine.",
        "",
        *apart(page, "write_path"),
    )
    rows = []
    for store in ("sqlite", "postgres"):
        name = f"write_path-{store}"
        why = page.missing(name, store)
        if why:
            rows.append([LABEL[store], why, DASH, DASH, DASH, DASH])
            continue
        w = page.get(name)
        rows.append(
            [
                LABEL[store],
                fig(w.get("raw_commit_rate")),
                fig(w.get("document_write_rate")),
                fig(_percent(w.get("ratio")), 0, " %"),
                fig(w.get("least_rate")),
                fig(_percent(w.get("ratio_least")), 0, " %"),
            ]
        )
    page.table(
        [
            "store",
            "raw one-row commits/s",
            "document writes/s",
            "share of raw",
            "document and event only/s",
            "its share of raw",
        ],
        rows,
    )


def _percent(summary: Any) -> Any:
    if not isinstance(summary, dict) or summary.get("median") is None:
        return None
    return {k: (v * 100 if isinstance(v, float) else v) for k, v in summary.items()} | {
        "runs": [v * 100 for v in summary.get("runs", [])]
    }


def latency(page: Page) -> None:
    writes = page.r["facts"]["sizes"]["latency_writes"]
    page.add(
        "## 3. Latency",
        "",
        f"{writes} sequential writes (enqueues) per run, each waited for, on idle workers in "
        "other processes (the same 2-process set-up as above). From the moment the write or "
        "enqueue call returns to the function's first line, measured on CLOCK_MONOTONIC.",
        "",
    )
    rows = []
    base = {s: med(page.get(f"latency-{s}").get("p50_ms")) for s in ("sqlite", "postgres")}
    for store in ("sqlite", "postgres"):
        name = f"latency-{store}"
        why = page.missing(name, store)
        if why:
            rows.append(["oncefire", LABEL[store], why, DASH, DASH, DASH])
            continue
        lat = page.get(name)
        p50 = med(lat.get("p50_ms"))
        rows.append(
            [
                "oncefire",
                LABEL[store],
                fig(lat.get("p50_ms"), 2),
                fig(lat.get("p99_ms"), 2),
                ratio(p50, base["sqlite"]),
                ratio(p50, base["postgres"]),
            ]
        )
    for peer, (label, broker) in PEER_LABEL.items():
        p = page.peers.get(peer)
        if p is None or "error" in p:
            continue
        p50 = med(p.get("latency_p50_ms"))
        rows.append(
            [
                label,
                broker,
                fig(p.get("latency_p50_ms"), 2),
                fig(p.get("latency_p99_ms"), 2),
                ratio(p50, base["sqlite"]),
                ratio(p50, base["postgres"]),
            ]
        )
    page.table(
        [
            "system",
            "store / broker",
            "p50 ms",
            "p99 ms",
            "p50 ÷ oncefire SQLite",
            "p50 ÷ oncefire PostgreSQL",
        ],
        rows,
    )


def growth(page: Page) -> None:
    page.add(
        "## 4. Growth",
        "",
        "The same measurements on an empty store and on one holding a large history, bulk "
        "loaded by cloning the rows that one real success and one real dead letter leave "
        "(document, event, delivery, attempts), with new ids and times over the past 7 days, "
        "and two large collections made the same way: one queried by a declared field, one "
        "under a TTL policy with nothing due. Each run places the same backlog the same way "
        "on both stores. The drains' workers keep the whole history (a retention of a year): "
        "the cost of retention's purge is the soak's measure. On PostgreSQL the history's "
        "deliveries fill their pages, as oncefire's own churn leaves them, and the pages "
        "each backlog lies on are counted.",
        "",
    )
    for store in ("sqlite", "postgres"):
        name = f"growth-{store}"
        why = page.missing(name, store)
        if why:
            page.add(f"{LABEL[store]}: {why}", "")
            continue
        g = page.get(name)
        page.add(
            f"**{LABEL[store]}**: {g.get('history', 0):,} finished deliveries and "
            f"{g.get('dead_letters', 0):,} dead letters; drains of {g.get('n', 0):,} events"
            + (f" {CAPPED}" if g.get("capped") else "")
            + "."
            + measured_apart(g),
            "",
        )
        rows = []
        for key, label, digits in (
            ("drain_rate", "drain-only events/s", 0),
            ("write_rate", "document writes/s", 0),
            ("stats_ms", "stats() over 24 h, ms", 1),
            ("count_ms", "dead_letters.count() ms", 2),
            ("list_ms", "dead_letters.list(limit=50) ms", 2),
            ("query_ms", "query by a declared field, limit 10, ms", 2),
            ("query_kib", "the query's traced memory, KiB", 0),
            ("sweep_ms", "TTL sweep, nothing due, ms", 2),
            ("probe_ms", "its expiry index probe, ms", 2),
            ("backlog_pages", "heap pages the backlog's deliveries lie on", 0),
        ):
            if key not in g.get("empty", {}):
                continue  # SQLite keeps rows in id order: no pages counted
            empty, loaded = g.get("empty", {}).get(key), g.get("loaded", {}).get(key)
            a, b = med(empty), med(loaded)
            change = f"{b / a - 1:+.0%}" if a and b is not None else DASH
            rows.append([label, fig(empty, digits), fig(loaded, digits), change])
        page.table(["measure", "empty store", "large history", "change"], rows)
        for key, label in (("drain_ratio", "Drain"), ("write_ratio", "Document writes")):
            r = g.get(key)
            if r:
                page.add(
                    f"{label}, large history / empty: {r['ratio']:.2f} (spread "
                    f"{r['low']:.2f} to {r['high']:.2f}): {r['reads']}.",
                    "",
                )


def measured_apart(result: dict[str, Any]) -> str:
    """When a result was measured apart from the page's run: when, at which commit, and the
    load beside it (from the script's own facts, else from its run's stamp)."""
    f = result.get("facts")
    if not isinstance(f, dict):
        run = result.get("run") or {}
        f = {"started_at": run.get("date", "?"), "commit": run.get("commit", "?")}
    said = f" Measured on its own from {f.get('started_at', '?')}"
    said += f" to {f['ended_at']}" if f.get("ended_at") else ""
    said += f" at commit `{f.get('commit', '?')}`"
    if f.get("load_min") is not None:
        said += (
            f", with the machine's 1-minute load average between {f['load_min']:.1f} and "
            f"{f['load_max']:.1f} (the CPU is shared: what"
            " else ran beside it counts)"
        )
    merged = result.get("merged_from")
    return said + (f"; its file `{merged}`." if merged else ".")


def apart(page: Page, scenario: str) -> list[str]:
    """A line for each store whose result of a scenario was measured apart from the page's
    run (measured_apart), then an empty line; nothing when none was."""
    lines = [
        f"{LABEL[store]}:{measured_apart(page.get(f'{scenario}-{store}'))}"
        for store in ("sqlite", "postgres")
        if page.get(f"{scenario}-{store}").get("merged_from")
    ]
    return [*lines, ""] if lines else []


def poison(page: Page) -> None:
    page.add(
        "## 5. Poison storm",
        "",
        "Every event's function raises, on RetryPolicy(max_attempts=6, first_delay=0.05, "
        "multiplier=2, max_delay=1): about 1.6 s of backoff per event. The events are "
        "written in one transaction while 2 warm workers run; timed from its commit until "
        "every delivery is a dead letter. Each must be dead after exactly 6 attempts.",
        "",
    )
    rows = []
    for store in ("sqlite", "postgres"):
        name = f"poison-{store}"
        why = page.missing(name, store)
        if why:
            rows.append([LABEL[store], why, DASH, DASH, DASH, DASH])
            continue
        p = page.get(name)
        runs = p.get("runs", [])
        left = max((r.get("left", 0) for r in runs), default=0)
        rows.append(
            [
                LABEL[store],
                f"{p.get('n', 0):,}",
                fig(p.get("attempts_per_event"), 2),
                poison_verdict(p, left),
                fig(p.get("seconds_to_all_dead"), 1, " s") + mark(p),
                fig(p.get("attempts_per_second")),
            ]
        )
    page.table(
        [
            "store",
            "events",
            "attempts per event",
            "exactly 6 each",
            "time to all dead",
            "attempts/s",
        ],
        rows,
    )


def poison_verdict(p: dict[str, Any], left: int) -> str:
    """Whether every event ended as a dead letter after exactly 6 attempts."""
    wrong = p.get("dead_without_exactly_6", 0)
    if p.get("exactly_6_each"):
        return "yes"
    if left and not wrong:
        return f"every dead letter so far at 6; {left:,} not yet dead when cut short"
    return f"**no**: {wrong:,} dead letters without exactly 6 failed attempts"


def idempotency(page: Page) -> None:
    page.add(
        "## 6. Idempotency overhead",
        "",
        "Cost per event = drain seconds ÷ events (2 worker processes, as in 1). `tx.claim` "
        "is measured inside a transaction that writes one document, against the same "
        "write without the claim; `@idempotent` around a no-op against the no-op. "
        "Statements per event are counted in in-process drains of 200 events, one at a "
        "time (the median of 5: a drain's turns vary with timing): on SQLite with a trace "
        "callback on every connection (commits too: a COMMIT, "
        "or a write outside a transaction, which commits on its own), on PostgreSQL as the "
        "statements psycopg sends (one round trip each). The goals' rows split a helper's "
        "extra statements into those of the attempt's thread (the function's own) and those "
        "of the worker's turns: a function that runs longer writes its endings in more "
        "turns an event, and an @idempotent function's records are acquired in the turn "
        "that leases its deliveries.",
        "",
    )
    names = {
        "noop": "no-op",
        "idempotent": "@idempotent no-op",
        "write": "transaction writing 1 document",
        "write_claim": "the same + tx.claim(event.id)",
    }
    for store in ("sqlite", "postgres"):
        name = f"idempotency-{store}"
        why = page.missing(name, store)
        if why:
            page.add(f"{LABEL[store]}: {why}", "")
            continue
        data = page.get(name)
        sql = data.get("sql_per_event", {})
        overhead = data.get("overhead_us", {})
        rows = []
        for variant, label in names.items():
            counts = sql.get(variant, {})
            rows.append(
                [
                    label,
                    fig(data.get("us_per_event", {}).get(variant)),
                    fig(overhead.get(variant)) if variant in overhead else "",
                    f"{counts['statements_per_event']:.1f}" if counts else DASH,
                    f"{counts['commits_per_event']:.1f}" if "commits_per_event" in counts else DASH,
                ]
            )
        page.add(f"**{LABEL[store]}**" + (f" {CAPPED}" if data.get("capped") else ""), "")
        page.table(
            ["function", "µs per event", "overhead µs", "statements/event", "commits/event"],
            rows,
        )
