"""The command line refuses what would lose or hide data: bulk actions mixed with an id, a
store that does not exist, a store flag the app overrides; and reads data from stdin or a file.
Every user mistake is one line."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.testing import TestClock
from tests.e2e.cli_support import ONCEFIRE, Run, assert_user_error


def count(store: str) -> int:
    app = App(store)
    try:
        return app.dead_letters.count()
    finally:
        app.close()


# -- point 5: an id and --all, confirmation, dry runs -----------------------------------------


@pytest.mark.parametrize("verb", ["dismiss", "replay"])
def test_an_id_and_all_together_is_an_error(
    run: Run, store: str, dead_letters: list[int], verb: str
) -> None:
    assert_user_error(run("dlq", verb, str(dead_letters[0]), "--all"), "--all")
    assert count(store) == 3


def test_dismiss_all_asks_for_confirmation_with_the_count(
    run: Run, store: str, dead_letters: list[int]
) -> None:
    refused = run("dlq", "dismiss", "--all", input="n\n")
    assert refused.returncode != 0
    assert "3 dead letters" in refused.stdout + refused.stderr
    assert count(store) == 3
    assert run("dlq", "dismiss", "--all", input="").returncode != 0  # no answer: no
    assert count(store) == 3
    agreed = run("dlq", "dismiss", "--all", "--function", "charge", input="y\n")
    assert agreed.returncode == 0, agreed.stderr
    assert "2 dead letters" in agreed.stdout
    assert agreed.stdout.strip().endswith("dismissed 2")
    assert run("dlq", "replay", "--all", "--yes").stdout.strip().endswith("replayed 1")
    assert count(store) == 0


@pytest.mark.parametrize("verb", ["dismiss", "replay"])
def test_dry_run_prints_what_would_change_and_changes_nothing(
    run: Run, store: str, dead_letters: list[int], verb: str
) -> None:
    bulk = run("dlq", verb, "--all", "--dry-run")
    assert bulk.returncode == 0, bulk.stderr
    assert f"would {verb} 3 dead letters" in bulk.stdout
    for letter_id in dead_letters:
        assert str(letter_id) in bulk.stdout
    one = run("dlq", verb, str(dead_letters[0]), "--dry-run")
    assert one.returncode == 0, one.stderr
    assert f"would {verb} dead letter {dead_letters[0]}" in one.stdout
    assert count(store) == 3


# -- point 18: the wrong store ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("dlq", "list"),
        ("dlq", "show", "1"),
        ("stats",),
        ("doc", "get", "orders/o1"),
        ("functions",),
        ("functions", "list"),
    ],
)
def test_inspection_refuses_a_store_that_does_not_exist(
    run: Run, tmp_path: Path, args: tuple[str, ...]
) -> None:
    url = f"sqlite:///{tmp_path}/typo.db"
    result = run(*args, "--store", url, with_store=False)
    assert_user_error(result, "no oncefire store at", "oncefire migrate")
    assert not (tmp_path / "typo.db").exists()
    # Run from another folder with no --store: ./oncefire.db is not created either.
    assert_user_error(run(*args, with_store=False), "no oncefire store at")
    assert not (tmp_path / "oncefire.db").exists()


def test_migrate_creates_the_store_inspection_then_reads(run: Run, store: str) -> None:
    created = run("migrate")
    assert created.returncode == 0, created.stderr
    listing = run("dlq", "list")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.strip() == "no dead letters"


def test_a_sqlite_database_of_another_application_is_left_alone(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    conn.close()
    url = f"sqlite:///{path}"
    for args in (("stats",), ("dlq", "list"), ("doc", "set", "orders/o1", "{}")):
        assert_user_error(run(*args, "--store", url, with_store=False), "oncefire migrate")
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["customers"]
    assert run("migrate", "--store", url, with_store=False).returncode == 0
    assert run("stats", "--store", url, with_store=False).returncode == 0


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.empty_store
def test_a_postgres_database_with_tables_of_its_own_gets_oncefire_tables_only_by_migrate(
    run: Run, postgres_store_url: str
) -> None:
    import psycopg

    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS shop_customers")
        conn.execute("CREATE TABLE shop_customers (id int PRIMARY KEY)")
    try:
        for args in (("stats",), ("dlq", "list"), ("doc", "get", "a/b"), ("publish", "t", "{}")):
            result = run(*args, "--store", postgres_store_url, with_store=False)
            assert_user_error(result, "no oncefire store at", "oncefire migrate")
        with psycopg.connect(postgres_store_url) as conn:
            found = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'oncefire%'"
            ).fetchone()
        assert found == (0,)
        migrated = run("migrate", "--store", postgres_store_url, with_store=False)
        assert migrated.returncode == 0, migrated.stderr
        assert run("stats", "--store", postgres_store_url, with_store=False).returncode == 0
    finally:
        with psycopg.connect(postgres_store_url, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS shop_customers")


SERVED = """
from oncefire import App

