"""A store keeps the catalogue (registered functions, declared index fields) between
transactions, and a registration or declaration made through another App is seen at once."""

from __future__ import annotations

from collections.abc import Callable

from oncefire import App
from oncefire.events import Event
from oncefire.query import index_key
from oncefire.stores.catalogue.cache import Catalog, CatalogCache


def test_a_function_registered_by_another_app_gets_the_next_write(
    make_app: Callable[..., App],
) -> None:
    writer = make_app()
    writer.db.document("orders/o1").set({"n": 1})  # the writer keeps a catalogue without it
    worker = make_app()
    seen: list[str] = []

    @worker.on_document_written("orders/{o}")
    def record(event: Event) -> None:
        seen.append(event.source)

    _ = worker.store  # registers the function
    writer.db.document("orders/o2").set({"n": 2})
    worker.drain()
    # o2 through the writer's fresh catalogue; o1, kept unrouted, once the function came.
    assert sorted(seen) == ["orders/o1", "orders/o2"]


def test_a_function_registered_again_with_other_triggers_is_seen_by_the_next_write(
    make_app: Callable[..., App],
) -> None:
    first = make_app()

    @first.on_document_created("orders/{o}", name="record")
    def created(event: Event) -> None:
        pass

    first.db.document("orders/o1").set({"n": 1})
    second = make_app()
    seen: list[tuple[str, str]] = []

    @second.on_document_updated("orders/{o}", name="record")
    def updated(event: Event) -> None:
        seen.append((event.type.rsplit(".", 1)[-1], event.source))

    _ = second.store  # re-registers "record" for updates only
    first.db.document("orders/o1").set({"n": 2})
    first.db.document("orders/o3").set({"n": 3})
    second.drain()
    # The first write was delivered as registered then; of the later two, only the update
    # (drain runs them on its attempt threads, in either order).
    assert sorted(seen) == [("created", "orders/o1"), ("updated", "orders/o1")]


def test_an_index_declared_by_another_app_covers_the_next_write(
    make_app: Callable[..., App],
) -> None:
    writer = make_app()
    writer.db.document("orders/o1").set({"status": "paid"})  # kept: no index on orders
    other = make_app()
    other.db.collection("orders").index("status")
    writer.db.document("orders/o2").set({"status": "paid"})
    with other.store.read() as tx:
        indexed = [path for path, _ in tx.list_documents("orders", ("status", index_key("paid")))]
    assert indexed == ["orders/o1", "orders/o2"]
    found = writer.db.collection("orders").where("status", "==", "paid").get()
    assert [s.id for s in found] == ["o1", "o2"]


def test_writes_read_the_catalogue_again_only_after_it_changed(
    make_app: Callable[..., App],
) -> None:
    app = make_app()
    _ = app.store
    loads: list[int] = []

    class Counting(CatalogCache):
        def at(self, version: int, load: Callable[[int], Catalog]) -> Catalog:
            def counted(v: int) -> Catalog:
                loads.append(v)
                return load(v)

            return super().at(version, counted)

    app.store._catalogs = Counting()  # type: ignore[attr-defined]
    for n in range(5):
        app.db.document(f"orders/o{n}").set({"n": n})
    assert len(loads) == 1
    other = make_app()

    @other.on_document_created("orders/{o}")
    def record(event: Event) -> None:
        pass

    _ = other.store
    app.db.document("orders/o9").set({"n": 9})
    app.db.document("orders/o10").set({"n": 10})
    assert len(loads) == 2 and loads[1] > loads[0]
