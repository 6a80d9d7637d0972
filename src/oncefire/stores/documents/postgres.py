"""Documents on PostgreSQL: pipelined write transactions and read snapshots from the pool,
each a PostgresTx, and the whole-document write in one statement (oncefire_set_document)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from oncefire.model import codec
from oncefire.model.paths import parent_of
from oncefire.stores.catalogue.cache import Catalog, CatalogCache, Fanout
from oncefire.stores.documents.postgres_tx import PostgresTx, set_document_args
from oncefire.stores.postgres.pool import Pool, PooledStatements
from oncefire.stores.postgres.statements import PostgresStatements


class PostgresDocuments:
    """Mixed into PostgresStore: the Documents contract over its pool."""

    pool: Pool
    _pooled: PooledStatements
    _catalogs: CatalogCache

    def _write(self) -> AbstractContextManager[PostgresStatements]:
        raise NotImplementedError

    @contextmanager
    def transaction(self) -> Iterator[PostgresTx]:
        """A write transaction for documents and events, pipelined."""
        with self.pool.transaction(is_pipelined=True) as conn:
            yield PostgresTx(conn, is_write=True, catalogs=self._catalogs)

    @contextmanager
    def read(self) -> Iterator[PostgresTx]:
        """A read-only snapshot for document reads and queries."""
        with self.pool.snapshot() as conn:
            yield PostgresTx(conn, is_write=False, catalogs=self._catalogs)

    def set_document(
        self,
        path: str,
        data_json: str,
        now: float,
        event_id: str,
        fanout_of: Callable[[Catalog], Fanout | None],
    ) -> bool:
        """Write a whole document and its event in one statement (one round trip); False,
        having written nothing, when the catalogue changed or the row is from before schema
        6 or holds numbers jsonb would not give back as written (codec.is_jsonb_exact): the
        caller then writes through a transaction, whose event counts what jsonb gives back."""
        catalog = self._catalogs.last()
        fanout = None if catalog is None else fanout_of(catalog)
        if catalog is None or fanout is None or not codec.is_jsonb_exact(data_json):
            return False
        args = set_document_args(
            catalog,
            fanout,
            path=path,
            collection=parent_of(path),
            data_json=data_json,
            now=now,
            event_id=event_id,
        )
        return bool(self._pooled.fetch("set_document", args)[0][0] != "stale")

    @contextmanager
    def _index_transaction(self) -> Iterator[tuple[PostgresStatements, PostgresTx]]:
        """A write transaction that waits for document writes in flight and holds off new
        ones (lock_documents_for_index) until it commits."""
        with self._write() as st:
            st.execute("lock_documents_for_index")
            yield st, PostgresTx(st.conn, is_write=True)
