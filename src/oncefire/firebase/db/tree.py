"""The Realtime Database's JSON tree, kept as documents of the App's store.

Each leaf is one document of the reserved collection `__rtdb__`, its id the leaf's path with
`$` before each key (/messages/m1/original is `__rtdb__/v$messages$m1$original`), so a node's
value is one range read of the ids under its own. A write replaces the leaves that changed
and emits its value events (changes.py) in the same transaction. Writes take one lock first:
they run one at a time, as in a Realtime Database instance, and a transaction sees no other
write between its read and its write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oncefire.documents import Database
from oncefire.errors import TransactionError
from oncefire.features import usage
from oncefire.firebase.db import changes as value_changes
from oncefire.firebase.db.values import Path, from_leaves, leaves, value_at, with_value
from oncefire.model import codec
from oncefire.model.lineage import write_auth
from oncefire.model.outbox import emit
from oncefire.model.trigger_kind import TriggerKind
from oncefire.stores.base import DocumentTx

COLLECTION = "__rtdb__"
LOCK = f"{COLLECTION}/lock"  # not a leaf's id: those start with "v"
PAGE = 500


def document_path(path: Path) -> str:
    """The document that holds the leaf at path."""
    return f"{COLLECTION}/v" + "".join(f"${key}" for key in path)


def _path_of(document: str) -> Path:
    return tuple(document.split("/", 1)[1].split("$")[1:])


def read_leaves(tx: DocumentTx, path: Path) -> dict[Path, Any]:
    """The leaves at and under path."""
    found: dict[Path, Any] = {}
    own = tx.get_document(document_path(path))
    if own is not None:
        return {path: own["data"]["v"]}  # nothing lies under a leaf
    prefix = document_path(path) + "$"
    after = prefix
    while True:
        page = tx.documents_page(COLLECTION, after, PAGE)
        for document, record in page:
            if not document.startswith(prefix):
                return found
            found[_path_of(document)] = record["data"]["v"]
        if len(page) < PAGE:
            return found
        after = page[-1][0]


class Tree:
    """The JSON tree of one App's store."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def read(self, path: Path) -> Any:
        """The stored value at path (None when nothing is there)."""
        with self.db.reading() as tx:
            found = read_leaves(tx, path)
        usage.count_reads(max(1, len(found)))
        return from_leaves(found, path)

    def write(self, path: Path, compute: Callable[[Any], Any]) -> tuple[Any, Any]:
        """Replace the value at path with compute(the value there now), in one transaction
        with the value events it makes; (before, after). compute's error ends it unwritten."""
        if self.db.active_transaction() is not None:
            raise TransactionError(
                "A Realtime Database write cannot join a document transaction: make it "
                "before or after the `with db.transaction()` block."
            )
        with self.db.store.transaction() as tx:
            tx.get_document(LOCK)  # Realtime Database writes run one at a time
            patterns = [
                value_changes.pattern(f.source)
                for f in tx.functions()
                if f.kind == TriggerKind.DATABASE
            ]
            top = value_changes.top_of(path, patterns)
            above = _leaf_above(tx, top)
            before_leaves = {} if above is not None else read_leaves(tx, top)
            before_top = from_leaves(before_leaves, top)
            inner = path[len(top) :]
            before = value_at(before_top, inner)
            after = compute(before)
            if value_changes.same(before, after):
                return before, after  # nothing changes: nothing written, no event
            after_top = with_value(before_top, inner, after)
            if above is not None:
                tx.delete_document(document_path(above))
            _store(tx, before_leaves, leaves(after_top, top), self.db.clock.now())
            auth = write_auth()
            now = self.db.clock.now()
            for change in value_changes.changes(top, before_top, after_top, path, patterns):
                data = {"before": change.before, "after": change.after}
                if auth is not None:
                    data["auth"] = auth
                emit(
                    tx,
                    event_type=change.event_type,
                    source="/".join(change.path),
                    data=data,
                    now=now,
                )
        usage.count_write()
        return before, after


def _leaf_above(tx: DocumentTx, path: Path) -> Path | None:
    """The ancestor of path that holds a leaf (then nothing lies at path), if any."""
    for depth in range(len(path)):
        if tx.get_document(document_path(path[:depth])) is not None:
            return path[:depth]
    return None


def _store(tx: DocumentTx, old: dict[Path, Any], new: dict[Path, Any], now: float) -> None:
    """Write the leaves that changed: delete those gone, put those new or different."""
    for path in old.keys() - new.keys():
        tx.delete_document(document_path(path))
    for path, leaf in new.items():
        if path not in old or not value_changes.same(old[path], leaf):
            data_json = codec.encode_document({"v": leaf})
            tx.put_document(document_path(path), COLLECTION, data_json, now, now)
