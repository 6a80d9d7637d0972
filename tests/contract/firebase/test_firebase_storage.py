"""Local storage buckets (firebase_admin.storage) and storage_fn's triggers, on both stores:
each upload, delete and metadata change fires its kind once, in its metadata's transaction."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncefire import App, ConfigError
from oncefire.errors import StoreUnavailableError
from oncefire.firebase import delete_app, initialize_app, params, storage, storage_fn
from oncefire.firebase.registration import apps
from oncefire.firebase.registration.apps import set_default_app
from oncefire.firebase.storage.local import StorageError
from oncefire.firebase.storage.names import rfc3339, storage_dir
from oncefire.firebase.storage_fn import CloudEvent, StorageObjectData
from oncefire.testing import TestClock, fail_store_calls

Seen = list[tuple[str, CloudEvent[StorageObjectData]]]


@pytest.fixture
def default_app(store_url: str, clock: TestClock, tmp_path: Path) -> Iterator[App]:
    """The default App a Firebase module registers on, its objects under tmp_path."""
    app = App(store_url, clock=clock, storage_dir=str(tmp_path / "objects"))
    previous = set_default_app(app)
    yield app
    set_default_app(previous)
    app.close()


@pytest.fixture
def seen(default_app: App) -> Seen:
    """The storage events of bucket "photos", by kind, as the functions got them."""
    got: Seen = []

    @storage_fn.on_object_finalized(bucket="photos")
    def finalized(event: CloudEvent[StorageObjectData]) -> None:
        got.append(("finalized", event))

    @storage_fn.on_object_deleted(bucket="photos")
    def deleted(event: CloudEvent[StorageObjectData]) -> None:
        got.append(("deleted", event))

    @storage_fn.on_object_archived(bucket="photos")
    def archived(event: CloudEvent[StorageObjectData]) -> None:
        got.append(("archived", event))

    @storage_fn.on_object_metadata_updated(bucket="photos")
    def updated(event: CloudEvent[StorageObjectData]) -> None:
        got.append(("metadata_updated", event))

    return got


def kinds(seen: Seen) -> list[tuple[str, str, int]]:
    return [(kind, e.data.name, e.data.generation) for kind, e in seen]


def files(app: App) -> list[Path]:
    return sorted(p for p in storage_dir(app).rglob("*") if p.is_file())


def test_an_upload_fires_on_object_finalized_once_with_its_object_data(
    default_app: App, seen: Seen, clock: TestClock
) -> None:
    blob = storage.bucket("photos").blob("cats/tom.txt")
    blob.metadata = {"owner": "ada"}
    blob.upload_from_string("meow", content_type="text/plain")
    default_app.drain()
    default_app.drain()
    [(kind, event)] = seen
    now = clock.now()
    assert kind == "finalized"
    assert event.type == "google.cloud.storage.object.v1.finalized"
    assert event.source == "//storage.googleapis.com/projects/_/buckets/photos"
    assert event.subject == "objects/cats/tom.txt"
    data = event.data
    assert (data.bucket, data.name, data.content_type, data.size) == (
        "photos",
        "cats/tom.txt",
        "text/plain",
        4,
    )
    assert (data.generation, data.metageneration) == (int(now * 1_000_000), 1)
    assert data.metadata == {"owner": "ada"}
    assert data.time_created == data.updated == rfc3339(now)
    assert data.md5_hash == base64.b64encode(hashlib.md5(b"meow").digest()).decode()
    assert blob.generation == data.generation and blob.size == 4
    assert storage.bucket("photos").blob("cats/tom.txt").download_as_bytes() == b"meow"


def test_a_failed_commit_fires_nothing_and_leaves_no_metadata_nor_file(
    default_app: App, seen: Seen
) -> None:
    blob = storage.bucket("photos").blob("a.txt")
    with fail_store_calls(default_app, "write"), pytest.raises(StoreUnavailableError):
        blob.upload_from_string("x")
    assert default_app.drain().attempts == 0
    assert not blob.exists()
    assert storage.bucket("photos").get_blob("a.txt") is None
    assert files(default_app) == []


def test_a_failed_delete_or_patch_changes_nothing_and_fires_nothing(
    default_app: App, seen: Seen
) -> None:
    blob = storage.bucket("photos").blob("a.txt")
    blob.upload_from_string("x")
    default_app.drain()
    seen.clear()
    with fail_store_calls(default_app, "write"), pytest.raises(StoreUnavailableError):
        blob.delete()
    blob.metadata = {"k": "v"}
    with fail_store_calls(default_app, "write"), pytest.raises(StoreUnavailableError):
        blob.patch()
    default_app.drain()
    assert seen == []
    again = storage.bucket("photos").get_blob("a.txt")
    assert again is not None and again.metadata is None and again.metageneration == 1
    assert again.download_as_text() == "x" and len(files(default_app)) == 1


def test_a_failed_file_write_fires_nothing_and_leaves_no_metadata(
    store_url: str, clock: TestClock, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    app = App(store_url, clock=clock, storage_dir=str(tmp_path / "a-file" / "objects"))
    previous = set_default_app(app)
    try:
        runs: list[Any] = []
        storage_fn.on_object_finalized(bucket="photos")(runs.append)
        with pytest.raises(StorageError, match="storage_dir"):
            storage.bucket("photos").blob("a.txt").upload_from_string("x")
        assert app.drain().attempts == 0 and runs == []
        assert storage.bucket("photos").get_blob("a.txt") is None
    finally:
        set_default_app(previous)
        app.close()


def test_an_overwrite_deletes_the_old_generation_then_finalizes_the_new(
    default_app: App, seen: Seen, clock: TestClock
) -> None:
    blob = storage.bucket("photos").blob("a.txt")
    blob.upload_from_string("one")
    first = blob.generation
    clock.advance(1)
    blob.upload_from_string("two")
    default_app.drain()
    assert sorted(kinds(seen)) == sorted(
        [
            ("finalized", "a.txt", first),
            ("deleted", "a.txt", first),
            ("finalized", "a.txt", blob.generation),
        ]
    )
    assert blob.download_as_text() == "two"
    assert len(files(default_app)) == 1  # the old generation's bytes are gone


def test_delete_and_metadata_changes_fire_their_kinds(
    default_app: App, seen: Seen, clock: TestClock
) -> None:
    bucket = storage.bucket("photos")
    blob = bucket.blob("a.txt")
    blob.upload_from_string(b"\x00\x01", content_type="application/octet-stream")
    default_app.drain()
    seen.clear()
    blob.metadata = {"owner": "ada", "tag": "x"}
    blob.patch()
    clock.advance(1)
    again = bucket.get_blob("a.txt")
    assert again is not None
    again.metadata = {"tag": None}  # a key set to None is removed
    again.content_type = "image/png"
    again.patch()
    again.patch()  # nothing changed: no event
    default_app.drain()
    updates = [e.data for kind, e in seen if kind == "metadata_updated"]
    assert [(d.metageneration, d.metadata, d.content_type) for d in updates] == [
        (2, {"owner": "ada", "tag": "x"}, "application/octet-stream"),
        (3, {"owner": "ada"}, "image/png"),
    ]
    assert updates[1].updated == rfc3339(clock.now()) != updates[1].time_created
    seen.clear()
    blob.delete()
    default_app.drain()
    assert kinds(seen) == [("deleted", "a.txt", blob.generation)]
    assert seen[0][1].data.metadata == {"owner": "ada"}
    assert not blob.exists() and files(default_app) == []
    with pytest.raises(storage.NotFoundError):
        blob.delete()
    with pytest.raises(storage.NotFoundError):
        blob.download_as_bytes()


def test_a_versioned_bucket_archives_what_is_replaced_or_deleted(
    default_app: App, seen: Seen, clock: TestClock
) -> None:
    bucket = storage.bucket("photos")
    bucket.versioning_enabled = True
    bucket.patch()
    assert storage.bucket("photos").versioning_enabled
    blob = bucket.blob("a.txt")
    blob.upload_from_string("one")
    first = blob.generation
    clock.advance(1)
    blob.upload_from_string("two")
    second = blob.generation
    blob.delete()
    default_app.drain()
    assert sorted(kinds(seen)) == sorted(
        [
            ("finalized", "a.txt", first),
            ("archived", "a.txt", first),
            ("finalized", "a.txt", second),
            ("archived", "a.txt", second),
        ]
    )
    assert all(e.data.time_deleted for kind, e in seen if kind == "archived")
    assert not blob.exists()
    assert bucket.blob("a.txt", generation=first).download_as_text() == "one"
    versions = bucket.list_blobs(versions=True)
    assert [(b.name, b.generation) for b in versions] == [("a.txt", first), ("a.txt", second)]
    seen.clear()
    bucket.blob("a.txt", generation=first).delete()  # an archived generation, for good
    default_app.drain()
    assert kinds(seen) == [("deleted", "a.txt", first)]
    assert len(files(default_app)) == 1


def test_list_blobs_by_prefix_and_delimiter(default_app: App) -> None:
    bucket = storage.bucket("docs")
    for name in ["a/1.txt", "a/2.txt", "a/b/3.txt", "c.txt", "a.txt"]:
        bucket.blob(name).upload_from_string(name)
    assert [b.name for b in bucket.list_blobs()] == [
        "a.txt",
        "a/1.txt",
        "a/2.txt",
        "a/b/3.txt",
        "c.txt",
    ]
    listed = bucket.list_blobs(prefix="a/", delimiter="/")
    assert [b.name for b in listed] == ["a/1.txt", "a/2.txt"]
    assert listed.prefixes == {"a/b/"}
    assert [b.name for b in bucket.list_blobs(prefix="a/", max_results=1)] == ["a/1.txt"]
    assert [b.size for b in bucket.list_blobs(prefix="c")] == [5]


def test_files_go_up_and_come_down_with_their_content_type(
    default_app: App, tmp_path: Path
) -> None:
    source = tmp_path / "pic.png"
    source.write_bytes(b"\x89PNG...")
    blob = storage.bucket("photos").blob("pic.png")
    blob.upload_from_filename(source)
    assert blob.content_type == "image/png"
    target = tmp_path / "back.png"
    storage.bucket("photos").blob("pic.png").download_to_filename(target)
    assert target.read_bytes() == b"\x89PNG..."
    assert blob.download_as_bytes(start=1, end=3) == b"PNG"


def test_preconditions_hold_or_nothing_is_written(default_app: App, seen: Seen) -> None:
    blob = storage.bucket("photos").blob("once.txt")
    blob.upload_from_string("first", if_generation_match=0)
    with pytest.raises(storage.PreconditionFailedError):
        blob.upload_from_string("second", if_generation_match=0)
    with pytest.raises(storage.PreconditionFailedError):
        blob.delete(if_generation_match=blob.generation + 1)
    default_app.drain()
    assert blob.download_as_text() == "first"
    assert [kind for kind, _ in seen] == ["finalized"]


def test_a_function_takes_the_events_of_its_own_bucket_only(default_app: App, seen: Seen) -> None:
    storage.bucket("other").blob("a.txt").upload_from_string("x")
    default_app.drain()
    assert seen == []
    assert default_app.unrouted_count() == 1  # kept for a function of that bucket, later


def test_storage_writes_refuse_to_join_a_document_transaction(default_app: App) -> None:
    with default_app.db.transaction(), pytest.raises(ConfigError, match="on their own"):
        storage.bucket("photos").blob("a.txt").upload_from_string("x")


@pytest.mark.parametrize("name", ["", "a\nb", "x" * 1025, "."])
def test_bad_object_names_are_refused(default_app: App, name: str) -> None:
    with pytest.raises(ConfigError):
        storage.bucket("photos").blob(name)


def test_the_default_bucket_is_the_firebase_apps_as_firebase_finds_it(
    default_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("STORAGE_BUCKET", "GCLOUD_PROJECT", "ONCEFIRE_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(params, "_app_project", "")
    monkeypatch.setattr(apps, "_firebase_apps", {})  # no initialize_app() of other tests
    with pytest.raises(ConfigError, match="Storage bucket name not specified"):
        storage.bucket()
    monkeypatch.setattr(params, "_app_project", "shop")
    assert storage.bucket().name == "shop.appspot.com"
    monkeypatch.setenv("STORAGE_BUCKET", "env-bucket")
    named = initialize_app(options={"storageBucket": "named-bucket"}, name="named")
    try:
        assert storage.bucket().name == "env-bucket"
        assert storage.bucket(app=named).name == "named-bucket"
        storage_fn.on_object_finalized()(print)
        assert default_app.triggers["print"].source == "firebase.storage.env-bucket"
    finally:
        delete_app(named)
