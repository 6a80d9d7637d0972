"""Document triggers: patterns, params, snapshots, and the transactional outbox."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from oncefire import (
    App,
    Change,
    ConfigError,
    DocumentSnapshot,
    InvalidPathError,
    InvalidPatternError,
)
from oncefire.events import Event
from oncefire.testing import TestClock


def test_created_passes_a_snapshot_and_the_params(app: App, clock: TestClock) -> None:
    seen: list[Event] = []

    @app.on_document_created("orders/{orderId}")
    def on_created(event: Event) -> None:
        seen.append(event)

    app.db.document("orders/o1").set({"amount": 500})
    app.drain()
    [event] = seen
    assert event.type == "document.created"
    assert event.source == "orders/o1"
    assert event.params == {"orderId": "o1"}
    assert event.attempt == 1
    assert event.function == "on_created"
    assert event.time == datetime.fromtimestamp(clock.now(), UTC)
    assert isinstance(event.data, DocumentSnapshot)
    assert event.data.exists
    assert event.data.to_dict() == {"amount": 500}
    assert event.data.id == "o1"


def test_updated_passes_before_and_after(app: App) -> None:
    seen: list[Event] = []

    @app.on_document_updated("orders/{orderId}")
    def on_updated(event: Event) -> None:
        seen.append(event)

    ref = app.db.document("orders/o1")
    ref.set({"status": "new"})
    ref.update({"status": "paid"})
    ref.delete()
    app.drain()
    [event] = seen
    assert isinstance(event.data, Change)
    assert event.data.before.to_dict() == {"status": "new"}
    assert event.data.after.to_dict() == {"status": "paid"}
    assert event.params == {"orderId": "o1"}


def test_deleted_passes_the_document_as_it_was(app: App) -> None:
    seen: list[Event] = []

    @app.on_document_deleted("orders/{orderId}")
    def on_deleted(event: Event) -> None:
        seen.append(event)

    ref = app.db.document("orders/o1")
    ref.set({"status": "new"})
    ref.delete()
    app.drain()
    [event] = seen
    assert event.type == "document.deleted"
    assert isinstance(event.data, DocumentSnapshot)
    assert event.data.to_dict() == {"status": "new"}


def test_written_sees_create_update_and_delete_as_changes(app: App) -> None:
    seen: list[Event] = []

    @app.on_document_written("orders/{orderId}")
    def on_written(event: Event) -> None:
        seen.append(event)

    ref = app.db.document("orders/o1")
    ref.set({"v": 1})
    app.drain()
    ref.set({"v": 2})
    app.drain()
    ref.delete()
    app.drain()
    assert [e.type for e in seen] == ["document.created", "document.updated", "document.deleted"]
    changes = [e.data for e in seen]
    assert all(isinstance(c, Change) for c in changes)
    assert [(c.before.exists, c.after.exists) for c in changes] == [
        (False, True),
        (True, True),
        (True, False),
    ]
    assert changes[1].before.to_dict() == {"v": 1}
    assert changes[1].after.to_dict() == {"v": 2}


def test_sub_collection_patterns_match_only_their_depth(app: App) -> None:
    items: list[Event] = []
    orders: list[Event] = []

    @app.on_document_created("orders/{orderId}/items/{itemId}")
    def on_item(event: Event) -> None:
        items.append(event)

    @app.on_document_created("orders/{orderId}")
    def on_order(event: Event) -> None:
        orders.append(event)

    app.db.document("orders/o1").set({"n": 1})
    app.db.document("orders/o1/items/i1").set({"sku": "x"})
    app.db.document("carts/c1/items/i1").set({"sku": "y"})
    app.drain()
    assert [e.params for e in items] == [{"orderId": "o1", "itemId": "i1"}]
    assert [e.source for e in orders] == ["orders/o1"]


def test_multi_segment_wildcards_match_store_writes_at_any_depth(
    make_app: Callable[..., App],
) -> None:
    worker = make_app()
    everywhere: list[tuple[str, dict[str, str]]] = []
    under_users: list[tuple[str, dict[str, str], bool]] = []

    @worker.on_document_written("{path=**}")
    def every_write(event: Event) -> None:
        everywhere.append((event.source, event.params))

    @worker.on_document_written("users/{uid}/{rest=**}")
    def user_tree(event: Event) -> None:
        assert isinstance(event.data, Change)
        under_users.append((event.type, event.params, event.data.after.exists))

    _ = worker.store  # registers its functions, so another App's writes are routed to them
    writer = make_app()
    writer.db.document("users/u1").set({"name": "Ada"})  # {rest=**} takes one or more segments
    writer.db.document("users/u1/posts/p1").set({"title": "hi"})
    writer.db.document("users/u1/posts/p1/comments/c1").set({"text": "first"})
    writer.db.document("users/u1/posts/p1").delete()
    worker.drain()
    assert sorted(everywhere, key=str) == [
        ("users/u1", {"path": "users/u1"}),
        ("users/u1/posts/p1", {"path": "users/u1/posts/p1"}),
        ("users/u1/posts/p1", {"path": "users/u1/posts/p1"}),
        ("users/u1/posts/p1/comments/c1", {"path": "users/u1/posts/p1/comments/c1"}),
    ]
    assert sorted(under_users, key=str) == [
        ("document.created", {"uid": "u1", "rest": "posts/p1"}, True),
        ("document.created", {"uid": "u1", "rest": "posts/p1/comments/c1"}, True),
        ("document.deleted", {"uid": "u1", "rest": "posts/p1"}, False),
    ]


def test_literal_segments_and_wildcard_collections_match(app: App) -> None:
    fixed: list[str] = []
    anywhere: list[dict[str, str]] = []

    @app.on_document_written("config/main")
    def on_config(event: Event) -> None:
        fixed.append(event.source)

    @app.on_document_created("{coll}/{docId}")
    def on_any(event: Event) -> None:
        anywhere.append(event.params)

    app.db.document("config/main").set({"a": 1})
    app.db.document("config/other").set({"a": 1})
    app.drain()
    assert fixed == ["config/main"]
    assert sorted(anywhere, key=str) == [
        {"coll": "config", "docId": "main"},
        {"coll": "config", "docId": "other"},
    ]


def test_each_function_gets_its_own_delivery_of_one_event(app: App) -> None:
    calls: list[tuple[str, str]] = []

    @app.on_document_created("orders/{o}")
    def first(event: Event) -> None:
        calls.append(("first", event.id))

    @app.on_document_written("orders/{o}")
    def second(event: Event) -> None:
        calls.append(("second", event.id))

    app.db.document("orders/o1").set({"n": 1})
    assert app.drain().attempts == 2
    assert sorted(name for name, _ in calls) == ["first", "second"]
    assert len({event_id for _, event_id in calls}) == 1
    states = app.store.delivery_states(calls[0][1])
    assert sorted(states) == [("first", "succeeded", 1), ("second", "succeeded", 1)]


def test_a_function_registered_after_a_write_receives_it_once(app: App) -> None:
    app.db.document("orders/o1").set({"n": 1})  # no function yet: kept unrouted
    seen: list[str] = []

    @app.on_document_written("orders/{o}")
    def late(event: Event) -> None:
        seen.append(event.source)

    app.db.document("orders/o2").set({"n": 2})
    app.drain()
    app.drain()
    assert sorted(seen) == ["orders/o1", "orders/o2"]


def test_functions_registered_by_another_app_on_the_store_get_deliveries(
    make_app: Callable[..., App],
) -> None:
    worker_app = make_app()
    seen: list[str] = []

    @worker_app.on_document_created("orders/{o}")
    def charge(event: Event) -> None:
        seen.append(event.source)

    _ = worker_app.store  # registers its functions in the store
    writer = make_app()
    writer.db.document("orders/o1").set({"n": 1})
    worker_app.drain()
    assert seen == ["orders/o1"]


def test_async_functions_run(app: App) -> None:
    seen: list[str] = []

    @app.on_document_created("orders/{o}")
    async def on_created(event: Event) -> None:
        seen.append(event.params["o"])

    app.db.document("orders/o1").set({"n": 1})
    assert app.drain()["succeeded"] == 1
    assert seen == ["o1"]


@pytest.mark.parametrize(
    "pattern",
    ["orders/{order-id}", "orders/{}", "orders/x{id}", "orders", "orders/{a}/items/{a}", ""],
)
def test_a_bad_pattern_is_refused_at_registration(app: App, pattern: str) -> None:
    with pytest.raises(InvalidPatternError) as info:

        @app.on_document_created(pattern)
        def never(event: Event) -> None:
            raise AssertionError

    assert str(info.value).endswith(".")
    assert app.triggers == {}


@pytest.mark.parametrize("pattern", ["orders/*", "orders/**", "*/{id}"])
def test_a_star_is_refused_with_a_sentence_naming_the_wildcards(app: App, pattern: str) -> None:
    with pytest.raises(InvalidPatternError) as info:
        app.on_document_written(pattern)(lambda event: None)
    assert "'*' is not a wildcard here; name it, like {orderId} for one segment or " in str(
        info.value
    )
    assert str(info.value).endswith("{path=**} for one or more.")
    assert app.triggers == {}
    app.db.document("orders/o1").set({"n": 1})  # not taken as a literal id: kept unrouted
    assert app.unrouted_count() == 1


def test_two_functions_cannot_share_a_name(app: App) -> None:
    @app.on_document_created("orders/{o}")
    def charge(event: Event) -> None: ...

    with pytest.raises(ConfigError, match="name="):

        @app.on_document_created("carts/{c}", name="charge")
        def other(event: Event) -> None: ...


@pytest.mark.parametrize(
    "options",
    [
        {"retries": 3},
        {"timeout": 0},
        {"max_instances": 0},
        {"max_event_age": -1},
        {"retry_policy": "fast"},
        {"permanent_errors": ["ValueError"]},
    ],
)
def test_bad_trigger_options_are_refused(app: App, options: dict[str, object]) -> None:
    with pytest.raises(ConfigError):

        @app.on_document_created("orders/{o}", **options)
        def fn(event: Event) -> None: ...


def test_a_function_name_must_be_a_valid_id(app: App) -> None:
    with pytest.raises(InvalidPathError, match="slashes"):

        @app.on_document_created("orders/{o}", name="a/b")
        def fn(event: Event) -> None: ...

    assert app.triggers == {}
