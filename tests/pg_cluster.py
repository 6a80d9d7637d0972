"""A private PostgreSQL cluster a test starts, restarts and removes itself.

Tests that restart or kill the database server use this, never the machine's shared server:
`initdb` in a temporary folder, run as the `postgres` user when the test runs as root, on a free
port with its own socket folder. It is skipped with the reason when `initdb` is missing (a
failure under CI=true).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

BIN_DIRS = [os.environ.get("ONCEFIRE_TEST_PG_BIN", ""), "/usr/lib/postgresql/15/bin"]


def _bin_dir() -> Path | None:
    folders: list[str | Path] = [
        *BIN_DIRS,
        *sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True),
    ]
    for folder in folders:
        if folder and (Path(folder) / "initdb").exists():
            return Path(folder)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One private PostgreSQL server: its folder, port and the commands that control it."""

    def __init__(self, bin_dir: Path, root: Path, options: str = "") -> None:
        self.bin = bin_dir
        self.root = root
        self.data = root / "data"
        self.sockets = root / "sock"
        self.port = _free_port()
        self.log = root / "server.log"
        self.options = options  # more server settings (-c name=value ...)

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=120)

    @property
    def url(self) -> str:
        """The URL of its `postgres` database."""
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        """The URL of one database of the cluster."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def init(self) -> None:
        """Create the cluster's files."""
        self.sockets.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.sockets, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        options = f"{options} {self.options}".strip()
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` (clean) or `immediate` (no checkpoint, crash recovery next)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self, mode: str = "fast") -> float:
        """Stop and start again; the seconds the server was away."""
        began = time.monotonic()
        self.stop(mode)
        self.start()
        return time.monotonic() - began

    def standby(self, *, is_synchronous: bool) -> Cluster:
        """A streaming standby of this server (`pg_basebackup -R` into a folder of its own, on
        a free port), started, and caught up. Synchronous: this server's commits wait for the
        standby's flush (`synchronous_standby_names`), as they do from then on."""
        root = Path(tempfile.mkdtemp(prefix="oncefire-pg-standby-"))
        standby = Cluster(self.bin, root)
        standby.sockets.mkdir()
        if os.geteuid() == 0:
            shutil.chown(root, "postgres")
            shutil.chown(standby.sockets, "postgres")
        self._run(
            "pg_basebackup",
            "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
            "-D", str(standby.data), "-R", "-X", "stream", "-c", "fast", "--no-sync",
        )  # fmt: skip
        standby.start()
        names = "'*'" if is_synchronous else "''"
        self.admin(f"ALTER SYSTEM SET synchronous_standby_names = {names}")
        self.admin("ALTER SYSTEM SET restart_after_crash = off")  # see crash()
        self.admin("SELECT pg_reload_conf()")
        return standby

    def caught_up(self, primary: Cluster) -> None:
        """Wait until this standby has replayed all the primary has written so far."""
        ((target,),) = primary.admin("SELECT pg_current_wal_lsn()")
        deadline = time.monotonic() + 60
        while not self.admin(f"SELECT pg_last_wal_replay_lsn() >= '{target}'")[0][0]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby on port {self.port} did not reach {target}")
            time.sleep(0.02)

    def hold_replication(self, is_held: bool) -> None:
        """Stop this primary's WAL senders (SIGSTOP), as a slow or cut network holds its
        standbys behind, or let them go on (SIGCONT)."""
        for (pid,) in self.admin("SELECT pid FROM pg_stat_replication"):
            os.kill(int(str(pid)), signal.SIGSTOP if is_held else signal.SIGCONT)

    def crash(self) -> None:
        """Lose this primary as its machine is lost: its WAL senders killed first, so that
        nothing they have not sent reaches a standby (restart_after_crash is off: the server
        goes down with them), then `pg_ctl stop -m immediate`."""
        for (pid,) in self.admin("SELECT pid FROM pg_stat_replication"):
            os.kill(int(str(pid)), signal.SIGKILL)
        self.stop("immediate")

    def promote(self) -> None:
        """Make this standby a primary (`pg_ctl promote`), and wait until it takes writes."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "promote")

    def admin(self, sql: str) -> list[tuple[object, ...]]:
        """The rows of one statement run on the `postgres` database (none for a command)."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(sql.encode())
            return cursor.fetchall() if cursor.description else []

    def remove(self) -> None:
        """Stop the server at once and delete its folder."""
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return self.database_url(name)

    def terminate_backends(self, database: str) -> int:
        """pg_terminate_backend on every other connection to a database; how many."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            ).fetchall()
        return len(rows)


def private_cluster() -> Iterator[Cluster]:
    """A started private cluster, stopped and removed afterwards (use as a fixture body)."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        reason = "initdb not found: set ONCEFIRE_TEST_PG_BIN to PostgreSQL's bin folder"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="oncefire-pg-"))
    cluster = Cluster(bin_dir, root)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def replicated(*, is_synchronous: bool) -> Iterator[tuple[Cluster, Cluster]]:
    """A private primary and its streaming standby, started; both removed afterwards."""
    with contextmanager(private_cluster)() as primary:
        standby = primary.standby(is_synchronous=is_synchronous)
        try:
            yield primary, standby
        finally:
            standby.remove()
