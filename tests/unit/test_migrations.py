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
