"""The demo's second story (`oncefire demo --tables`): functions on the application's own
table. The application writes an `orders` table with plain SQL; a shipped order is emailed
once, whatever the number of deliveries; a rolled-back write emits nothing; an update of a
column no function watches costs no event (docs/tables.md)."""

from __future__ import annotations

import threading
import time
from typing import Any

from oncefire import App, idempotent
from oncefire.events import Event
from oncefire.stores import queries

app = App()
emails: list[str] = []


@app.on_row_inserted("demo_orders")
def confirm(event: Event) -> None:
    """Say an order was placed."""
    print(f"    -> order {event.params['id']} placed: {event.data.after['item']}")


@app.on_row_updated("demo_orders", columns=["status"])
@idempotent()
def email_when_shipped(event: Event) -> None:
    """Email the customer once when an order ships."""
    before, after = event.data.before, event.data.after
    if before["status"] != "shipped" and after["status"] == "shipped":
        emails.append(after["email"])
        print(f"    -> email to {after['email']}: order {event.params['id']} has shipped")


def connect(url: str) -> Any:
    """The application's own connection to the store's database (autocommit)."""
    if url.startswith("sqlite"):
        import sqlite3

        return sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=30)
    import psycopg

    return psycopg.connect(url, autocommit=True)


def main() -> None:
    """Write and change orders with plain SQL while a worker serves the row functions."""
    url = app.settings.store
    print(f"oncefire demo --tables on {url}\n")
    db = connect(url)
    sql = queries.load(app.store.dialect)  # the application's statements, in demo.sql
    db.execute(sql["demo_drop_orders"])
    db.execute(sql["demo_create_orders"])
    print(f"watching: {app.watch_tables()}\n")
    db.execute(sql["demo_place_orders"])
    db.execute(sql["demo_begin"])
    db.execute(sql["demo_place_order_3"])
    db.execute(sql["demo_rollback"])
    print("inserted orders 1 and 2; order 3's insert was rolled back: no event for it")
    db.execute(sql["demo_note_order_1"])
    print("noted order 1 (a column no function watches: no event)")
    db.execute(sql["demo_ship_orders"])
    print("shipped both orders\n")

    from oncefire.engine.worker import Worker

    worker = Worker(app.runtime, concurrency=4)
    thread = threading.Thread(target=worker.run, name="demo-worker")
    thread.start()
    deadline = time.monotonic() + 60
    try:  # the worker routes the table's events within sweep_every, then runs them
        while len(emails) < 2 or any(f.pending or f.running for f in app.stats().values()):
            if time.monotonic() > deadline:
                print("the worker did not finish within 60 s: see its log above")
                break
            time.sleep(0.2)
    finally:
        worker.stop_requested.set()
        thread.join()
    db.close()
    print(f"\nemails sent: {sorted(emails)}")
