"""`oncefire demo` writes only into a store of its own: one that does not exist yet, an empty
one, or one an earlier demo wrote (its marker document), holding no function and no document
of anyone else's. A user's store is refused with one line, unless `--force`."""

from __future__ import annotations

from oncefire import App  # as the demo itself imports it: an app of the public API
from oncefire.errors import ConfigError
from oncefire.stores.probe import StoreState, probe
from oncefire.stores.reads import demo as demo_reads

ADVICE = (
    "the demo writes only into a store of its own: run `oncefire demo` without --store (a new "
    "file), give a fresh one, or pass --force"
)


# Each story's functions, collections and marker document (None: it writes no document).
STORIES = {
    "orders": (("charge_on_order",), ("orders", "stats", "demo"), "demo/runs"),
    "tables": (("confirm", "email_when_shipped"), (), None),
}


def refuse_others_store(url: str, story: str = "orders") -> None:
    """ConfigError if the store at url holds functions other than the story's, documents
    outside its collections, or (with a marker document) documents no demo wrote. Reads
    only: a bare App, so that the demo's functions are not registered there first."""
    functions, collections, marker = STORIES[story]
    state = probe(url)
    if state is StoreState.FOREIGN:
        raise ConfigError(f"This store's database holds another application's tables: {ADVICE}.")
    if state is not StoreState.ONCEFIRE:
        return  # new, empty, or a URL only opening it can judge
    app = App(url)
    try:
        others = sorted(r.name for r in app.functions.list() if r.name not in functions)
        if others:
            raise ConfigError(f"This store holds function(s) {', '.join(others)}: {ADVICE}.")
        found = demo_reads.other_document(app.store, collections)
        if found is None and marker is not None and not app.db.document(marker).get().exists:
            found = demo_reads.other_document(app.store, [])  # a demo collection, not the demo's
        if found is not None:
            raise ConfigError(f"This store holds documents such as {found}: {ADVICE}.")
    finally:
        app.close()
