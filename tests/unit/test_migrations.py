"""Migration scripts: numbered per dialect, split into statements."""

from __future__ import annotations

from oncefire.stores import migrations


def test_migration_statements_ignore_semicolons_in_comments() -> None:
    sql = "-- one; two\nCREATE TABLE a (x); -- trailing; note\nDROP INDEX b;\n"
    assert migrations.statements(sql) == ["CREATE TABLE a (x)", "DROP INDEX b"]


def test_both_dialects_have_the_same_numbered_migrations() -> None:
    sqlite = [version for version, _ in migrations.load("sqlite")]
    postgres = [version for version, _ in migrations.load("postgres")]
    assert sqlite == postgres == list(range(1, len(sqlite) + 1))


def test_migration_statements_keep_semicolons_and_dashes_inside_literals() -> None:
    sql = (
        "INSERT INTO a (x) VALUES ('one; two -- not a comment');\n"
        "INSERT INTO a (x) VALUES ('it''s; here'); -- a real comment; with a semicolon\n"
        'CREATE TABLE "odd;name" (x);\n'
    )
    assert migrations.statements(sql) == [
        "INSERT INTO a (x) VALUES ('one; two -- not a comment')",
        "INSERT INTO a (x) VALUES ('it''s; here')",
        'CREATE TABLE "odd;name" (x)',
    ]


def test_a_trigger_body_is_one_statement() -> None:
    sql = (
        "CREATE TRIGGER t AFTER INSERT ON a BEGIN\n"
        "  UPDATE b SET n = CASE WHEN new.x > 0 THEN 1 ELSE 0 END;\n"
        "  DELETE FROM c WHERE y = ';';\n"
        "END;\n"
        "CREATE INDEX i ON a (x);\n"
    )
    found = migrations.statements(sql)
    assert len(found) == 2
    assert found[0].startswith("CREATE TRIGGER t") and found[0].endswith("END")
    assert "DELETE FROM c WHERE y = ';';" in found[0]
    assert found[1] == "CREATE INDEX i ON a (x)"


def test_a_dollar_quoted_body_is_one_statement() -> None:
    sql = "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;\nSELECT 2;"
    assert migrations.statements(sql) == [
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$",
        "SELECT 2",
    ]


def test_every_shipped_migration_splits_into_statements_sqlite_runs() -> None:
    import sqlite3

    conn = sqlite3.connect(":memory:")
    for _, sql in migrations.load("sqlite"):
        for statement in migrations.statements(sql):
            conn.execute(statement)
    conn.close()
