"""Firebase Cloud Functions' Python names over oncefire: porting a main.py is `oncefire port`.

    from oncefire.firebase import firestore_fn, https_fn, pubsub_fn, scheduler_fn, options
    from oncefire.firebase import initialize_app, firestore, params, logger

Functions declared with these decorators register on one implicit default App (its store
from `--store` or $ONCEFIRE_STORE), which `oncefire worker main.py` and `oncefire run main.py`
find when the module holds no App of its own. See docs/firebase.md.
"""

from oncefire.firebase import (
    credentials,
    db,
    db_fn,
    eventarc,
    eventarc_fn,
    exceptions,
    firestore,
    firestore_fn,
    functions,
    https_fn,
    logger,
    options,
    params,
    pubsub_fn,
    scheduler_fn,
    storage,
    storage_fn,
    tasks_fn,
)
from oncefire.firebase.http import auth_context
from oncefire.firebase.http.callables import set_auth_verifier
from oncefire.firebase.registration.apps import default_app, delete_app, get_app, initialize_app

__all__ = [
    "auth_context",
    "credentials",
    "db",
    "db_fn",
    "default_app",
    "delete_app",
    "eventarc",
    "eventarc_fn",
    "exceptions",
    "firestore",
    "firestore_fn",
    "functions",
    "get_app",
    "https_fn",
    "initialize_app",
    "logger",
    "options",
    "params",
    "pubsub_fn",
    "scheduler_fn",
    "set_auth_verifier",
    "storage",
    "storage_fn",
    "tasks_fn",
]
