"""Cloud Storage functions as Firebase's guide to them describes: a thumbnail made for each
image uploaded (and not for the thumbnails themselves), removed with its image, and a record
kept of each change of an image's metadata. Written in Firebase's spelling; the tests run it
after `oncefire port`."""

import pathlib

from firebase_admin import firestore, initialize_app, storage
from firebase_functions import storage_fn

app = initialize_app()
BUCKET = "photos-bucket"
THUMB_PREFIX = "thumb_"


def thumbnail_path(name: str) -> pathlib.PurePath:
    path = pathlib.PurePath(name)
    return path.parent / f"{THUMB_PREFIX}{path.name}"


@storage_fn.on_object_finalized(bucket=BUCKET)
def makethumbnail(event: storage_fn.CloudEvent[storage_fn.StorageObjectData]) -> None:
    """Store a small copy of each image uploaded, beside it."""
    file_path = pathlib.PurePath(event.data.name)
    content_type = event.data.content_type
    if not content_type or not content_type.startswith("image/"):
        print(f"This is not an image ({content_type}).")
        return
    if file_path.name.startswith(THUMB_PREFIX):
        print("Already a thumbnail.")
        return
    bucket = storage.bucket(event.data.bucket)
    image = bucket.blob(event.data.name).download_as_bytes()
    thumbnail = image[:16]  # the resizing of a real app, cut short
    thumb = bucket.blob(str(thumbnail_path(event.data.name)))
    thumb.metadata = {"source": event.data.name, "sourceGeneration": str(event.data.generation)}
    thumb.upload_from_string(thumbnail, content_type=content_type)


@storage_fn.on_object_deleted(bucket=BUCKET)
def removethumbnail(event: storage_fn.CloudEvent[storage_fn.StorageObjectData]) -> None:
    """Delete an image's thumbnail with it."""
    if pathlib.PurePath(event.data.name).name.startswith(THUMB_PREFIX):
        return
    thumb = storage.bucket(event.data.bucket).blob(str(thumbnail_path(event.data.name)))
    if thumb.exists():
        thumb.delete()


@storage_fn.on_object_metadata_updated(bucket=BUCKET)
def auditmetadata(event: storage_fn.CloudEvent[storage_fn.StorageObjectData]) -> None:
    """Keep a record of each metadata change."""
    data = event.data
    firestore.client().collection("metadataChanges").document(
        f"{data.generation}-{data.metageneration}"
    ).set({"name": data.name, "metageneration": data.metageneration, "metadata": data.metadata})
