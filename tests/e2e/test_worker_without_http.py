"""`oncefire worker` as a real process serves event functions only: on an app with an HTTP
function it runs the document function, and neither serves the HTTP function nor listens on
any port (that is `oncefire run`), unless given --metrics-port, when it exports the store's
metrics there. And it runs the ported Firebase sample as it is, with the
store from ONCEFIRE_STORE. Waits poll the store or the log with a deadline."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import httpx
import pytest

from oncefire import App
from tests.e2e.cli_support import ONCEFIRE, poll_until

pytestmark = pytest.mark.e2e

SAMPLE = Path(__file__).parent / "apps" / "firebase_main.py"
APP_SOURCE = """
from oncefire import App

app = App()  # the store from ONCEFIRE_STORE


@app.on_request("/hello")
def hello(event):
    return "hello"


@app.on_document_created("orders/{o}")
def charge(event):
    app.db.document(f"charged/{event.params['o']}").set({"by": "charge"})
"""
DEADLINE = 60.0


def wait_for(what: str, check: Callable[[], object]) -> None:
    """Poll check() until it is truthy; fail after DEADLINE."""
    poll_until(what, check, DEADLINE)


class Worker:
    """One `oncefire worker APP` process on a store given by ONCEFIRE_STORE, and its log."""

    def __init__(self, tmp: Path, target: str, store_url: str, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
        env.update(ONCEFIRE_STORE=store_url, ONCEFIRE_SHUTDOWN_GRACE="5")
        self.log_path = tmp / "worker.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [ONCEFIRE, "worker", target, *args],
                env=env,
                cwd=tmp,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_for("the worker serving", lambda: " serving " in self.log())

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tree(self) -> set[int]:
        """The pids of the supervisor and every process under it."""
        parents: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except (FileNotFoundError, ProcessLookupError):
                    continue
                parents[int(entry.name)] = int(fields[1])
        tree = {self.proc.pid}
        while grown := {p for p, parent in parents.items() if parent in tree} - tree:
            tree |= grown
        return tree

    def stop(self) -> int:
        """SIGTERM, as a deployment stops it; the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(DEADLINE)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """Start `oncefire worker` processes; any still running at the end is killed."""
    started: list[Worker] = []

    def run(target: str, store_url: str, *args: str) -> Worker:
        worker = Worker(tmp_path, target, store_url, *args)
        started.append(worker)
        return worker

    yield run
    for worker in started:
        worker.close()


def listening_sockets(pids: Iterable[int]) -> set[int]:
    """The inodes of the TCP sockets in the LISTEN state that these processes hold open."""
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                listening.add(int(fields[9]))
    held = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except (FileNotFoundError, ProcessLookupError):
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except (FileNotFoundError, ProcessLookupError):
                continue
            if target.startswith("socket:["):
                held.add(int(target.removeprefix("socket:[").removesuffix("]")))
    return held & listening


def test_listening_sockets_sees_a_port_a_process_listens_on() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        assert listening_sockets([os.getpid()]) == set()  # bound, not listening yet
        sock.listen()
        assert len(listening_sockets([os.getpid()])) == 1


@pytest.mark.slow
def test_worker_serves_the_event_function_and_no_http(
    tmp_path: Path, start: Callable[..., Worker]
) -> None:
    (tmp_path / "app.py").write_text(APP_SOURCE)
    store_url = f"sqlite:///{tmp_path}/worker.db"
    worker = start("app.py", store_url, "--processes", "2")
    wait_for("both worker processes serving", lambda: worker.log().count(" serving ") == 2)
    app = App(store_url)
    try:
        app.db.document("orders/o1").set({"amount": 5})
        charged = app.db.document("charged/o1")
        wait_for("the document function to run", lambda: charged.get().exists)
        assert charged.get().to_dict() == {"by": "charge"}
        processes = worker.tree()
        assert len(processes) >= 3  # the supervisor and its two worker processes
        assert listening_sockets(processes) == set()
        # Each worker process serves `charge` only: the HTTP function is `oncefire run`'s.
        assert worker.log().count("serving 1 function(s)") == 2, worker.log()
        assert worker.stop() == 0, worker.log()
    finally:
        app.close()
    assert "Traceback" not in worker.log()


@pytest.mark.slow
def test_worker_runs_the_firebase_sample_as_it_is(
    tmp_path: Path, start: Callable[..., Worker]
) -> None:
    store_url = f"sqlite:///{tmp_path}/firebase.db"
    worker = start(str(SAMPLE), store_url)
    # makeuppercase, countedits, hellopubsub and accountcleanup; addmessage is HTTP.
    assert "serving 4 function(s)" in worker.log()
    app = App(store_url)
    try:
        ref = app.db.collection("messages").add({"original": "hello"})
        message_id = app.publish("greetings", {"name": "Ada"})
        wait_for("makeuppercase to run", lambda: (ref.get().to_dict() or {}).get("uppercase"))
        assert ref.get().to_dict() == {"original": "hello", "uppercase": "HELLO"}
        greeting = app.db.document(f"greetings/{message_id}")
        wait_for("hellopubsub to run", lambda: greeting.get().exists)
        assert greeting.get().to_dict() == {"greeting": "Hello, Ada!", "attributes": {}}
    finally:
        app.close()
    assert worker.stop() == 0, worker.log()
    assert "Traceback" not in worker.log()


@pytest.mark.slow
def test_a_worker_given_a_metrics_port_exports_the_stores_figures(
    tmp_path: Path, start: Callable[..., Worker]
) -> None:
    (tmp_path / "app.py").write_text(APP_SOURCE)
    store_url = f"sqlite:///{tmp_path}/metrics.db"
    worker = start("app.py", store_url, "--processes", "2", "--metrics-port", "0")
    found = re.search(r"metrics on (http://127\.0\.0\.1:\d+/metrics)", worker.log())
    assert found is not None, worker.log()
    app = App(store_url)
    try:
        for n in range(3):
            app.db.document(f"orders/o{n}").set({"amount": n})
        wait_for("three charges", lambda: len(app.db.collection("charged").get()) == 3)
        succeeded = 'oncefire_attempts_total{function="charge",outcome="succeeded"} 3.0'
        wait_for("the export to count them", lambda: succeeded in httpx.get(found.group(1)).text)
        assert len(listening_sockets(worker.tree())) == 1  # the exporter, and no HTTP function
    finally:
        app.close()
    assert worker.stop() == 0, worker.log()
    assert "Traceback" not in worker.log()


def test_a_metrics_port_in_use_is_one_line_and_no_worker_starts(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP_SOURCE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = subprocess.run(
            [ONCEFIRE, "worker", "app.py", "--metrics-port", port],
            env={**env, "ONCEFIRE_STORE": f"sqlite:///{tmp_path}/busy.db"},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
    assert done.returncode != 0
    [error] = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert f"Cannot serve metrics on 127.0.0.1:{port}" in error, done.stderr
    assert "Traceback" not in done.stderr and " serving " not in done.stderr
