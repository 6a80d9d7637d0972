"""RESULTS.md: what writers feel. The write path against plain SQL and the b-trees a write
touches, many writers at once, and events flowing while producers write; their goals."""

from __future__ import annotations

from typing import Any

from report_page import DASH, LABEL, Page, fig, med, met, share_with_ceiling
from report_scenarios import apart

GOAL_PLAIN_SQL_RATIO = 0.90
GOAL_MANY_WRITERS = 0.80
GOAL_KEEP_UP = 0.90
GOAL_LOADED_P50 = 2.0
GOAL_LOADED_P99 = 10.0
STORES = ("sqlite", "postgres")
KINDS = (("oncefire", "oncefire"), ("plain_sql", "plain SQL"), ("raw", "raw"))


def percent(summary: Any) -> str:
    """A ratio's median (min-max) as percentages."""
    if not isinstance(summary, dict) or summary.get("median") is None:
        return DASH
    scaled = {k: summary[k] * 100 for k in ("median", "min", "max")}
    return fig({**scaled, "runs": summary.get("runs", [])}, 0, " %")


def writer_goal_rows(page: Page) -> list[list[str]]:
    """The goals table's rows of these scenarios."""
    rows = []
    for store in STORES:
        share = med(page.get(f"write_path-{store}").get("ratio_plain_sql"))
        rows.append(
            [
                f"{LABEL[store]} writes with one trigger / the same rows by plain SQL",
                f"≥ {GOAL_PLAIN_SQL_RATIO * 100:.0f} %",
                f"{share:.0%}" if share is not None else DASH,
                met(None if share is None else share >= GOAL_PLAIN_SQL_RATIO),
            ]
        )
    for store in STORES:
        many = page.get(f"many_writers-{store}")
        share = med(many.get("ratio"))
        least = med(many.get("least_ratio"))
        rows.append(
            [
                f"{LABEL[store]}, {many.get('producers', 8)} writer processes / their raw commits",
                f"≥ {GOAL_MANY_WRITERS * 100:.0f} %",
                share_with_ceiling(share, least),
                met(None if share is None else share >= GOAL_MANY_WRITERS),
            ]
        )
    for store in STORES:
        flow = page.get(f"flowing-{store}")
        keep_up = med(flow.get("keep_up"))
        rows.append(
            [
                f"{LABEL[store]} events flowing: end to end / the producers' rate",
                f"≥ {GOAL_KEEP_UP * 100:.0f} %",
                f"{keep_up:.0%}" if keep_up is not None else DASH,
                met(None if keep_up is None else keep_up >= GOAL_KEEP_UP),
            ]
        )
        p50, p99 = med(flow.get("p50_ms")), med(flow.get("p99_ms"))
        load = f"{flow.get('share', 0.5) * 100:.0f} % of that load"
        rows.append(
            [
                f"{LABEL[store]} write → start p50 / p99 at {load}",
                f"≤ {GOAL_LOADED_P50:g} ms / ≤ {GOAL_LOADED_P99:g} ms",
                f"{p50:.2f} / {p99:.2f} ms" if p50 is not None and p99 is not None else DASH,
                met(
                    None
                    if p50 is None or p99 is None
                    else p50 <= GOAL_LOADED_P50 and p99 <= GOAL_LOADED_P99
                ),
            ]
        )
    return rows


def writer_sections(page: Page) -> None:
    """The sections of these scenarios, after the write path's."""
    plain_sql(page)
    btrees(page)
    many_writers(page)
    flowing(page)


def plain_sql(page: Page) -> None:
    page.add(
        "### 2a. Against the same rows by plain SQL",
        "",
        "The rows a document write with one trigger stores (the document, its event, its "
        "delivery) written by hand-written SQL on the store's own schema, one transaction "
        "per write, with the same durability (`bench/plain_sql.py`: SQLite BEGIN IMMEDIATE, "
        "three INSERTs, COMMIT; PostgreSQL one statement of three INSERTs in autocommit, one "
        "round trip as oncefire's write). Measured alternately with the two columns of "
        "section 2; what oncefire does besides the rows (lookups, locks, the catalogue check, "
        "the NOTIFY) is its overhead.",
        "",
    )
    rows = []
    for store in STORES:
        name = f"write_path-{store}"
        why = page.missing(name, store)
        w = page.get(name)
        if why or "plain_sql_rate" not in w:
            rows.append([LABEL[store], why or "not measured", DASH, DASH])
            continue
        rows.append(
            [
                LABEL[store],
                fig(w.get("plain_sql_rate")),
                fig(w.get("document_write_rate")),
                percent(w.get("ratio_plain_sql")),
            ]
        )
    page.table(["store", "plain SQL writes/s", "document writes/s", "share of plain SQL"], rows)


