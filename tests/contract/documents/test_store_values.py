"""One rule for every store: what one refuses, all refuse (NUL in any string or id), and what
one gives back, all give back (-0.0 as 0.0, a float of 1e16 or more as that float), so a
document valid on one store stays valid, and the same, on another."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncefire import App
from oncefire.errors import InvalidDocumentError, InvalidPathError, OncefireError
from oncefire.events import Event
from oncefire.model import codec


def event_count(url: str) -> int:
    """The events the store holds, read on a connection of the test's own."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return int(conn.execute("SELECT count(*) FROM oncefire_events").fetchone()[0])
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as pg:
        found = pg.execute("SELECT count(*) FROM oncefire_events").fetchone()
        return int(found[0]) if found else 0


def counted(app: App, url: str) -> tuple[int, Any]:
    """The events, and the document things/t1: what a refused write must leave as it was."""
    return event_count(url), app.db.document("things/t1").get().to_dict()


def _tx_claim(app: App, key: str) -> None:
    with app.db.transaction() as tx:
        tx.claim(key)


WITH_NUL: list[tuple[str, Callable[[App], object], type[OncefireError], str]] = [
    (
        "field value",
        lambda a: a.db.document("things/t1").set({"s": "a\x00b"}),
        InvalidDocumentError,
        "Field s",
    ),
    (
        "nested value",
        lambda a: a.db.document("things/t1").set({"m": {"l": ["ok", "\x00"]}}),
        InvalidDocumentError,
        "Field m.l[1]",
    ),
    (
        "field name",
        lambda a: a.db.document("things/t1").set({"a\x00": 1}),
        InvalidDocumentError,
        "field name 'a\\x00'",
    ),
    (
        "merged field",
        lambda a: a.db.document("things/t1").set({"s": "\x00"}, merge=True),
        InvalidDocumentError,
        "Field s",
    ),
    (
        "updated field",
        lambda a: a.db.document("things/t1").update({"m.s": "\x00"}),
        InvalidDocumentError,
        "Field m.s",
    ),
    (
        "updated field path",
        lambda a: a.db.document("things/t1").update({"m\x00": 1}),
        InvalidDocumentError,
        "U+0000",
    ),
    (
        "document id",
        lambda a: a.db.document("things/t\x00").set({"n": 1}),
        InvalidPathError,
        "'t\\x00'",
    ),
    (
        "collection id",
        lambda a: a.db.collection("things\x00").add({"n": 1}),
        InvalidPathError,
        "\\x00",
    ),
    ("topic", lambda a: a.publish("t\x00", {"n": 1}), InvalidPathError, "topic 't\\x00'"),
    ("message data", lambda a: a.publish("t", {"s": "\x00"}), InvalidDocumentError, "data.s"),
    (
        "attribute value",
        lambda a: a.publish("t", {}, attributes={"k": "v\x00"}),
        InvalidDocumentError,
        "attributes.k",
    ),
    (
        "attribute name",
        lambda a: a.publish("t", {}, attributes={"k\x00": "v"}),
        InvalidDocumentError,
        "'k\\x00'",
    ),
    ("claim key", lambda a: _tx_claim(a, "key\x00"), InvalidDocumentError, "'key\\x00'"),
    (
        "index field",
        lambda a: a.db.collection("things").index("f\x00"),
        InvalidDocumentError,
        "U+0000",
    ),
]


@pytest.mark.parametrize(
    ("where", "write", "error", "words"), WITH_NUL, ids=[case[0] for case in WITH_NUL]
)
def test_nul_is_refused_alike_by_every_store_and_nothing_is_written(
    app: App,
    store_url: str,
    where: str,
    write: Callable[[App], object],
    error: type[OncefireError],
    words: str,
) -> None:
    # SQLite kept NUL and PostgreSQL refused it (with a driver error, after the write began):
    # now both refuse it, before the store, with the same error.
    @app.on_message("t")
    def take(event: Event) -> None:
        """Makes a publish a delivery."""

    app.db.document("things/t1").set({"n": 1, "m": {"s": "ok"}})
    before = counted(app, store_url)
    with pytest.raises(error) as raised:
        write(app)
    assert words in str(raised.value), str(raised.value)
    assert counted(app, store_url) == before


# Values a store gave back changed: PostgreSQL's jsonb has no -0.0, and reads 1e+16 as the
# integer 10000000000000000 (and 2.5e+22 as 25000000000000000000000, another number).
FLOATS = [0.0, -0.0, 1.5, 1e15, 1e16, -1e16, 2.5e22, 1.2345678901234567e20, 1.7976931348623157e308]


