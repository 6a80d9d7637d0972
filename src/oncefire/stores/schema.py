"""Creating and upgrading a store's schema by the numbered migrations (migrations.py), and
the rule that keeps it out of another application's database: a database that holds tables
of its own and no oncefire table gets oncefire's only from an explicit migrate
(`oncefire migrate`, `app.migrate()`), never from opening a store on it."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from oncefire.errors import ForeignDatabaseError, SchemaVersionError
from oncefire.stores import migrations
from oncefire.stores.connection import Statements

NAMED = 3  # the most of the database's own tables an error names


def own_tables(names: Sequence[str]) -> list[str]:
    """The tables of the application that owns the database: none if oncefire's schema is
    there (then oncefire may upgrade it), else every table but the database's internal ones."""
    if any(name.startswith("oncefire_") for name in names):
        return []
    return sorted(name for name in names if not name.startswith("sqlite_"))


def refuse_foreign(names: Sequence[str]) -> None:
    """Raise ForeignDatabaseError if these tables are another application's alone."""
    found = own_tables(names)
    if found:
        shown = ", ".join(found[:NAMED]) + (", ..." if len(found) > NAMED else "")
        raise ForeignDatabaseError(
            f"The store's database holds tables of its own ({shown}) and no oncefire schema: "
            "run `oncefire migrate` to add oncefire's tables beside them, or use another store."
        )


class Schema:
    """Mixed into SqlStore: `migrate`, over what each dialect supplies."""

    dialect: str

    def _write(self) -> AbstractContextManager[Statements]:
        raise NotImplementedError

    def _lock_schema(self, st: Statements) -> None:
        """Make a concurrent migration wait for this one (PostgreSQL); nothing by default."""

    def _run_script(self, st: Any, sql: str) -> None:
        """Run one migration's statements in st's transaction."""
        raise NotImplementedError

    def migrate(self, *, beside_tables: bool = True) -> int:
        """Create or upgrade the schema; return its version. beside_tables=False refuses to
        create it in a database that holds tables of its own (ForeignDatabaseError)."""
        steps = migrations.load(self.dialect)
        with self._write() as st:
            self._lock_schema(st)
            if not beside_tables:
                refuse_foreign([str(row[0]) for row in st.fetch("probe_table_names")])
            st.execute("create_schema_table")
            current = int(st.fetch("schema_version")[0][0] or 0)
            if current > steps[-1][0]:
                raise SchemaVersionError(
                    f"The store's schema is at {current} but this oncefire knows only "
                    f"{steps[-1][0]}: upgrade oncefire."
                )
            for version, sql in steps:
                if version > current:
                    self._run_script(st, sql)
                    st.execute("write_schema_version", {"version": version})
                    current = version
        return current
