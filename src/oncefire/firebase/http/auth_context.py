"""Who a function's writes are by, for `firestore_fn.on_document_*_with_auth_context`
(`event.auth_type`, `event.auth_id`) and `db_fn` events. A callable (https_fn.on_call) runs
inside `acting_as` of its caller; otherwise a write made while an event function runs is the
system's, one made by `oncefire doc set` is unauthenticated, and any other is not known.

    with auth_context.acting_as("uid-123"):
        firestore.client().document("notes/n1").set({"text": "hi"})  # auth_id "uid-123"
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from oncefire.errors import ConfigError
from oncefire.model.lineage import CURRENT_AUTH, UNAUTHENTICATED, Auth, written_by

__all__ = ["acting_as", "current"]


def acting_as(uid: str | None) -> AbstractContextManager[None]:
    """Within the block, this context's writes are by the user uid (None or "": by an
    unauthenticated caller). Blocks nest; the inner one wins."""
    if uid is not None and not isinstance(uid, str):
        raise ConfigError(f"acting_as takes a user id (str) or None; got {uid!r}.")
    return written_by({"type": "user", "id": uid} if uid else UNAUTHENTICATED)


def current() -> Auth | None:
    """Who this context's writes are by, as acting_as set it (None: not set)."""
    return CURRENT_AUTH.get()
