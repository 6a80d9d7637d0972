"""Contract tests of oncefire.firebase on every store: Firestore, RTDB, storage, tasks, events."""
