"""Document and outbox operations inside one SQLite transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from oncefire.events import StoredEvent
from oncefire.model import codec
from oncefire.model.paths import parent_of
from oncefire.stores import queries
from oncefire.stores.catalogue.cache import (
    Catalog,
    CatalogCache,
    building_fields,
    fields_by_collection,
    function_entry,
)
from oncefire.stores.connection import SqliteStatements
from oncefire.stores.documents.sql_tx import SqlTx


class SqliteTx(SqlTx):
    """Document and outbox operations inside one SQLite transaction."""

    def __init__(self, conn: sqlite3.Connection, catalogs: CatalogCache | None = None) -> None:
        super().__init__(SqliteStatements(conn, queries.load("sqlite")), catalogs)
        self.conn = conn

    def _decode(self, data: Any) -> Any:
        return codec.loads(data)

    def get_document(self, path: str) -> dict[str, Any] | None:
        args = {"collection": parent_of(path), "path": path}
        if self._catalog is None:
            # The catalogue version rides along with the first read: no statement of its own.
            (row,) = self.statements.fetch("document_with_catalog", args)
            self.catalog_at(row[3])
        else:
            rows = self.statements.fetch("get_document", args)
            row = rows[0] if rows else (None,)
        if row[0] is None:
            return None
        return {"data": codec.loads(row[0]), "create_time": row[1], "update_time": row[2]}

    def _load_catalog(self, version: int) -> Catalog:
        # Read in the caller's transaction, one snapshot with the version it was given.
        functions = self.statements.fetch("catalog_functions")
        fields = self.statements.fetch("catalog_index_fields")
        return Catalog(
            version,
            tuple(function_entry(r) for r in functions),
            fields_by_collection(fields),
            building_fields(fields),
        )

    def append(
        self,
        event: StoredEvent,
        functions: Sequence[str],
        run_at: float,
        *,
        is_new: bool = False,
        data_json: str | None = None,
    ) -> bool:
        inserted = self.statements.count(
            "insert_event",
            {
                "id": event.id,
                "type": event.type,
                "source": event.source,
                "time": event.time,
                "data": codec.dumps(event.data) if data_json is None else data_json,
                "size": event.size,
                "root_id": event.root_id,
                "depth": event.depth,
                "routing": None if functions else "unrouted",
            },
        )
        if inserted == 0:
            return False
        self.statements.execute_many(
            "insert_delivery",
            [
                {"event_id": event.id, "function": name, "run_at": run_at, "created_at": event.time}
                for name in functions
            ],
        )
        return True

    def add_deliveries(self, event_id: str, functions: Sequence[str], run_at: float) -> list[int]:
        ids = []
        for name in functions:
            args = {"event_id": event_id, "function": name, "run_at": run_at}
            ((delivery_id,),) = self.statements.fetch("add_delivery", args)
            ids.append(int(delivery_id))
        return ids
