"""Which unrouted events are warned about (issue 44, point 3). An HTTP request is never
unrouted. Every event no function takes is still kept and delivered to a function registered
later, but the warnings (`unrouted_report().awaited`, the audit's `unrouted-events`, the
dashboard, the gauge) count only those of a collection, topic or table some function used to
take, or that an operator named (`app.keep_unrouted`, the `keep_unrouted` setting)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from oncefire import App
from oncefire.events import Event
from oncefire.web.http_functions import build_asgi
from tests.contract.old_schema import build_old_store


def ok(event: Event) -> None:
    pass


def rules(app: App) -> list[str]:
    return [f.rule for f in app.audit(since=3600, is_static=False).findings]


def test_an_http_request_is_never_unrouted(make_app: Callable[..., App]) -> None:
    app = make_app()

    @app.on_request("/charge", methods=["POST"])
    def charge(event: Event) -> dict[str, Any]:
        return {"ok": True}

    with TestClient(build_asgi(app)) as http:
        assert http.post("/charge", json={"amount": 5}).json() == {"ok": True}
        assert http.post("/charge", json={"amount": 6}).status_code == 200
    assert app.unrouted_count() == 0
    assert app.unrouted_report().kept == 0
    assert "unrouted-events" not in rules(app)
    assert app.stats()["charge"].succeeded == 2  # recorded as its attempts, as before


def test_writes_no_function_ever_took_are_kept_and_not_warned_about(
    make_app: Callable[..., App],
) -> None:
    app = make_app()
    app.on_document_created("orders/{id}", name="charge")(ok)
    app.db.document("logs/l1").set({"n": 1})  # a collection no function watches
    app.db.document("logs/l2").set({"n": 2})
    app.publish("telemetry", {"n": 3})  # a topic nothing subscribes to
    report = app.unrouted_report()
    assert (report.kept, report.awaited, report.origins) == (3, 0, ())
    assert app.unrouted_count() == 3
    assert "unrouted-events" not in rules(app)
    seen: list[str] = []
    later = make_app()  # still kept: the first function registered later takes them
    later.on_document_created("logs/{id}", name="archive")(lambda e: seen.append(e.source))
    later.drain()
    assert sorted(seen) == ["logs/l1", "logs/l2"]


def test_what_a_forgotten_function_took_is_warned_about(make_app: Callable[..., App]) -> None:
    old = make_app()
    old.on_document_created("users/{u}/orders/{o}", name="charge")(ok)
    old.on_message("payments", name="pay")(ok)
    old.on_document_created("invoices/i1", name="one_invoice")(ok)  # its collection, widened
    assert len(old.functions.list()) == 3  # stored
    app = make_app()
    for name in ("charge", "pay", "one_invoice"):
        app.functions.forget(name)
    app.db.document("users/u1/orders/o1").set({"n": 1})
    app.db.document("users/u1/orders/o2").set({"n": 2})
    app.publish("payments", {"n": 3})
    app.db.document("invoices/i2").set({"n": 4})
    app.db.document("users/u1").set({"n": 5})  # the users collection: no function took it
    report = app.unrouted_report()
    assert report.kept == 5
    assert report.awaited == 4
    assert report.origins == (
        ("collection users/u1/orders", 2),
        ("collection invoices", 1),
        ("topic payments", 1),
    )
    assert "unrouted-events" in rules(app)


def test_a_trigger_changed_in_code_leaves_what_it_took_awaited(
    make_app: Callable[..., App],
) -> None:
    first = make_app()
    first.on_document_created("orders/{id}", name="charge")(ok)
    assert first.functions.get("charge").source == "orders/{id}"
    second = make_app()  # the next deploy: charge now takes invoices
    second.on_document_created("invoices/{id}", name="charge")(ok)
    second.db.document("orders/o1").set({"n": 1})
    assert second.unrouted_report().origins == (("collection orders", 1),)


def test_keep_unrouted_warns_and_ignore_unrouted_stops_it(make_app: Callable[..., App]) -> None:
    app = make_app(keep_unrouted="audit-trail, archive/{day}/entries")  # the setting
    app.keep_unrouted("refunds")
    app.publish("refunds", {"n": 1})
    app.publish("audit-trail", {"n": 2})
    app.db.document("archive/d1/entries/e1").set({"n": 3})
    app.db.document("refunds/r1").set({"n": 4})  # a bare name: the collection too
    app.db.document("notes/n1").set({"n": 5})
    report = app.unrouted_report()
    assert (report.kept, report.awaited) == (5, 4)
    assert dict(report.origins) == {
        "topic refunds": 1,
        "topic audit-trail": 1,
        "collection archive/d1/entries": 1,
        "collection refunds": 1,
    }
    assert app.ignore_unrouted("refunds") == 3  # the topic, the collection and the table
    assert app.ignore_unrouted("refunds") == 0
    assert dict(app.unrouted_report().origins) == {
        "topic audit-trail": 1,
        "collection archive/d1/entries": 1,
    }
    assert app.unrouted_count() == 5  # still kept for a function registered later


@pytest.mark.empty_store  # it makes an older schema itself
def test_http_requests_marked_unrouted_before_schema_28_are_cleared(
    store_url: str, make_app: Callable[..., App]
) -> None:
    inserts = [
        "INSERT INTO oncefire_events (id, type, source, time, data, size, routing)"
        f" VALUES ('{eid}', '{kind}', '/charge', 1.0, '{{}}', 2, 'unrouted')"
        for eid, kind in (("e1", "http.request"), ("e2", "message.published"))
    ]
    build_old_store(store_url, 27, inserts)
    app = make_app()
    assert app.unrouted_count() == 1  # the message is still unrouted; the request is not
