"""Field filters: an update trigger with fields=[...] starts only when one of those fields
changed; the filter is stored with the function, so every writer fans out by it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from oncefire import DELETE_FIELD, App
from oncefire.errors import ConfigError
from oncefire.events import Event


def watch(app: App, kind: str = "updated", **options: Any) -> list[str]:
    """Register a function on orders/{o} with a field filter; the kinds of events it ran."""
    ran: list[str] = []
    register: Callable[..., Callable[[Callable[[Event], None]], Callable[[Event], None]]]
    register = getattr(app, f"on_document_{kind}")

    @register("orders/{o}", name="watched", fields=["status", "customer.email"], **options)
    def watched(event: Event) -> None:
        ran.append(event.type)

    return ran


def pending(app: App) -> int:
    return app.stats()["watched"].pending


def test_an_update_of_a_watched_field_makes_one_delivery(make_app: Callable[..., App]) -> None:
    app = make_app()
    ran = watch(app)
    ref = app.db.document("orders/o1")
    ref.set({"status": "new", "amount": 5})
    ref.update({"status": "paid"})
    assert pending(app) == 1
    app.drain()
    assert ran == ["document.updated"]


def test_an_update_of_other_fields_only_makes_no_delivery(make_app: Callable[..., App]) -> None:
    app = make_app()
    ran = watch(app)
    ref = app.db.document("orders/o1")
    ref.set({"status": "new", "amount": 5, "customer": {"email": "a@x", "name": "A"}})
    ref.update({"amount": 6})
    ref.set({"status": "new", "amount": 7, "customer": {"email": "a@x", "name": "B"}})
    with app.db.transaction() as tx:
        tx.set(ref, {"note": "n"}, merge=True)
    assert pending(app) == 0
    app.drain()
    assert ran == []


def test_a_nested_dotted_path_is_compared(make_app: Callable[..., App]) -> None:
    app = make_app()
    ran = watch(app)
    ref = app.db.document("orders/o1")
    ref.set({"customer": {"email": "a@x", "name": "A"}})
    ref.update({"customer.name": "B"})  # not watched
    ref.update({"customer.email": "b@x"})  # watched
    ref.set({"customer": {"name": "B"}})  # the watched field removed: a change
    ref.update({"customer.email": "c@x"})  # the watched field added back: a change
    ref.update({"customer": DELETE_FIELD})  # its parent removed: a change
    app.drain()
    assert ran == ["document.updated"] * 4


def test_a_written_trigger_with_fields_always_runs_on_create_and_delete(
    make_app: Callable[..., App],
) -> None:
    app = make_app()
    ran = watch(app, "written")
    ref = app.db.document("orders/o1")
    ref.set({"status": "new", "amount": 5})
    ref.update({"amount": 6})  # filtered out
    ref.update({"status": "paid"})
    ref.delete()
    app.drain()
    assert ran == ["document.created", "document.updated", "document.deleted"]


def test_the_filter_is_stored_so_any_writer_fans_out_by_it(
    make_app: Callable[..., App],
) -> None:
    app = make_app()
    ran = watch(app)
    app.db.document("warm/up").set({})  # the store is open and the function registered
    writer = make_app()  # another process writing documents, with no function of its own
    ref = writer.db.document("orders/o1")
    ref.set({"status": "new", "amount": 5})
    ref.set({"status": "new", "amount": 6})
    ref.set({"status": "paid", "amount": 6})
    app.drain()
    assert ran == ["document.updated"]


def test_a_filter_on_one_function_leaves_the_others_alone(
    make_app: Callable[..., App],
) -> None:
    app = make_app()
    ran = watch(app)
    every: list[str] = []

    @app.on_document_updated("orders/{o}")
    def all_updates(event: Event) -> None:
        every.append(event.type)

    ref = app.db.document("orders/o1")
    ref.set({"status": "new", "amount": 5})
    ref.set({"status": "new", "amount": 6})
    app.drain()
    assert (ran, every) == ([], ["document.updated"])


@pytest.mark.parametrize(
    ("kind", "fields", "message"),
    [
        ("created", ["status"], "on_document_created does not take it"),
        ("deleted", ["status"], "on_document_deleted does not take it"),
        ("updated", "status", "must be a non-empty list"),
        ("updated", [], "must be a non-empty list"),
        ("written", ["status", 3], "not a field path"),
        ("updated", ["customer..email"], "not a field path"),
        ("updated", [""], "not a field path"),
    ],
)
def test_a_bad_fields_option_is_a_config_error(
    app: App, kind: str, fields: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        getattr(app, f"on_document_{kind}")("orders/{o}", fields=fields)


def test_fields_is_not_an_option_of_other_triggers(app: App) -> None:
    with pytest.raises(ConfigError, match="fields"):
        app.on_message("t", fields=["a"])


def test_an_update_every_filter_declined_is_not_unrouted(make_app: Callable[..., App]) -> None:
    app = make_app()
    watch(app)
    ref = app.db.document("orders/o1")
    ref.set({"status": "new", "amount": 5})  # a creation no function takes: unrouted
    assert app.unrouted_count() == 1
    ref.update({"amount": 6})  # a function takes orders/{o}; its filter declined this one
    assert app.unrouted_count() == 1
    app.db.document("invoices/i1").set({"amount": 6})  # no function: unrouted, as before
    assert app.unrouted_count() == 2


def test_a_function_registered_later_is_offered_only_the_updates_it_watches(
    make_app: Callable[..., App],
) -> None:
    writer = make_app()
    ref = writer.db.document("orders/o1")
    ref.set({"status": "new", "amount": 5})
    ref.update({"amount": 6})  # unrouted: no function yet
    ref.update({"status": "paid"})  # unrouted
    app = make_app()
    ran = watch(app)  # registered later, with fields=["status", "customer.email"]
    app.drain()
    assert ran == ["document.updated"]
    assert app.stats()["watched"].succeeded == 1