def test_floats_come_back_the_same_from_every_store(app: App) -> None:
    ref = app.db.document("things/floats")
    data = {"each": FLOATS, "one": -0.0, "big": 2.5e22, "in": {"deep": [1e16]}}
    ref.set(data)
    back = ref.get().to_dict()
    assert back == {
        "each": [x + 0.0 for x in FLOATS],
        "one": 0.0,
        "big": 2.5e22,
        "in": {"deep": [1e16]},
    }
    assert all(type(x) is float for x in back["each"])
    assert repr(back["one"]) == "0.0"  # -0.0 is stored as 0.0 everywhere: one rule
    with app.db.transaction() as tx:  # the transaction's write gives the same
        tx.set(app.db.document("things/tx"), data)
    assert app.db.document("things/tx").get().to_dict() == back


def test_a_message_carries_its_floats_unchanged_on_every_store(app: App) -> None:
    seen: list[Any] = []

    @app.on_message("t")
    def take(event: Event) -> None:
        seen.append(event.data.data)

    app.publish("t", {"x": -0.0, "big": 1e16, "huge": 2.5e22})
    app.drain()
    assert seen == [{"x": 0.0, "big": 1e16, "huge": 2.5e22}]
    assert [type(v) for v in seen[0].values()] == [float, float, float]
    assert repr(seen[0]["x"]) == "0.0"


def test_a_write_of_negative_zero_over_zero_is_no_change(app: App) -> None:
    writes: list[str] = []

    @app.on_document_written("things/{id}")
    def watch(event: Event) -> None:
        writes.append(event.type)

    ref = app.db.document("things/z")
    ref.set({"n": 0.0})
    ref.set({"n": -0.0})  # the same stored value: no event
    app.drain()
    assert writes == ["document.created"]


def test_an_http_request_with_nul_is_answered_alike_by_every_store(app: App) -> None:
    # PostgreSQL answered 500 (its event could not be stored) where SQLite served the request.
    from starlette.testclient import TestClient

    from oncefire.web.http_functions import build_asgi

    @app.on_request("/items/{id}", methods=["GET", "POST"])
    def items(event: Event) -> dict[str, Any]:
        return {"id": event.params["id"], "body": len(event.data.content)}

    http = TestClient(build_asgi(app, []))
    refused = http.get("/items/%00")
    assert refused.status_code == 400 and "NUL" in refused.json()["message"]
    # A body that holds NUL is the function's, whole; its event keeps it as a binary body
    # is kept (no text, its size and hash).
    served = http.post("/items/a", content=b'{"s": "a\x00b"}')
    assert served.status_code == 200 and served.json() == {"id": "a", "body": 12}
    [execution] = app.history.executions("items")
    stored = app.history.event(execution.event_id).data
    assert stored["body"] is None and stored["body_size"] == 12


def test_an_edited_payload_with_nul_is_refused_and_the_dead_letter_kept(app: App) -> None:
    @app.on_message("t", retry=False)
    def take(event: Event) -> None:
        raise RuntimeError("refused")

    app.publish("t", {"n": 1})
    app.drain()
    [letter] = app.dead_letters.list()
    edited = {"data": {"n": "\x00"}, "attributes": {}}
    with pytest.raises(InvalidDocumentError, match=r"The edited payload: Field data\.n"):
        app.operators.replay_edited(letter.id, edited)
    assert [d.id for d in app.dead_letters.list()] == [letter.id]
    assert app.operators.audit_log() == []


# -- any document, on both stores at once --------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=6) | st.sampled_from(
    ["", "\x00", "a\x00", '"":', "\\u0000", "e+1", "-0.0"]
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**25), 10**25)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([-0.0, 1e16, 2.5e22, -1.7976931348623157e308])
    | _text
)
_documents = st.dictionaries(
    _text,
    st.recursive(
        _scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
        max_leaves=8,
    ),
    max_size=4,
)


def outcome(app: App, path: str, data: dict[str, Any]) -> tuple[str, Any]:
    """("stored", what reads back) or ("refused", the error's class and message)."""
    try:
        app.db.document(path).set(data)
    except OncefireError as exc:
        return "refused", (type(exc).__name__, str(exc))
    return "stored", app.db.document(path).get().to_dict()


_written = itertools.count()


@pytest.mark.postgres
@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_documents)
def test_any_document_is_taken_or_refused_alike_and_read_back_alike(
    sqlite_url: str, postgres_store_url: str, data: dict[str, Any]
) -> None:
    path = f"things/d{next(_written)}"
    apps = [App(sqlite_url), App(postgres_store_url)]
    try:
        on_sqlite, on_postgres = (outcome(app, path, data) for app in apps)
    finally:
        for app in apps:
            app.close()
    assert on_sqlite == on_postgres
    if on_sqlite[0] == "stored":
        back = on_sqlite[1]
        assert codec.canonical(back) == codec.canonical(data)  # the same values, -0.0 as 0.0
