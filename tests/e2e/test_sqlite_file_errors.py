"""A SQLite store whose file cannot be opened or written says which path and why, in one line:
a missing folder, a folder in place of the file, a read-only folder, a full disk (SQLite said
"unable to open database file" or "disk I/O error" for all of them). And `oncefire dashboard`
on a port already taken fails before it prints where it serves."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cli_support import ONCEFIRE, Run, assert_user_error

# Root writes through any file mode: the command runs without the capabilities that allow it.
UNPRIVILEGED = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]


def unprivileged(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`oncefire ARGS` bound by file modes, even when the tests run as root."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("the tests run as root and setpriv (util-linux) is not installed")
        prefix = UNPRIVILEGED
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    return subprocess.run(
        [*prefix, ONCEFIRE, *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        timeout=120,
        input="",
    )


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "locked"
    folder.mkdir()
    yield folder
    folder.chmod(0o755)


def test_a_missing_folder_is_named(run: Run, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/nowhere/orders.db"
    result = run("migrate", "--store", url, with_store=False)
    assert_user_error(result, f"{tmp_path}/nowhere does not exist", "mkdir -p")


def test_a_folder_in_place_of_the_file_is_named(run: Run, tmp_path: Path) -> None:
    (tmp_path / "orders.db").mkdir()
    result = run("migrate", "--store", f"sqlite:///{tmp_path}/orders.db", with_store=False)
    assert_user_error(result, f"{tmp_path}/orders.db: it is a folder, not a file")


@pytest.mark.parametrize("is_made", [False, True], ids=["new store", "existing store"])
def test_a_read_only_folder_is_named(run: Run, read_only: Path, is_made: bool) -> None:
    url = f"sqlite:///{read_only}/orders.db"
    if is_made:
        assert run("migrate", "--store", url, with_store=False).returncode == 0
    read_only.chmod(0o555)
    result = unprivileged("doc", "set", "a/b", "{}", "--store", url, cwd=read_only.parent)
    assert_user_error(result, f"its folder {read_only} is read-only", "-wal and -shm")


FILL_DISK = """
set -e
mount -t tmpfs -o size=4m tmpfs "$1"
"$2" migrate --store "sqlite:///$1/orders.db" > /dev/null 2>&1
"$2" doc set orders/o1 '{"n": 1}' --store "sqlite:///$1/orders.db" > /dev/null 2>&1
dd if=/dev/zero of="$1/filler" bs=64k > /dev/null 2>&1 || true
"$2" doc set orders/o2 '{"n": 2}' --store "sqlite:///$1/orders.db" || echo "exit $?" >&2
"""


def test_a_full_disk_is_named(tmp_path: Path) -> None:
    # A private mount namespace (unshare) holds a 4 MiB tmpfs, filled up after the store.
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    disk = tmp_path / "disk"
    disk.mkdir()
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.decode().strip()}")
    result = subprocess.run(
        ["unshare", "-rm", "sh", "-c", FILL_DISK, "sh", str(disk), ONCEFIRE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in result.stderr.splitlines() if not line.startswith("store: ")]
    assert lines[-1] == "exit 1", result.stderr
    [error] = lines[:-1]
    assert "Traceback" not in result.stderr
    assert f"{disk}/orders.db: the disk that holds it is full" in error, error


def test_the_dashboard_on_a_taken_port_fails_before_it_prints_its_url(run: Run) -> None:
    assert run("migrate").returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("dashboard", "--port", str(port))
    assert_user_error(result, f"Cannot listen on 127.0.0.1:{port}", "Address already in use")
    assert "http://" not in result.stdout + result.stderr


def test_a_dashboard_port_out_of_range_is_refused(run: Run) -> None:
    assert run("migrate").returncode == 0
    result = run("dashboard", "--port", "99999")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "99999 is not in the range 0<=x<=65535" in result.stderr
