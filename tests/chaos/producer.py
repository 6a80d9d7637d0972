"""The producer of the chaos suite: writes documents in batches and acknowledges each batch in
the ledger once its transaction returned. A batch that failed (the store went away) is written
again; a write that committed unseen is then a no-op, the same data emitting no second event.

Usage: python producer.py STORE LEDGER COLLECTION FUNCTION FIRST COUNT BATCH [PREFIX]
$CHAOS_PAUSE: seconds between two batches (none by default), to spread the load over a fault.
"""

from __future__ import annotations

import os
import sys
import time

from oncefire.errors import OncefireError
from tests.chaos import ledger


def produce(argv: list[str]) -> None:
    """Write and acknowledge COLLECTION/PREFIX<n> for n in [FIRST, FIRST + COUNT)."""
    _store, folder, collection, function = argv[:4]
    first, count, batch = (int(a) for a in argv[4:7])
    prefix = argv[7] if len(argv) > 7 else "k"
    book = ledger.Ledger(folder, "producer")
    # Its functions are registered before the first write (issue 11.1).
    from tests.chaos.chaos_app import app

    app.store  # noqa: B018 - opens the store (from $ONCEFIRE_STORE) and registers them
    pause = float(os.environ.get("CHAOS_PAUSE", "0"))
    n = first
    while n < first + count:
        keys = [f"{prefix}{i:06d}" for i in range(n, min(n + batch, first + count))]
        try:
            with app.db.transaction() as tx:
                for key in keys:
                    tx.set(app.db.document(f"{collection}/{key}"), {"n": key})
        except OncefireError as exc:
            book.write("retry", keys[0], error=str(exc)[:200])
            time.sleep(0.2)
            continue
        book.acks(keys, function=function)
        n += len(keys)
        time.sleep(pause)
    app.close()


if __name__ == "__main__":
    produce(sys.argv[1:])