app = App()

@app.on_message("emails")
def send(event):
    pass
"""
HARD_CODED = """
from oncefire import App

app = App("sqlite:///{path}")
"""


def start_worker_until_named(tmp_path: Path, app_file: str, store: str) -> tuple[list[str], str]:
    """Start `oncefire worker APP_FILE --store STORE`, read its stderr up to the line naming its
    store (or, if it names none, up to the line saying it serves), then SIGTERM it; return the
    stderr lines read and all it printed on stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    worker = subprocess.Popen(
        [ONCEFIRE, "worker", app_file, "--store", store],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stderr is not None
    lines: list[str] = []
    try:
        for line in worker.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith("store: ") or " serving " in line:
                break
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            stdout, _ = worker.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            raise
    return lines, stdout


@pytest.mark.slow
@pytest.mark.e2e
def test_every_command_names_its_store_on_stderr(
    run: Run, store: str, dead_letters: list[int], tmp_path: Path
) -> None:
    for args in (("dlq", "list", "--json"), ("stats",), ("publish", "t", "{}")):
        result = run(*args)
        assert result.returncode == 0, result.stderr
        assert store in result.stderr
        assert store not in result.stdout  # stdout carries data only
    assert json.loads(run("dlq", "list", "--json").stdout)
    (tmp_path / "shop.py").write_text(SERVED)
    stderr, stdout = start_worker_until_named(tmp_path, "shop.py", store)
    assert f"store: {store}" in stderr
    assert store not in stdout


@pytest.mark.e2e
def test_a_store_flag_that_conflicts_with_the_app_store_is_an_error(
    run: Run, tmp_path: Path
) -> None:
    (tmp_path / "fixed.py").write_text(HARD_CODED.format(path=tmp_path / "fixed.db"))
    assert_user_error(run("drain", "fixed.py"), "--store", "fixed.db")
    agreeing = run(
        "drain", "fixed.py", "--store", f"sqlite:///{tmp_path}/fixed.db", with_store=False
    )
    assert agreeing.returncode == 0, agreeing.stderr
    assert f"store: sqlite:///{tmp_path}/fixed.db" in agreeing.stderr  # named as it starts
    # A worker refuses the conflict at once, and names the agreeing store as it starts.
    assert_user_error(run("worker", "fixed.py"), "--store", "fixed.db")
    stderr, _ = start_worker_until_named(tmp_path, "fixed.py", f"sqlite:///{tmp_path}/fixed.db")
    assert f"store: sqlite:///{tmp_path}/fixed.db" in stderr


# -- point 19: one line, never a traceback ------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("def broken(:\n", ("broken.py", "SyntaxError", "line 1")),
        ("import no_such_module_at_all\n", ("broken.py", "no_such_module_at_all")),
        ("raise RuntimeError('boom')\n", ("broken.py", "RuntimeError", "boom")),
    ],
)
def test_an_app_file_that_fails_to_import_is_one_line(
    run: Run, tmp_path: Path, source: str, words: tuple[str, ...]
) -> None:
    (tmp_path / "broken.py").write_text(source)
    assert_user_error(run("drain", "broken.py"), *words)
    assert_user_error(run("worker", "broken.py"), *words)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("worker", ""), ("APP",)),
        (("drain", ":app"), ("APP",)),
        (("doc", "set", "orders/o1", '{"n": ' + "9" * 5000 + "}"), ("digits",)),
        (("doc", "set", "orders/o1", '{"a": ' + "[" * 5000 + "]" * 5000 + "}"), ("nested",)),
        (("doc", "set", "orders/o1", '{"a": "\\ud800"}'), ("surrogate",)),
        (("publish", "t", '{"a": "\\udfff"}'), ("surrogate",)),
        (("dlq", "show", "99999999999999999999"), ("No dead letter",)),
        (("dlq", "dismiss", "99999999999999999999"), ("No dead letter",)),
        (("publish", "t", "{}", "-a", "novalue"), ("KEY=VALUE",)),
    ],
)
def test_bad_input_is_one_line(
    run: Run, store: str, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    created = App(store)
    assert created.store  # the store exists: each case fails on its input alone
    created.close()
    assert_user_error(run(*args), *words)


# -- point 22: data from stdin or a file --------------------------------------------------------


@pytest.mark.slow
def test_doc_set_and_publish_read_stdin_and_files(run: Run, store: str, tmp_path: Path) -> None:
    big = {"blob": "x" * 300_000}  # too large for a command line
    (tmp_path / "order.json").write_text(json.dumps(big))
    assert run("doc", "set", "orders/o1", "@order.json").returncode == 0
    assert json.loads(run("doc", "get", "orders/o1").stdout) == big
    piped = run("doc", "set", "orders/o2", "-", input='{"from": "stdin"}')
    assert piped.returncode == 0, piped.stderr
    assert json.loads(run("doc", "get", "orders/o2").stdout) == {"from": "stdin"}

    app = App(store, clock=TestClock())
    got: list[object] = []

    @app.on_message("emails")
    def send(event: Event) -> None:
        got.append(event.data.data)

    app.drain()
    (tmp_path / "mail.json").write_text('{"to": "file"}')
    assert run("publish", "emails", "@mail.json").returncode == 0
    assert run("publish", "emails", "-", input='{"to": "stdin"}').returncode == 0
    app.drain()
    app.close()
    assert got == [{"to": "file"}, {"to": "stdin"}]
    assert_user_error(run("doc", "set", "orders/o3", "@missing.json"), "missing.json")


def test_publish_and_doc_set_say_when_nothing_subscribes_yet(run: Run, store: str) -> None:
    published = run("publish", "emails", "{}")
    assert published.returncode == 0, published.stderr
    assert "kept; no function subscribes to topic emails yet" in published.stderr
    written = run("doc", "set", "orders/o1", "{}")
    assert "kept; no function subscribes to orders/o1 yet" in written.stderr
    app = App(store)

    @app.on_message("emails")
    def send(event: Event) -> None: ...

    @app.on_document_written("orders/{o}")
    def charge(event: Event) -> None: ...

    assert app.store  # registers the functions
    app.close()
    assert "subscribes" not in run("publish", "emails", "{}").stderr
    assert "subscribes" not in run("doc", "set", "orders/o2", "{}").stderr


def test_dlq_show_truncates_an_oversized_payload_unless_full(run: Run, store: str) -> None:
    app = App(store, clock=TestClock(), max_payload_bytes=1000)

    @app.on_document_created("orders/{o}")
    def charge(event: Event) -> None:
        raise ValueError("declined")

    app.db.document("orders/o1").set({"blob": "x" * 5000})
    app.drain()
    [letter] = app.dead_letters.list()
    app.close()
    env = {"ONCEFIRE_MAX_PAYLOAD_BYTES": "1000"}
    shown = json.loads(run("dlq", "show", str(letter.id), env=env).stdout)
    assert shown["truncated"] is True
    assert "x" * 2000 not in json.dumps(shown)
    full = json.loads(run("dlq", "show", str(letter.id), "--full", env=env).stdout)
    assert full["truncated"] is False
    assert full["payload"]["after"]["data"]["blob"] == "x" * 5000
