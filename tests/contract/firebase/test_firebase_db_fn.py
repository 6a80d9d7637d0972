"""db_fn: a Realtime Database write starts the functions whose reference pattern it touches,
with the before and after of each path it changed, in the write's own transaction; a write
that changes nothing starts none."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from oncefire import App
from oncefire.firebase import auth_context, db, db_fn
from oncefire.firebase.registration.apps import set_default_app
from oncefire.testing import deliver, fail_store_calls, make_event

Seen = list[tuple[str, dict[str, str], Any]]


@pytest.fixture
def default_app(app: App) -> Iterator[App]:
    set_default_app(app)
    yield app
    set_default_app(None)


def watch(kind: str, reference: str, name: str) -> Seen:
    """(event type's last word, params, data) of each event a db_fn function gets; data is
    (before, after) for a Change."""
    seen: Seen = []

    def record(event: db_fn.Event[Any]) -> None:
        data = event.data
        if isinstance(data, db_fn.Change):
            data = (data.before, data.after)
        seen.append((event.type.rsplit(".", 1)[-1], dict(event.params), data))

    record.__name__ = name
    getattr(db_fn, f"on_value_{kind}")(reference=reference)(record)
    return seen


def test_a_write_above_a_nested_pattern_fires_for_that_child(default_app: App) -> None:
    originals = watch("written", "/messages/{pushId}/original", "originals")
    db.reference("/messages/m1").set({"original": "hello", "likes": 0})
    db.reference("/messages/m1").update({"likes": 1})  # original unchanged: no event
    db.reference("/messages/m1/original").set("hello")  # the same value: no event
    db.reference("/messages").update({"m1/original": "HELLO", "m2": {"original": "hi"}})
    db.reference("/messages/m1").delete()
    default_app.drain()
    assert originals == [
        ("written", {"pushId": "m1"}, (None, "hello")),
        ("written", {"pushId": "m1"}, ("hello", "HELLO")),
        ("written", {"pushId": "m2"}, (None, "hi")),
        ("written", {"pushId": "m1"}, ("HELLO", None)),
    ]


def test_each_kind_gets_its_own_changes(default_app: App) -> None:
    created = watch("created", "/users/{uid}", "created")
    updated = watch("updated", "/users/{uid}", "updated")
    deleted = watch("deleted", "/users/{uid}", "deleted")
    users = db.reference("/users")
    users.child("ada").set({"name": "Ada"})
    users.child("ada/name").set("Ada L.")  # below the pattern: the user changed
    users.child("ada").set({"name": "Ada L."})  # nothing changes
    users.delete()
    default_app.drain()
    assert created == [("created", {"uid": "ada"}, {"name": "Ada"})]
    assert updated == [("updated", {"uid": "ada"}, ({"name": "Ada"}, {"name": "Ada L."}))]
    assert deleted == [("deleted", {"uid": "ada"}, {"name": "Ada L."})]


def test_patterns_with_several_wildcards_and_bare_stars(default_app: App) -> None:
    rooms = watch("written", "/rooms/{room}/messages/{msg}", "rooms")
    any_room = watch("created", "/rooms/*/members/{member}", "members")
    everything = watch("written", "/logs/{rest=**}", "logs")
    db.reference("/rooms/r1").set({"messages": {"a": "x", "b": "y"}, "members": {"ann": True}})
    db.reference("/logs/2026/01/02").set("line")
    default_app.drain()
    assert rooms == [
        ("written", {"room": "r1", "msg": "a"}, (None, "x")),
        ("written", {"room": "r1", "msg": "b"}, (None, "y")),
    ]
    assert any_room == [("created", {"member": "ann"}, True)]
    assert everything == [
        ("written", {"rest": "2026"}, (None, {"01": {"02": "line"}})),
        ("written", {"rest": "2026/01"}, (None, {"02": "line"})),
        ("written", {"rest": "2026/01/02"}, (None, "line")),
    ]


def test_a_failed_write_starts_nothing(app: App, default_app: App) -> None:
    seen = watch("written", "/jobs/{id}", "jobs")
    with fail_store_calls(app, "write"), pytest.raises(Exception, match="unavailable"):
        db.reference("/jobs/j1").set({"state": "new"})

    def refuse(value: Any) -> Any:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        db.reference("/jobs/j2").transaction(refuse)
    default_app.drain()
    assert (seen, db.reference("/jobs").get()) == ([], None)


def test_a_writer_without_the_functions_still_fires_them(default_app: App, make_app: Any) -> None:
    seen = watch("written", "/inbox/{id}", "inbox")
    default_app.drain()  # registers the function in the store's catalogue
    writer = make_app()  # another process, say: no function of its own
    db.reference("/inbox/i1", app=writer).set("hello")
    default_app.drain()
    assert seen == [("written", {"id": "i1"}, (None, "hello"))]


def test_the_writer_is_named_in_the_event(default_app: App) -> None:
    authors: list[tuple[str, str | None]] = []

    @db_fn.on_value_written(reference="/notes/{id}")
    def note(event: db_fn.Event[Any]) -> None:
        authors.append((event.auth_type, event.auth_id))

    @db_fn.on_value_created(reference="/requests/{id}")
    def worker(event: db_fn.Event[Any]) -> None:
        db.reference(f"/notes/{event.params['id']}").set("by the worker")

    db.reference("/notes/plain").set(1)
    with auth_context.acting_as("uid-1"):
        db.reference("/notes/user").set(1)
    with auth_context.acting_as(None):
        db.reference("/notes/anonymous").set(1)
    db.reference("/requests/r1").set(1)
    default_app.drain()
    default_app.drain()
    assert authors == [
        ("unknown", None),
        ("app_user", "uid-1"),
        ("unauthenticated", None),
        ("admin", None),
    ]


def test_make_event_builds_a_value_event_a_db_fn_function_takes(default_app: App) -> None:
    seen = watch("written", "/carts/{cart}/items/{item}", "items")
    event = make_event("value.updated", "carts/c1/items/i1", {"n": 2}, before={"n": 1})
    gone = make_event("value.deleted", "carts/c1/items/i2", {"n": 5})
    deliver(default_app, "items", event, times=1)
    deliver(default_app, "items", gone, times=1)
    assert seen == [
        ("written", {"cart": "c1", "item": "i1"}, ({"n": 1}, {"n": 2})),
        ("written", {"cart": "c1", "item": "i2"}, ({"n": 5}, None)),
    ]
