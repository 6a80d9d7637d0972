"""oncefire.firebase: a Firebase-style main.py ported by changing only its imports runs as it
is, one test per trigger kind, on both stores; Firebase's defaults and options."""

from __future__ import annotations

import base64
import logging
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from oncefire import App
from oncefire.errors import ConfigError
from oncefire.firebase import firestore_fn, pubsub_fn, scheduler_fn
from oncefire.firebase.registration.apps import set_default_app
from oncefire.firebase.scheduler_fn import to_oncefire_schedule
from oncefire.loader import load_app, load_module
from oncefire.testing import TestClock
from oncefire.web.server import HttpServer

pytestmark = pytest.mark.sqlite_only  # above the store; PostgreSQL: postgres_smoke

SAMPLE = Path(__file__).parent / "apps" / "firebase_main.py"


@pytest.fixture
def default_app(store_url: str, clock: TestClock) -> Iterator[App]:
    """A fresh default App on the test's store and clock, forgotten afterwards."""
    app = App(store_url, clock=clock)
    set_default_app(app)
    # Each test loads the sample anew, as a fresh `oncefire worker` process would.
    sys.modules.pop("oncefire_user_firebase_main", None)
    yield app
    set_default_app(None)
    app.close()


@pytest.fixture
def sample(default_app: App) -> ModuleType:
    """The ported sample, loaded as `oncefire worker` loads it."""
    return load_module(SAMPLE)


def test_the_loader_finds_the_implicit_app_of_a_firebase_module(default_app: App) -> None:
    assert load_app(str(SAMPLE)) is default_app
    kinds = {name: t.kind for name, t in default_app.triggers.items()}
    assert kinds == {
        "addmessage": "http",
        "makeuppercase": "document",
        "countedits": "document",
        "hellopubsub": "message",
        "accountcleanup": "schedule",
    }


@pytest.mark.postgres_smoke
def test_document_triggers_get_a_snapshot_params_and_a_change(
    default_app: App, sample: ModuleType
) -> None:
    ref = default_app.db.collection("messages").add({"original": "hello"})
    default_app.drain()
    assert ref.get().to_dict() == {"original": "hello", "uppercase": "HELLO"}
    ref.update({"original": "bye"})
    default_app.drain()
    # makeuppercase's own update changed "uppercase" only, so countedits counted one edit.
    assert ref.get().to_dict() == {"original": "bye", "uppercase": "HELLO", "edits": 1}


@pytest.mark.postgres_smoke
def test_the_https_function_adds_a_message_over_http(default_app: App, sample: ModuleType) -> None:
    server = HttpServer(default_app, "127.0.0.1", 0)
    server.start()
    try:
        with httpx.Client(base_url=server.url) as client:
            added = client.get("/addmessage", params={"text": "ported"})
            missing = client.post("/addmessage")
    finally:
        server.stop()
    assert added.status_code == 200
    assert added.headers["content-type"].startswith("text/html")
    doc_id = added.text.removeprefix("Message with ID ").removesuffix(" added.")
    assert (missing.status_code, missing.text) == (400, "No text parameter provided")
    default_app.drain()
    snapshot = default_app.db.document(f"messages/{doc_id}").get()
    assert snapshot.to_dict() == {"original": "ported", "uppercase": "PORTED"}


def test_the_pubsub_function_reads_json_attributes_and_message_id(
    default_app: App, sample: ModuleType
) -> None:
    message_id = default_app.publish("greetings", {"name": "Ada"}, attributes={"lang": "en"})
    default_app.publish("greetings", {"nobody": True})
    default_app.drain()
    greetings = default_app.db.collection("greetings").get()
    assert [(g.id, g.to_dict()) for g in greetings] == [
        (message_id, {"greeting": "Hello, Ada!", "attributes": {"lang": "en"}})
    ]


