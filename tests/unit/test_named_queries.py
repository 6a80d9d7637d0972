"""Named queries: the loader, and the names the shared store code runs on both dialects."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from oncefire.errors import StoreError
from oncefire.stores import queries
from oncefire.stores.connection import SHORT_LIST, expand_lists

STORES = Path(queries.__file__).parent


def test_a_file_holds_named_queries_without_their_comments() -> None:
    text = (
        "-- a file comment\n"
        "-- name: first\n-- what it does\nSELECT 1\nFROM t;\n\n"
        "-- name: second\nUPDATE t SET x = 'a -- b';\n"
    )
    assert queries.parse(text) == {
        "first": "SELECT 1\nFROM t",
        "second": "UPDATE t SET x = 'a -- b'",
    }


def test_a_name_defined_twice_is_refused() -> None:
    with pytest.raises(StoreError, match="defined twice"):
        queries.parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_a_name_without_a_statement_is_refused() -> None:
    with pytest.raises(StoreError, match="no statement"):
        queries.parse("-- name: a\n-- only a comment\n")


def test_a_name_defined_in_two_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.sql").write_text("-- name: same\nSELECT 1;\n", encoding="utf-8")
    (tmp_path / "b.sql").write_text("-- name: same\nSELECT 2;\n", encoding="utf-8")
    with pytest.raises(StoreError, match="defined in two files"):
        queries.from_folder(tmp_path, "test")


def test_an_empty_query_in_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.sql").write_text("-- name: empty\n\n-- name: full\nSELECT 1\n", "utf-8")
    with pytest.raises(StoreError, match="no statement"):
        queries.from_folder(tmp_path, "test")


def test_migrations_are_not_named_queries(tmp_path: Path) -> None:
    (tmp_path / "001_init.sql").write_text("CREATE TABLE t (x int);\n", encoding="utf-8")
    (tmp_path / "a.sql").write_text("-- name: one\n-- a comment\nSELECT 1;\n", "utf-8")
    assert queries.from_folder(tmp_path, "test") == {"one": "SELECT 1"}


def test_every_query_file_loads_through_the_one_loader() -> None:
    for dialect in ("sqlite", "postgres"):
        loaded = queries.load(dialect)
        for name in ("looping_events", "cost_sums", "function_states", "awaited_sources"):
            assert not loaded[name].lstrip().startswith("--"), (dialect, name)
        assert [v for v, _ in queries.migrations(dialect)][:2] == [1, 2]


def test_the_queries_the_shared_code_runs_exist_in_both_dialects() -> None:
    used = set()
    shared = (
        "sql_store.py",
        "sql_retention.py",
        "documents/sql_tx.py",
        "documents/sql.py",
        "queue/sql.py",
        "records/sql.py",
        "catalogue/sql.py",
    )
    for module in shared:
        text = (STORES / module).read_text(encoding="utf-8")
        used |= set(re.findall(r'(?:fetch|execute|count|execute_many)\(\s*"([a-z_]+)"', text))
    assert used, "the shared code runs named queries"
    for dialect in ("sqlite", "postgres"):
        assert used - set(queries.load(dialect)) == set(), dialect


def test_every_notification_uses_the_listened_channel() -> None:
    from oncefire.stores.documents.postgres_tx import CHANNEL, MAX_NOTIFY_IDS

    loaded = queries.load("postgres")
    assert loaded["listen"] == f"LISTEN {CHANNEL}"
    # Statements wake workers through oncefire_wake (migration 026), which sends pg_notify.
    assert not [sql for sql in loaded.values() if "pg_notify" in sql]
    notifying = [sql for sql in loaded.values() if "oncefire_wake" in sql]
    assert notifying
    for sql in notifying:
        assert set(re.findall(r"oncefire_wake\('([a-z]+)'", sql)) == {CHANNEL}
        assert set(re.findall(r"count\(\*\) <= (\d+)", sql)) <= {str(MAX_NOTIFY_IDS)}


def test_a_sqlite_list_read_with_json_each_is_one_json_parameter_unless_short() -> None:
    sql = "SELECT id FROM t WHERE id IN (SELECT value FROM json_each(:ids)) AND f IN (:names)"
    long_ids, short_ids = list(range(SHORT_LIST + 1)), [3, 5]
    text, flat = expand_lists(sql, {"ids": long_ids, "names": ["a", "b"]})
    assert text == sql.replace(":names", ":names_0, :names_1")
    assert flat == {"ids": json.dumps(long_ids), "names_0": "a", "names_1": "b"}
    text, flat = expand_lists(sql, {"ids": short_ids, "names": []})
    assert text == "SELECT id FROM t WHERE id IN (:ids_0, :ids_1) AND f IN ()"
    assert flat == {"ids_0": 3, "ids_1": 5}
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, f TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(n, "a") for n in range(40)])
    for ids in (long_ids, short_ids, []):
        found = conn.execute(*expand_lists(sql, {"ids": ids, "names": ["a"]})).fetchall()
        assert sorted(r[0] for r in found) == ids


def test_a_positional_query_binds_a_tuple_in_the_order_of_its_names() -> None:
    sql = "INSERT INTO t (a, b) VALUES (:a, :b) ON CONFLICT (a) DO UPDATE SET b = excluded.b"
    converted = queries.positional(sql, ("a", "b"))
    assert (
        converted
        == "INSERT INTO t (a, b) VALUES (?, ?) ON CONFLICT (a) DO UPDATE SET b = excluded.b"
    )
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a PRIMARY KEY, b)")
    conn.execute(converted, (1, "one"))
    assert conn.execute("SELECT a, b FROM t").fetchall() == [(1, "one")]
    with pytest.raises(StoreError, match=r"\('a', 'b'\), not \('b', 'a'\)"):
        queries.positional(sql, ("b", "a"))  # the tuple would bind each to the other's place
    with pytest.raises(StoreError, match="not"):
        queries.positional("SELECT :a, :a", ("a",))  # a name twice needs a dict


def test_every_postgres_query_doubles_a_literal_percent_sign() -> None:
    # Each named query runs with a parameter mapping (the read model's too), so psycopg reads
    # every % as a placeholder: a LIKE pattern's percent sign is written %%.
    lone = re.compile(r"%(?!\(\w+\)[sbt]|%)")
    for name, sql in queries.load("postgres").items():
        assert not lone.search(sql.replace("%%", "")), name
