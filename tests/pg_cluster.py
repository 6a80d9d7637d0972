"""A private PostgreSQL cluster a test starts, restarts and removes itself.

Tests that restart or kill the database server use this, never the machine's shared server:
`initdb` in a temporary folder, run as the `postgres` user when the test runs as root, on a free
port with its own socket folder. It is skipped with the reason when `initdb` is missing (a
failure under CI=true).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
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

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin = bin_dir
        self.root = root
        self.data = root / "data"
        self.sockets = root / "sock"
        self.port = _free_port()
        self.log = root / "server.log"

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
