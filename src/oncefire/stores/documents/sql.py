"""Document operations that are the same on SQLite and PostgreSQL: declaring an index (and
indexing the documents already there, a chunk a transaction) and the paths a TTL policy
deletes. The transaction itself is SqlTx (sql_tx.py) and the dialect's."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from oncefire.stores.connection import Statements

if TYPE_CHECKING:
    from oncefire.stores.documents.sql_tx import SqlTx

# Documents indexed per transaction when a field is declared: the write lock is held for one
# chunk at a time, not for the whole collection.
INDEX_CHUNK = 500


class SqlDocuments:
    """Mixed into SqlStore: index declaration and TTL paths over named queries."""

    def _one(self) -> Statements:
        raise NotImplementedError

    def _index_transaction(self) -> AbstractContextManager[tuple[Statements, SqlTx]]:
        """A write transaction no document write can interleave with."""
        raise NotImplementedError

    def declare_index(
        self,
        collection: str,
        field: str,
        entries_of: Callable[[Iterator[tuple[str, dict[str, Any]]]], dict[str, str]],
    ) -> None:
        """Declare an indexed field, then index the documents already there, INDEX_CHUNK a
        transaction, so no write waits long for the lock. From the declaration on, every
        write keeps the field's entries, and a chunk indexes its documents as they are, with
        no write between its read and its entries; queries use the field once all chunks are
        done. A declaration cut off (or running in another process) is taken up again."""
        args = {"collection": collection, "field": field}
        state = self._one().fetch("index_field_declared", args)
        if state and not state[0][0]:
            return  # the common case at every start: built, and no write lock taken
        with self._index_transaction() as (st, _):
            if not st.fetch("index_field_declared", args):
                st.execute("declare_index_field", args)
                st.execute("clear_index_field", args)
                st.execute("bump_catalog")  # writes keep its entries from now on
        after = ""
        while True:
            with self._index_transaction() as (st, tx):
                page = tx.documents_page(collection, after, INDEX_CHUNK)
                if page:
                    entries = entries_of(iter(page))
                    st.execute("clear_index_entries_of", {**args, "paths": [p for p, _ in page]})
                    rows = [{**args, "value": v, "path": p} for p, v in entries.items()]
                    st.execute_many("insert_index_entry", rows)
            if len(page) < INDEX_CHUNK:
                break
            after = page[-1][0]
        with self._index_transaction() as (st, _):
            st.execute("complete_index_field", args)
            st.execute("bump_catalog")  # queries use it from now on

    def expired_paths(
        self, collection: str, field: str, ranges: Sequence[tuple[str, str]], limit: int
    ) -> list[str]:
        """Paths of at most limit documents of a collection whose key of an indexed field
        lies in one of two key ranges, each walked from its lowest key (one index probe)."""
        (numbers_from, numbers_until), (times_from, times_until) = ranges
        args = {
            "collection": collection,
            "field": field,
            "numbers_from": numbers_from,
            "numbers_until": numbers_until,
            "times_from": times_from,
            "times_until": times_until,
            "limit": limit,
        }
        return [row[0] for row in self._one().fetch("expired_paths", args)][:limit]