def btrees(page: Page) -> None:
    page.add(
        "### 2b. The b-trees a write touches",
        "",
        "Measured from what the store wrote, not counted from the schema "
        "(`bench/btrees.py`). SQLite: the write-ahead log is emptied before each sampled "
        "write, and the pages its commit wrote are named by the b-tree owning them (dbstat). "
        "PostgreSQL: the WAL records of the writes (pg_walinspect) by transaction, each "
        "changed block named by its relation (heaps and indexes; a sequence logs once in 32 "
        "values). A b-tree is listed when at least half the writes touched it.",
        "",
    )
    rows = []
    for store in STORES:
        found = page.get(f"write_path-{store}").get("btrees") or {}
        for kind, label in KINDS:
            b = found.get(kind)
            if not b:
                continue
            if store == "sqlite":
                volume = f"{fig(b.get('pages_per_write'))} pages"
            else:
                volume = (
                    f"{b.get('wal_records_per_write') or 0:.1f} records, "
                    f"{b.get('wal_bytes_per_write') or 0:,.0f} bytes"
                )
            names = ", ".join(f"`{k}`" for k, v in b.get("touched", {}).items() if v >= 0.5)
            rows.append(
                [LABEL[store], label, fig(b.get("btrees_per_write")), volume, names or DASH]
            )
    if not rows:
        page.add("Not measured in this sitting.", "")
        return
    page.table(["store", "write", "b-trees a write", "written a write", "b-trees"], rows)
    found = page.get("write_path-postgres").get("btrees") or {}
    said = [f"{label}: {views(found[k])}" for k, label in KINDS if found.get(k)]
    if said:
        page.add(
            "PostgreSQL's statistics views over the same writes (pg_stat_user_tables, "
            "pg_statio_user_indexes), per write: " + "; ".join(said) + ".",
            "",
        )
    pages = page.get("write_path-sqlite").get("commit_pages")
    if pages:
        cost = pages.get("us_per_commit", {})
        page.add(
            "What a durable SQLite commit costs by the b-trees it writes (one row into 1, 3 "
            f"or 5 tables, each with one index; {pages.get('commits')} commits a run, "
            "`bench/commit_pages.py`): "
            + "; ".join(
                f"{k}: {fig(v)} µs"
                for k, v in sorted(cost.items(), key=lambda kv: int(kv[0].split()[0]))
            )
            + ".",
            "",
        )


def many_writers(page: Page) -> None:
    page.add(
        "### 2c. Many writers",
        "",
        "Producer processes writing at once, each write its own transaction (no worker "
        "running): oncefire's document writes with one trigger against the same processes' "
        "raw one-row commits on the same database, timed alternately over fixed windows "
        "(`bench/many_writers.py`). SQLite has one writer at a time: its processes take "
        "turns at the lock. Beside them, timed the same way by plain SQL on oncefire's "
        "schema (`--floor`): the rows of a write with one trigger (document, event, "
        "delivery), and the document and its event only, the ceiling of any write that "
        "commits its event with its document.",
        "",
        *apart(page, "many_writers"),
    )
    rows = []
    for store in STORES:
        name = f"many_writers-{store}"
        why = page.missing(name, store)
        m = page.get(name)
        if why:
            rows.append([LABEL[store], DASH, why, DASH, DASH, DASH, DASH])
            continue
        rows.append(
            [
                LABEL[store],
                str(m.get("producers")),
                fig(m.get("raw_commit_rate")),
                fig(m.get("document_write_rate")),
                percent(m.get("ratio")),
                percent(m.get("plain_ratio")),
                percent(m.get("least_ratio")),
            ]
        )
    page.table(
        [
            "store",
            "processes",
            "raw commits/s",
            "document writes/s",
            "share",
            "plain SQL, all rows: share",
            "document and event only: share",
        ],
        rows,
    )


def flowing(page: Page) -> None:
    page.add(
        "### 2d. Events flowing",
        "",
        "The workers run (2 processes, defaults) while producer processes write, one "
        "transaction each (`bench/flowing.py`). Full speed: the producers write as fast as "
        "they can over the window; end to end is the events run by its end over its "
        "length. Paced: the producers write on a fixed schedule at a share of that rate; "
        "latency from each write's commit to its function's first line.",
        "",
    )
    rows = []
    for store in STORES:
        name = f"flowing-{store}"
        why = page.missing(name, store)
        f = page.get(name)
        if why:
            rows.append([LABEL[store], why, DASH, DASH, DASH, DASH, DASH, DASH])
            continue
        rows.append(
            [
                LABEL[store],
                str(f.get("producers")),
                fig(f.get("producer_rate")),
                fig(f.get("end_to_end_rate")),
                percent(f.get("keep_up")),
                fig(f.get("paced_rate")),
                fig(f.get("p50_ms"), 2),
                fig(f.get("p99_ms"), 2),
            ]
        )
    page.add(*apart(page, "flowing"))
    page.table(
        [
            "store",
            "producers",
            "producers' writes/s",
            "end-to-end events/s",
            "kept up",
            "paced writes/s",
            "p50 ms",
            "p99 ms",
        ],
        rows,
    )


def views(found: dict[str, Any]) -> str:
    """Rows inserted and index blocks read or written per write, from the statistics views."""
    per = found.get("stats_per_write") or {}
    rows = sum(v for k, v in per.items() if k.startswith("rows inserted"))
    blocks = sum(v for k, v in per.items() if k.startswith("index blocks"))
    indexes = len([k for k, v in per.items() if k.startswith("index blocks") and v >= 0.5])
    return f"{rows:.1f} rows inserted, {blocks:.1f} index blocks over {indexes} indexes"
