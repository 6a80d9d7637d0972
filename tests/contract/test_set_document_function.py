"""PostgreSQL's oncefire_set_document lives in one file (sql/postgres/functions/
set_document.sql) that migrations 006, 008 and 026 apply: a new store and an upgraded one
both hold that definition, and a document write goes through it."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.stores import migrations
from oncefire.testing import TestClock

pytestmark = pytest.mark.postgres

FUNCTION = (
    resources.files("oncefire.stores")
    .joinpath("sql", "postgres", "functions", "set_document.sql")
    .read_text(encoding="utf-8")
)
BODY = FUNCTION.split("$$")[1]
# The function as an oncefire before schema 26 knew it, in short: it wrote nothing new and
# answered 'stale' (the signature is the file's, which CREATE OR REPLACE must keep).
SIGNATURE = FUNCTION[FUNCTION.index("CREATE OR REPLACE") : FUNCTION.index(" RETURNS text")]
OLD = f"{SIGNATURE} RETURNS text LANGUAGE plpgsql AS $$ BEGIN RETURN 'stale'; END $$"


def installed_body(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        row = pg.execute("SELECT prosrc FROM pg_proc WHERE proname = 'oncefire_set_document'")
        found = row.fetchall()
    assert len(found) == 1, found
    return str(found[0][0])


def test_the_migrations_apply_the_one_definition() -> None:
    scripts = dict(migrations.load("postgres"))
    applying = [v for v, sql in scripts.items() if "FUNCTION oncefire_set_document" in sql]
    assert applying == [6, 8, 26]
    assert all(BODY in scripts[v] for v in applying)
    for version, sql in scripts.items():  # every apply line was replaced
        assert not re.search(r"^--\s*apply:", sql, re.MULTILINE), version


def test_a_new_store_holds_the_files_definition(postgres_store_url: str) -> None:
    App(postgres_store_url).close()
    assert installed_body(postgres_store_url) == BODY


@pytest.mark.empty_store
def test_a_store_of_schema_25_upgrades_to_the_files_definition(
    postgres_store_url: str, clock: TestClock
) -> None:
    import psycopg

    with psycopg.connect(postgres_store_url, autocommit=True) as pg:
        pg.execute("CREATE TABLE oncefire_schema (version integer NOT NULL)")
        for version, sql in migrations.load("postgres"):
            if version <= 25:
                pg.execute(sql.encode())
                pg.execute("INSERT INTO oncefire_schema (version) VALUES (%s)", (version,))
        pg.execute(OLD.encode())
    assert installed_body(postgres_store_url) != BODY
    app = App(postgres_store_url, clock=clock)  # opening the store upgrades it
    seen: list[str] = []

    @app.on_document_created("orders/{o}")
    def record(event: Event) -> None:
        seen.append(event.params["o"])

    assert app.store.migrate() == migrations.latest("postgres")
    assert installed_body(postgres_store_url) == BODY
    app.db.document("orders/o1").set({"n": 1})
    app.drain()
    assert seen == ["o1"]
    app.close()
