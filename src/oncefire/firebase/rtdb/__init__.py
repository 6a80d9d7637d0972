"""The Realtime Database behind `oncefire.firebase.db` and `db_fn`: its values (values.py),
its tree in the App's store (tree.py), the value events a write makes (changes.py), push
ids and query order (push_ids.py, ordering.py)."""
