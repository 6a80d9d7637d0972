"""`Reference` and `Query`: the Realtime Database as `firebase_admin.db` reaches it.

    ref = db.reference("/messages")
    ref.push({"original": "hello"}).child("original").get()  # 'hello'
    ref.order_by_child("score").limit_to_last(3).get()
    ref.child("count").transaction(lambda n: (n or 0) + 1)

A write emits its `db_fn` value events in its own transaction (tree.py). Listeners (`listen`)
are not offered: react to writes with a db_fn function. See docs/firebase.md.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from oncefire.errors import (
    ConfigError,
    InvalidDocumentError,
    InvalidPathError,
    StoreConflictError,
    StoreUnavailableError,
    TransactionAbortedError,
)
from oncefire.firebase.db import ordering
from oncefire.firebase.db.push_ids import push_id
from oncefire.firebase.db.tree import Tree
from oncefire.firebase.db.values import (
    Path,
    normalised,
    parse,
    shown,
    text,
    with_value,
)
from oncefire.firebase.registration.apps import current_app
from oncefire.model import codec

__all__ = ["Query", "Reference", "TransactionAbortedError", "reference"]

MAX_TRANSACTION_TRIES = 25  # as the Admin SDK's transaction()


def reference(path: str = "/", app: Any = None, url: str | None = None) -> Reference:
    """A Reference to a path of the database of an App (the given one, else the App running
    this code, else the default App); url names a Google database and is ignored."""
    return Reference(parse(path), app)


class _Changed(Exception):
    """set_if_unchanged found another ETag: nothing was written."""

    def __init__(self, value: Any) -> None:
        self.value = value


def etag_of(value: Any) -> str:
    """The ETag of a value: a digest of its JSON."""
    digest = hashlib.sha1(codec.canonical(value).encode()).digest()  # a digest, not a secret
    return base64.b64encode(digest).decode()


class Reference:
    """A node of the database, as `firebase_admin.db.Reference`."""

    def __init__(self, path: Path, app: Any = None) -> None:
        self._path = path
        self._app = app

    @property
    def _tree(self) -> Tree:
        return Tree((self._app or current_app()).db)

    def _now_ms(self) -> int:
        return int((self._app or current_app()).clock.now() * 1000)

    @property
    def key(self) -> str | None:
        """The last key of the path; None for the root."""
        return self._path[-1] if self._path else None

    @property
    def path(self) -> str:
        """The path, such as '/messages/m1'."""
        return text(self._path)

    @property
    def parent(self) -> Reference | None:
        """The parent node; None for the root."""
        return Reference(self._path[:-1], self._app) if self._path else None

    def child(self, path: str) -> Reference:
        """A node below this one ('a' or 'a/b'; not starting with '/')."""
        if not path or not isinstance(path, str):
            raise InvalidPathError(
                f'Invalid path argument: "{path}". Path must be a non-empty string.'
            )
        if path.startswith("/"):
            raise InvalidPathError(
                f'Invalid path argument: "{path}". Child path must not start with "/"'
            )
        return Reference((*self._path, *parse(path)), self._app)

    def get(self, etag: bool = False, shallow: bool = False) -> Any:
        """The value here (None if nothing); with etag=True, (value, etag); shallow=True
        gives True for each child that is an object."""
        if etag and shallow:
            raise InvalidDocumentError("etag and shallow cannot both be set to True.")
        value = self._tree.read(self._path)
        if shallow and isinstance(value, dict):
            return {key: True if isinstance(child, dict) else child for key, child in value.items()}
        return (shown(value), etag_of(value)) if etag else shown(value)

    def get_if_changed(self, etag: str) -> tuple[bool, Any, str | None]:
        """(True, value, etag) if the value's ETag is not etag, else (False, None, None)."""
        if not isinstance(etag, str):
            raise InvalidDocumentError("ETag must be a string.")
        value, now = self.get(etag=True)
        return (False, None, None) if now == etag else (True, value, now)

    def set(self, value: Any) -> None:
        """Replace the value here (None is refused: use delete())."""
        if value is None:
            raise InvalidDocumentError("Value must not be None.")
        now_ms = self._now_ms()
        self._tree.write(self._path, lambda current: normalised(value, now_ms, current, self.path))

    def set_if_unchanged(self, expected_etag: str, value: Any) -> tuple[bool, Any, str]:
        """Set the value if the ETag here is still expected_etag: (True, value, new etag),
        else (False, the value here, its etag)."""
        if not isinstance(expected_etag, str):
            raise InvalidDocumentError("Expected ETag must be a string.")
        if value is None:
            raise InvalidDocumentError("Value must not be none.")
        now_ms = self._now_ms()

        def compute(current: Any) -> Any:
            if etag_of(current) != expected_etag:
                raise _Changed(current)
            return normalised(value, now_ms, current, self.path)

        try:
            _, after = self._tree.write(self._path, compute)
        except _Changed as changed:
            return False, shown(changed.value), etag_of(changed.value)
        return True, value, etag_of(after)

    def push(self, value: Any = "") -> Reference:
        """A new child with a chronological push id, holding value; its reference."""
        if value is None:
            raise InvalidDocumentError("Value must not be None.")
        child = Reference((*self._path, push_id(self._now_ms())), self._app)
        child.set(value)
        return child

    def update(self, value: dict[str, Any]) -> None:
        """Set several children at once ('a' or deeper 'a/b' keys; None deletes one)."""
        if not value or not isinstance(value, dict):
            raise InvalidDocumentError("Value argument must be a non-empty dictionary.")
        if None in value:
            raise InvalidDocumentError("Dictionary must not contain None keys.")
        children = [(parse(key), item) for key, item in value.items()]
        if any(not keys for keys, _ in children):
            raise InvalidPathError("update() keys name children: not '' or '/'.")
        now_ms = self._now_ms()

        def compute(current: Any) -> Any:
            for keys, item in children:
                inner = current.get(keys[0]) if isinstance(current, dict) else None
                for key in keys[1:]:
                    inner = inner.get(key) if isinstance(inner, dict) else None
                where = f"{self.path}/{'/'.join(keys)}"
                current = with_value(current, keys, normalised(item, now_ms, inner, where))
            return current

        self._tree.write(self._path, compute)

    def delete(self) -> None:
        """Delete the value here and everything under it."""
        self._tree.write(self._path, lambda current: None)

    def transaction(self, transaction_update: Callable[[Any], Any]) -> Any:
        """Replace the value here with transaction_update(the value now), atomically; the
        new value. Its error ends the transaction unwritten, and reaches the caller."""
        if not callable(transaction_update):
            raise InvalidDocumentError("transaction_update must be a function.")
        now_ms = self._now_ms()

        def compute(current: Any) -> Any:
            new = transaction_update(shown(current))
            if new is None:
                raise InvalidDocumentError("Value must not be none.")
            return normalised(new, now_ms, current, self.path)

        last: Exception | None = None
        for _ in range(MAX_TRANSACTION_TRIES):
            try:
                _, after = self._tree.write(self._path, compute)
                return shown(after)
            except (StoreConflictError, StoreUnavailableError) as exc:
                last = exc
        raise TransactionAbortedError("Transaction aborted after failed retries.") from last

    def order_by_child(self, path: str) -> Query:
        """A query ordering the children by their value at path."""
        if path in (ordering.KEY, ordering.VALUE, ordering.PRIORITY):
            raise InvalidPathError(f"Illegal child path: {path}")
        if not path or not isinstance(path, str) or path.startswith("/"):
            raise InvalidPathError(
                f'Invalid path argument: "{path}". Child path must not start with "/"'
            )
        return Query(self, "/".join(parse(path)))

    def order_by_key(self) -> Query:
        """A query ordering the children by key."""
        return Query(self, ordering.KEY)

    def order_by_value(self) -> Query:
        """A query ordering the children by value."""
        return Query(self, ordering.VALUE)

    def listen(self, callback: Any) -> Any:
        """Listeners are not offered: react to writes with a db_fn function."""
        raise ConfigError(
            "db.reference(...).listen is not offered: react to writes with a db_fn function "
            "(on_value_written) instead."
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reference) and other._path == self._path

    def __hash__(self) -> int:
        return hash(self._path)

    def __repr__(self) -> str:
        return f"Reference({self.path!r})"


