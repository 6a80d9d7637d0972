"""The b-trees (tables and indexes) one write touches, measured from what the store wrote.

SQLite: the write-ahead log is emptied (a TRUNCATE checkpoint) before each sampled write,
so the frames in it afterwards are the pages that one commit wrote; each page is named by
the b-tree that owns it (the dbstat table), or as a pointer-map or free-list page.
PostgreSQL: the WAL records of the writes (pg_walinspect), by transaction, each block they
change named by its relation; and, as a cross-check from the statistics views, the rows
inserted per table and the index blocks read or written per index per write.
"""

from __future__ import annotations

import re
import sqlite3
import statistics
import struct
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from benchlib import summarize

Write = Callable[[int, str], Any]  # write(count, key prefix), as the write-path writers do
# A new writer: its write and its close (a closed connection's backend reports its statistics).
Writer = Callable[[], tuple[Write, Callable[[], None]]]
WAL_HEADER = 32
FRAME_HEADER = 24
BLOCK_REF = re.compile(r"rel (\d+)/(\d+)/(\d+) fork (\w+)")


def wal_frames(path: Path) -> tuple[list[int], int]:
    """The page numbers of the valid frames in a SQLite WAL file, and its page size."""
    data = path.read_bytes() if path.exists() else b""
    if len(data) < WAL_HEADER:
        return [], 0
    page_size = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    pages = []
    offset = WAL_HEADER
    while offset + FRAME_HEADER + page_size <= len(data):
        header = data[offset : offset + FRAME_HEADER]
        if header[8:16] != salts:
            break
        pages.append(struct.unpack(">I", header[:4])[0])
        offset += FRAME_HEADER + page_size
    return pages, page_size


def sqlite_btrees(path: Path, write: Write, samples: int, prefix: str) -> dict[str, Any]:
    """Sample `samples` single writes: the pages and the b-trees each commit wrote."""
    wal = Path(f"{path}-wal")
    written: list[list[int]] = []
    page_size = 0
    with closing(sqlite3.connect(str(path), isolation_level=None, timeout=30)) as side:
        for i in range(samples):
            busy = side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if busy:
                continue
            write(1, f"{prefix}{i}-")
            pages, page_size = wal_frames(wal)
            written.append(pages)
        owner = {int(p): str(n) for n, p in side.execute("SELECT name, pageno FROM dbstat")}
        auto_vacuum = side.execute("PRAGMA auto_vacuum").fetchone()[0] != 0

    def name(page: int) -> str:
        if page in owner:
            return owner[page] + (" (page 1: the file header)" if page == 1 else "")
        covered = page_size // 5 + 1  # a pointer-map page and the pages it maps
        if auto_vacuum and page >= 2 and (page - 2) % covered == 0:
            return "(pointer map)"
        return "(free list)"

    touched: Counter[str] = Counter()
    btrees_per_write: list[float] = []
    for pages in written:
        names = {name(p) for p in pages}
        touched.update(names)
        btrees_per_write.append(len([n for n in names if not n.startswith(("(", "sqlite_schema"))]))
    return {
        "method": "WAL frames of one commit after a TRUNCATE checkpoint, named by dbstat",
        "samples": len(written),
        "pages_per_write": summarize([len(p) for p in written]),
        "distinct_pages_per_write": summarize([len(set(p)) for p in written]),
        "btrees_per_write": summarize(btrees_per_write),
        "touched": {n: c / max(1, len(written)) for n, c in sorted(touched.items())},
    }


def postgres_btrees(url: str, make: Writer, n: int, prefix: str) -> dict[str, Any]:
    """n writes by a new writer (after 20 by another one, closed): the relations their WAL
    records change, per transaction; with the statistics views' rows inserted and index
    blocks accessed per write (the writer's connect-time queries included, once)."""
    import psycopg

    warm, done = make()
    warm(20, f"{prefix}warm-")
    done()

    with psycopg.connect(url, autocommit=True) as side:
        side.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        database = side.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        assert database is not None
        before = settled_stats(side)
        write, close = make()
        try:
            start = side.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
            assert start is not None
            write(n, prefix)
            records = side.execute(
                "SELECT xid, record_length, block_ref FROM pg_get_wal_records_info(%s,"
                " pg_current_wal_flush_lsn()) WHERE xid <> 0 AND block_ref LIKE %s",
                (start[0], f"%/{database[0]}/%"),
            ).fetchall()
        finally:
            close()
        after = settled_stats(side)
        names: dict[tuple[str, str], str] = {}
        by_xid: dict[int, set[str]] = {}
        sizes: Counter[int] = Counter()
        counts: Counter[int] = Counter()
        for xid, length, refs in records:
            sizes[xid] += length
            counts[xid] += 1
            for space, _db, node, fork in BLOCK_REF.findall(refs):
                key = (space, node)
                if key not in names:
                    row = side.execute(
                        "SELECT pg_filenode_relation(%s, %s)::regclass::text",
                        (0 if space == "1663" else int(space), int(node)),
                    ).fetchone()
                    names[key] = str(row[0]) if row and row[0] else f"filenode {node}"
                shown = names[key] + ("" if fork == "main" else f" ({fork} fork)")
                by_xid.setdefault(int(xid), set()).add(shown)
    touched: Counter[str] = Counter()
    for rels in by_xid.values():
        touched.update(rels)
    transactions = max(1, len(by_xid))
    return {
        "method": "WAL records (pg_walinspect) by transaction; pg_stat/pg_statio deltas",
        "writes": n,
        "transactions": len(by_xid),
        "btrees_per_write": summarize(
            [len([r for r in rels if "fork" not in r]) for rels in by_xid.values()]
        ),
        "wal_records_per_write": statistics.fmean(counts.values()) if counts else None,
        "wal_bytes_per_write": statistics.fmean(sizes.values()) if sizes else None,
        "touched": {k: c / transactions for k, c in sorted(touched.items())},
        "stats_per_write": {
            k: (after.get(k, 0) - v) / n
            for k, v in sorted({**after, **before}.items())
            if after.get(k, 0) - before.get(k, 0) > 0
        },
    }


STATS = (
    "SELECT 'rows inserted: ' || relname, n_tup_ins FROM pg_stat_user_tables"
    " UNION ALL SELECT 'rows updated: ' || relname, n_tup_upd FROM pg_stat_user_tables"
    " UNION ALL SELECT 'index blocks: ' || indexrelname, idx_blks_hit + idx_blks_read"
    " FROM pg_statio_user_indexes"
    " UNION ALL SELECT 'sequence blocks: ' || relname, blks_hit + blks_read"
    " FROM pg_statio_user_sequences"
)


def settled_stats(conn: Any, most: float = 6.0) -> dict[str, int]:
    """The statistics views once the backends have reported (idle ones do within 1 s)."""
    deadline = time.monotonic() + most
    time.sleep(1.1)
    last = stats(conn)
    steady = 0
    while time.monotonic() < deadline and steady < 2:
        time.sleep(0.6)
        now = stats(conn)
        steady = steady + 1 if now == last else 0
        last = now
    return last


def stats(conn: Any) -> dict[str, int]:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return {str(k): int(v or 0) for k, v in conn.execute(STATS).fetchall()}
