"""Firebase Cloud Functions' Python names over oncefire: porting a main.py is changing imports.

    from oncefire.firebase import firestore_fn, https_fn, pubsub_fn, scheduler_fn, options
    from oncefire.firebase import initialize_app, firestore

Functions declared with these decorators register on one implicit default App (its store
from `--store` or $ONCEFIRE_STORE), which `oncefire worker main.py` and `oncefire run main.py`
find when the module holds no App of its own. See docs/firebase.md.
"""

from oncefire.firebase import (
    eventarc,
    eventarc_fn,
    exceptions,
    firestore,
    firestore_fn,
    functions,
    https_fn,
    options,
    pubsub_fn,
    scheduler_fn,
    storage,
    storage_fn,
    tasks_fn,
)
from oncefire.firebase.defaults import default_app, initialize_app

__all__ = [
    "default_app",
    "eventarc",
    "eventarc_fn",
    "exceptions",
    "firestore",
    "firestore_fn",
    "functions",
    "https_fn",
    "initialize_app",
    "options",
    "pubsub_fn",
    "scheduler_fn",
    "storage",
    "storage_fn",
    "tasks_fn",
]
