"""Storage and custom event functions across real processes, on both stores: the
Firebase-spelled apps/firebase/storage_main.py and eventarc_main.py, ported with `oncefire
port`, run by `oncefire worker --processes 2`."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncefire.firebase import storage
from tests.e2e.cli_support import poll_until
from tests.e2e.firebase_workers import DEADLINE, firebase_workers

pytestmark = pytest.mark.e2e

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def test_an_upload_makes_its_thumbnail_once_and_a_delete_removes_it(
    store_url: str, tmp_path: Path
) -> None:
    objects = str(tmp_path / "objects")
    with firebase_workers("storage_main.py", store_url, tmp_path, storage_dir=objects) as app:
        bucket = storage.bucket("photos-bucket", app=app)
        image = bucket.blob("cats/tom.png")
        image.upload_from_string(PNG, content_type="image/png")
        bucket.blob("notes/readme.txt").upload_from_string("not an image")
        poll_until("the thumbnail", lambda: bucket.get_blob("cats/thumb_tom.png"), DEADLINE)
        thumb = bucket.get_blob("cats/thumb_tom.png")
        assert thumb is not None
        assert thumb.download_as_bytes() == PNG[:16]
        assert thumb.metadata == {
            "source": "cats/tom.png",
            "sourceGeneration": str(image.generation),
        }
        assert thumb.content_type == "image/png"
        # One finalized event each: the image, the text, the thumbnail (which makes no other).
        poll_until("3 runs", lambda: app.stats()["makethumbnail"].succeeded == 3, DEADLINE)

        image.metadata = {"owner": "ada"}
        image.patch()
        changes = app.db.collection("metadataChanges")
        poll_until("the metadata change recorded", lambda: changes.get(), DEADLINE)
        [change] = changes.get()
        assert change.to_dict() == {
            "name": "cats/tom.png",
            "metageneration": 2,
            "metadata": {"owner": "ada"},
        }

        image.delete()
        poll_until("the thumbnail deleted", lambda: not thumb.exists(), DEADLINE)
        assert [b.name for b in bucket.list_blobs()] == ["notes/readme.txt"]
        # Its thumbnail's own deletion ran the function too, which left it at that.
        poll_until("2 runs", lambda: app.stats()["removethumbnail"].succeeded == 2, DEADLINE)
        poll_until("3 runs", lambda: app.stats()["makethumbnail"].succeeded == 3, DEADLINE)
        stored = [p for p in Path(objects).rglob("*") if p.is_file()]
        assert len(stored) == 1  # the text's bytes; the deleted objects' are gone


def test_a_custom_event_reaches_the_functions_of_its_type_and_filters(
    store_url: str, tmp_path: Path
) -> None:
    with firebase_workers("eventarc_main.py", store_url, tmp_path) as app:
        orders = app.db.collection("orders")
        orders.document("o1").set({"total": 100, "region": "eu"})
        orders.document("o2").set({"total": 50, "region": "us"})
        ledger = app.db.collection("ledger")
        poll_until("both orders in the ledger", lambda: len(ledger.get()) == 2, DEADLINE)
        assert ledger.document("o1").get().to_dict() == {
            "total": 100,
            "subject": "orders/o1",
            "source": "/orders",
        }
        invoices = app.db.collection("invoices")
        poll_until("the EU order's invoice", lambda: invoices.get(), DEADLINE)
        assert [(d.id, d.to_dict()) for d in invoices.get()] == [("o1", {"vat": 20.0})]

        # An attempt's ending is written just after its function's writes: wait for both.
        def ended() -> bool:
            stats = app.stats()
            return stats["recordorder"].succeeded == 2 and stats["vatinvoice"].running == 0

        poll_until("the attempts' endings", ended, DEADLINE)
        # The US order made no delivery for the EU-only function.
        assert app.stats()["vatinvoice"].succeeded == 1