class Query:
    """An ordered, filtered read of a node's children, as `firebase_admin.db.Query`: each
    method changes this query and returns it."""

    def __init__(self, reference: Reference, order_by: str) -> None:
        self._reference = reference
        self._window = ordering.Window(order_by)

    def _set(self, **changes: Any) -> Query:
        self._window = dataclasses.replace(self._window, **changes)
        return self

    def limit_to_first(self, limit: int) -> Query:
        """Keep the first limit children."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidDocumentError("Limit must be a non-negative integer.")
        if self._window.last is not None:
            raise InvalidDocumentError("Cannot set both first and last limits.")
        return self._set(first=limit)

    def limit_to_last(self, limit: int) -> Query:
        """Keep the last limit children."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidDocumentError("Limit must be a non-negative integer.")
        if self._window.first is not None:
            raise InvalidDocumentError("Cannot set both first and last limits.")
        return self._set(last=limit)

    def start_at(self, start: Any) -> Query:
        """Keep children whose index is start or after."""
        if start is None:
            raise InvalidDocumentError("Start value must not be None.")
        return self._set(start=start)

    def end_at(self, end: Any) -> Query:
        """Keep children whose index is end or before."""
        if end is None:
            raise InvalidDocumentError("End value must not be None.")
        return self._set(end=end)

    def equal_to(self, value: Any) -> Query:
        """Keep children whose index is value."""
        if value is None:
            raise InvalidDocumentError("Equal to value must not be None.")
        return self._set(start=value, end=value)

    def get(self) -> Any:
        """The children kept, as an OrderedDict in the query's order (the node's value if it
        is not an object; None if there is nothing)."""
        node = self._reference._tree.read(self._reference._path)
        result = ordering.apply(node, self._window)
        return result if not isinstance(result, OrderedDict) or node is not None else None
