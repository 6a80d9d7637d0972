"""`firebase_admin.db`: the Realtime Database, kept in the App's store. Its `Reference` and
`Query` (references.py) sit on the values (values.py), the tree in the store (tree.py), the
value events a write makes (changes.py), push ids and query order (push_ids.py, ordering.py)."""

from oncefire.firebase.db.references import Query, Reference, TransactionAbortedError, reference

__all__ = ["Query", "Reference", "TransactionAbortedError", "reference"]
