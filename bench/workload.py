"""The oncefire app the benchmarks run: one function on "bench/{id}", chosen by BENCH_FUNCTION.

Workers load it with `oncefire worker bench/workload.py --store URL --processes 2`; the
benchmark scripts build the same app with build(url, function) to write the documents.

    noop         does nothing (throughput, growth)
    soak         does nothing, with retry=False (the soak: a short retention is refused for a
                 function that may still redeliver, and the default retry window is 1860 s)
    latency      reports its start time to the latency probe (benchlib.report_start)
    poison       always raises, on a short retry policy (6 attempts in about 1.6 s)
    write        writes one document in a transaction (the base line of tx.claim)
    write_claim  the same write under `if tx.claim(event.id)`
    idempotent   does nothing, under @idempotent
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from oncefire import App, RetryPolicy, idempotent
from oncefire.events import Event

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import report_start

FUNCTIONS = ("noop", "soak", "latency", "poison", "write", "write_claim", "idempotent")
PATTERN = "bench/{id}"
POISON_DELAY = float(os.environ.get("BENCH_POISON_DELAY", "0.05"))
POISON_POLICY = RetryPolicy(max_attempts=6, first_delay=POISON_DELAY, multiplier=2, max_delay=1)


class PoisonError(RuntimeError):
    """What the poison function raises, every time."""


def build(store: str | None = None, function: str | None = None) -> App:
    """An App with the one benchmark function registered."""
    function = function or os.environ.get("BENCH_FUNCTION", "noop")
    if function not in FUNCTIONS:
        raise SystemExit(f"BENCH_FUNCTION={function!r}: use one of {', '.join(FUNCTIONS)}")
    app = App(store)
    options: dict[str, Any] = {"name": function}
    if function == "poison":
        options["retry_policy"] = POISON_POLICY
    if function == "soak":
        options["retry"] = False

    def out(event: Event) -> Any:
        return app.db.document(f"out/{event.params['id']}")

    if function in ("noop", "soak"):

        def body(event: Event) -> None:
            pass

    elif function == "latency":

        def body(event: Event) -> None:
            report_start(event.params["id"])

    elif function == "poison":

        def body(event: Event) -> None:
            raise PoisonError(f"poison event {event.params['id']}")

    elif function == "write":

        def body(event: Event) -> None:
            with app.db.transaction() as tx:
                tx.set(out(event), {"seen": event.id})

    elif function == "write_claim":

        def body(event: Event) -> None:
            with app.db.transaction() as tx:
                if tx.claim(event.id):
                    tx.set(out(event), {"seen": event.id})

    else:

        @idempotent(lease=60)
        def body(event: Event) -> None:
            pass

    app.on_document_created(PATTERN, **options)(body)
    return app


app = build()