def test_the_scheduled_function_runs_every_day_at_midnight(
    default_app: App, sample: ModuleType, clock: TestClock
) -> None:
    users = default_app.db.collection("users")
    users.document("gone").set({"inactive": True})
    users.document("kept").set({"inactive": False})
    now = clock.now()
    midnight = (now // 86400 + 1) * 86400
    clock.advance(midnight - now)
    assert default_app.fire_due_schedules() == 1
    default_app.drain()
    assert [u.id for u in users.get()] == ["kept"]
    cleanups = [c.to_dict() for c in default_app.db.collection("cleanups").get()]
    assert cleanups == [{"at": datetime.fromtimestamp(midnight, tz=UTC).isoformat()}]


def test_event_functions_are_not_retried_unless_retry_is_true(default_app: App) -> None:
    @firestore_fn.on_document_created(document="a/{id}")
    def once(event: firestore_fn.Event[firestore_fn.DocumentSnapshot | None]) -> None:
        raise RuntimeError("down")

    @firestore_fn.on_document_created(document="a/{id}", retry=True)
    def again(event: firestore_fn.Event[firestore_fn.DocumentSnapshot | None]) -> None:
        raise RuntimeError("down")

    default_app.db.document("a/x").set({})
    default_app.drain()
    assert [d.function for d in default_app.dead_letters.list()] == ["once"]
    assert default_app.stats()["again"].pending == 1  # waiting for its retry


def test_written_triggers_see_a_missing_side_as_none(default_app: App) -> None:
    seen: list[tuple[bool, bool]] = []

    @firestore_fn.on_document_written(document="w/{id}")
    def written(event: firestore_fn.Event[firestore_fn.Change[object]]) -> None:
        seen.append((event.data.before is None, event.data.after is None))

    default_app.db.document("w/x").set({"v": 1})
    default_app.drain()
    default_app.db.document("w/x").delete()
    default_app.drain()
    assert seen == [(True, False), (False, True)]


def test_a_deleted_trigger_gets_the_document_as_it_was(default_app: App) -> None:
    seen: list[tuple[str, str, bool, object, str]] = []

    @firestore_fn.on_document_deleted(document="orders/{orderId}")
    def gone(event: firestore_fn.Event[firestore_fn.DocumentSnapshot | None]) -> None:
        assert event.data is not None  # a deletion always has the document it removed
        snapshot = event.data
        seen.append(
            (event.params["orderId"], snapshot.id, snapshot.exists, snapshot.to_dict(), event.type)
        )

    ref = default_app.db.document("orders/o1")
    ref.set({"amount": 5, "status": "new"})
    ref.update({"status": "paid"})
    default_app.drain()
    assert seen == []  # a creation and an update start nothing
    ref.delete()
    default_app.drain()
    assert seen == [
        (
            "o1",
            "o1",
            True,
            {"amount": 5, "status": "paid"},
            "google.cloud.firestore.document.v1.deleted",
        )
    ]
    assert not ref.get().exists


def test_a_message_carries_its_json_as_base64_data(default_app: App) -> None:
    got: list[pubsub_fn.Message[object]] = []

    @pubsub_fn.on_message_published(topic="t")
    def keep(event: pubsub_fn.CloudEvent[pubsub_fn.MessagePublishedData[object]]) -> None:
        got.append(event.data.message)

    default_app.publish("t", {"n": 1})
    default_app.drain()
    assert base64.b64decode(got[0].data) == b'{"n":1}'
    assert got[0].json == {"n": 1}


def test_firebase_options_are_kept_or_ignored_with_a_note(
    default_app: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="oncefire.firebase.options")

    @pubsub_fn.on_message_published(
        topic="t", timeout_sec=5, max_instances=2, memory=512, region="europe-west1"
    )
    def tuned(event: object) -> None:
        return None

    options = default_app.triggers["tuned"].options
    assert (options.timeout, options.max_instances, options.retry) == (5.0, 2, False)
    notes = [r.getMessage() for r in caplog.records]
    assert any("memory=512 has no meaning in oncefire" in n for n in notes)
    assert any("region='europe-west1' has no meaning" in n for n in notes)
    with pytest.raises(ConfigError, match="unknown option\\(s\\) colour"):
        pubsub_fn.on_message_published(topic="t", colour="red")


def test_the_concurrency_option_is_ignored_with_one_note(
    default_app: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="oncefire.firebase.options")
    seen: list[str] = []

    @firestore_fn.on_document_created(document="jobs/{id}", concurrency=80)
    def busy(event: firestore_fn.Event[firestore_fn.DocumentSnapshot | None]) -> None:
        seen.append(event.params["id"])

    @pubsub_fn.on_message_published(topic="t", concurrency=1)
    def single(event: object) -> None:
        return None

    notes = [r.getMessage() for r in caplog.records]
    assert any(
        n.startswith("firestore_fn.on_document_created: option concurrency=80 has no meaning")
        for n in notes
    ), notes
    # Noted once per process: the second function's concurrency adds no line.
    assert sum("option concurrency=" in n for n in notes) == 1, notes
    default_app.db.document("jobs/j1").set({})
    default_app.drain()
    assert seen == ["j1"]  # registered and served like any document function


@pytest.mark.parametrize(
    ("firebase", "oncefire"),
    [
        ("every 5 minutes", "every 5 minutes"),
        ("every 2 hours", "every 2 hours"),
        ("every 10 mins", "every 10 minutes"),
        ("every day 00:00", "0 0 * * *"),
        ("every monday 09:30", "30 9 * * 1"),
        ("5 11 * * *", "5 11 * * *"),
    ],
)
def test_cloud_scheduler_schedules_translate(firebase: str, oncefire: str) -> None:
    assert to_oncefire_schedule(firebase) == oncefire


def test_a_schedule_takes_a_firebase_timezone(default_app: App) -> None:
    @scheduler_fn.on_schedule(
        schedule="0 9 * * *", timezone=scheduler_fn.Timezone("America/New_York")
    )
    def morning(event: scheduler_fn.ScheduledEvent) -> None:
        return None

    schedule = default_app.triggers["morning"].schedule
    assert schedule is not None and schedule.timezone == "America/New_York"


def test_a_firebase_trigger_without_its_document_is_refused(default_app: App) -> None:
    decorate: Callable[..., Callable[..., object]] = firestore_fn.on_document_created
    with pytest.raises(ConfigError, match="document='orders/\\{orderId\\}'"):
        decorate()(lambda event: None)


def test_the_document_keyword_works_on_an_app_too(sqlite_url: str) -> None:
    app = App(sqlite_url)
    app.on_document_created(document="orders/{orderId}")(lambda event: None)
    with pytest.raises(ConfigError, match="takes one path pattern"):
        app.on_document_created("orders/{a}", document="orders/{b}")
    app.close()


def test_the_firestore_client_has_firestores_shapes(default_app: App) -> None:
    from oncefire.firebase import firestore
    from oncefire.firebase.firestore import FieldFilter

    db = firestore.client()
    update_time, ref = db.collection("cities").add({"name": "Paris", "pop": 2})
    assert update_time is not None and ref.path == f"cities/{ref.id}"
    db.collection("cities").document("rome").set({"name": "Rome", "pop": 3})
    db.document("cities/oslo").set({"name": "Oslo", "pop": 1})
    db.document("cities/oslo").set({"nordic": True}, merge=True)
    big = db.collection("cities").where(filter=FieldFilter("pop", ">=", 2))
    names = [c.get("name") for c in big.order_by("pop", direction=firestore.Query.DESCENDING).get()]
    assert names == ["Rome", "Paris"]
    assert [c.id for c in db.collection("cities").where("nordic", "==", True).stream()] == ["oslo"]
    oslo = db.document("cities/oslo").get()
    assert oslo.exists and oslo.reference == db.document("cities/oslo")
    assert oslo.to_dict() == {"name": "Oslo", "pop": 1, "nordic": True}
    with pytest.raises(KeyError):
        oslo.get("mayor")
    oslo.reference.update({"pop": firestore.Increment(1)})
    assert db.document("cities/oslo").get().get("pop") == 2
    db.document("cities/oslo").delete()
    assert not db.document("cities/oslo").get().exists
    assert db.document("cities/rome").collection("streets").document("via").path == (
        "cities/rome/streets/via"
    )
