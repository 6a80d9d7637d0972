"""The peers that keep their queue in a database: Procrastinate (PostgreSQL) and Huey
(its SQLite storage)."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any, cast

from benchlib import PROCRASTINATE_PG_DB, ensure_database, pg_url
from commits import PostgresCommits, SqliteCommits
from peer import PROCESSES, THREADS, Peer


class ProcrastinatePeer(Peer):
    name = "procrastinate"
    label = "Procrastinate"
    setup = f"{PROCESSES} workers x concurrency {THREADS}"
    broker = "PostgreSQL"
    packages = ("procrastinate", "psycopg")
    config = (
        f"PostgreSQL (synchronous_commit on), {PROCESSES} worker processes x concurrency "
        f"{THREADS}, LISTEN/NOTIFY on, its tables analysed once the backlog is in"
    )
    crash = (
        "a job is taken (one commit) and finished (another): a worker's crash leaves its "
        "jobs `doing`; they run again when the application retries stalled jobs"
    )
    # Its jobs not yet done, from the partial index on todo and doing jobs.
    BACKLOG = (
        "SELECT count(*) FROM procrastinate_jobs"
        " WHERE status = ANY (ARRAY['todo', 'doing']::procrastinate_job_status[])"
    )

    def __init__(self) -> None:
        import psycopg

        ensure_database(PROCRASTINATE_PG_DB)
        self.url = pg_url(PROCRASTINATE_PG_DB)
        self.conn = psycopg.connect(self.url, autocommit=True)
        self.queries = 0
        import procrastinate_app

        self.module = procrastinate_app
        self.is_open = False

    def _open(self) -> None:
        if not self.is_open:
            self.module.app.open()
            self.is_open = True

    def reset(self) -> None:
        if self.is_open:
            self.module.app.close()
            self.is_open = False
        self.conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        self.conn.execute("CREATE SCHEMA public")
        self._open()
        self.module.app.schema_manager.apply_schema()

    def prepare(self) -> None:
        # As oncefire's backlog template is analysed before its copies are drained.
        for table in ("procrastinate_jobs", "procrastinate_events"):
            self.conn.execute(f"ANALYZE {table}")

    def worker_commands(self) -> list[list[str]]:
        cmd = [
            sys.executable,
            "-m",
            "procrastinate",
            "--app",
            "procrastinate_app.app",
            "worker",
            "--concurrency",
            str(THREADS),
        ]
        return [cmd for _ in range(PROCESSES)]

    def enqueue_noop(self, count: int, *, bulk: bool) -> None:
        self._open()
        task = self.module.noop
        if bulk:
            for start in range(0, count, 1000):
                task.batch_defer(*({} for _ in range(min(1000, count - start))))
        else:
            for _ in range(count):
                task.defer()

    def enqueue_latency(self, key: str) -> None:
        self._open()
        self.module.latency.defer(key=key)

    def backlog(self) -> int:
        self.queries += 1
        row = self.conn.execute(self.BACKLOG).fetchone()
        return int(row[0]) if row else 0

    def has_work(self) -> bool:
        # The first entry of the partial index on todo and doing jobs (sequential scans
        # off, which would read the finished jobs first).
        self.queries += 1
        with self.conn.transaction():
            self.conn.execute("SET LOCAL enable_seqscan = off")
            row = self.conn.execute(f"SELECT EXISTS ({self.BACKLOG.replace('count(*)', '1')})")
            return bool(cast(tuple[Any, ...], row.fetchone())[0])

    def commits(self) -> Any:
        return PostgresCommits(PROCRASTINATE_PG_DB)

    def quiesce(self) -> None:
        import psycopg

        if self.is_open:
            self.module.app.close()
            self.is_open = False
        self.conn.close()
        self.conn = psycopg.connect(self.url, autocommit=True)
        self.queries = 0

    def own_transactions(self) -> int:
        return self.queries

    def close(self) -> None:
        if self.is_open:
            self.module.app.close()
        self.conn.close()


class HueyPeer(Peer):
    name = "huey"
    label = "Huey"
    setup = f"{PROCESSES} consumers x {THREADS} threads"
    broker = "SQLite"
    packages = ("huey",)
    config = (
        f"SqliteHuey (WAL, synchronous=FULL), {PROCESSES} consumer processes x {THREADS} "
        "worker threads, polling every 10 ms backing off to 100 ms when idle (its defaults: "
        "100 ms to 10 s)"
    )
    crash = (
        "a task's row is deleted when a worker takes it (one commit), before it runs: a "
        "worker's crash loses the tasks it held, nothing runs again"
    )

    def __init__(self) -> None:
        import huey_app

        self.module = huey_app
        self.file = Path(huey_app.FILE)
        self.conn: sqlite3.Connection | None = None

    def reset(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        self.module.huey.storage.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.file}{suffix}").unlink(missing_ok=True)
        self.module.huey.storage.initialize_schema()

    def fill(self, n: int) -> None:
        """n queued tasks: enqueued once (a commit each) into a template file, copied for
        every run, as oncefire's backlog is."""
        template = self.file.with_name(f"huey-backlog-{n}.db")
        if not template.exists():
            self.reset()
            self.enqueue_noop(n, bulk=True)
            self.module.huey.storage.sql("PRAGMA wal_checkpoint(TRUNCATE)")
            self.module.huey.storage.close()
            shutil.copyfile(self.file, template)
        self.reset()
        self.module.huey.storage.close()
        for suffix in ("-wal", "-shm"):
            Path(f"{self.file}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(template, self.file)

    def worker_commands(self) -> list[list[str]]:
        cmd = [
            sys.executable,
            "-m",
            "huey.bin.huey_consumer",
            "huey_app.huey",
            "--workers",
            str(THREADS),
            "--worker-type",
            "thread",
            "--delay",
            "0.01",
            "--max-delay",
            "0.1",
            "--no-periodic",
        ]
        return [cmd for _ in range(PROCESSES)]

    def enqueue_noop(self, count: int, *, bulk: bool) -> None:
        noop = self.module.noop
        for _ in range(count):
            noop()

    def enqueue_latency(self, key: str) -> None:
        self.module.latency(key)

    def _connection(self) -> sqlite3.Connection:
        if self.conn is None:
            self.conn = sqlite3.connect(str(self.file), timeout=30)
        return self.conn

    def backlog(self) -> int:
        # Tasks still queued, from the (queue, priority, id) index. A task a worker holds
        # is already deleted: at most the 16 running ones are not counted.
        sql = "SELECT count(*) FROM task WHERE queue = 'bench'"
        return int(self._connection().execute(sql).fetchone()[0])

    def has_work(self) -> bool:
        sql = "SELECT EXISTS (SELECT 1 FROM task WHERE queue = 'bench')"
        return bool(self._connection().execute(sql).fetchone()[0])

    def commits(self) -> Any:
        return SqliteCommits("huey")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
