"""Storage triggers with Firebase's names: `@storage_fn.on_object_finalized(bucket="b")` and
`on_object_deleted`, `on_object_archived`, `on_object_metadata_updated`.

They take the storage events of the local buckets of `storage.bucket(name)`: each is a message
on the topic `firebase.storage.<bucket>` whose `eventType` attribute routes it to its kind of
function. `event.data` is a `StorageObjectData`. Not retried unless `retry=True`, as Firebase.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from oncefire.events import Event as OncefireEvent
from oncefire.firebase import options as firebase_options
from oncefire.firebase.params import resolve
from oncefire.firebase.registration.apps import default_app
from oncefire.firebase.registration.cloudevent import CloudEvent, adapt
from oncefire.firebase.storage import names as storage_names
from oncefire.firebase.storage.blobs import default_bucket_name

__all__ = [
    "CloudEvent",
    "CustomerEncryption",
    "StorageObjectData",
    "on_object_archived",
    "on_object_deleted",
    "on_object_finalized",
    "on_object_metadata_updated",
]

F = TypeVar("F", bound=Callable[..., Any])
EVENT_TYPES = {
    storage_names.FINALIZE: "google.cloud.storage.object.v1.finalized",
    storage_names.DELETE: "google.cloud.storage.object.v1.deleted",
    storage_names.ARCHIVE: "google.cloud.storage.object.v1.archived",
    storage_names.METADATA_UPDATE: "google.cloud.storage.object.v1.metadataUpdated",
}


@dataclass(frozen=True)
class CustomerEncryption:
    """A customer-supplied key's details (never set here: objects are not encrypted)."""

    encryption_algorithm: str
    key_sha256: str


@dataclass(frozen=True)
class StorageObjectData:
    """An object of a bucket, as Firebase's `storage_fn.StorageObjectData`."""

    bucket: str
    cache_control: str | None
    component_count: int | None
    content_disposition: str | None
    content_encoding: str | None
    content_language: str | None
    content_type: str | None
    crc32c: str | None
    customer_encryption: CustomerEncryption | None
    etag: str | None
    generation: int
    id: str
    kind: str | None
    md5_hash: str | None
    media_link: str | None
    metadata: dict[str, str] | None
    metageneration: int
    name: str
    self_link: str | None
    size: int
    storage_class: str
    time_created: str | None
    time_deleted: str | None
    time_storage_class_updated: str | None
    updated: str | None


def object_data(resource: dict[str, Any]) -> StorageObjectData:
    """The StorageObjectData of an object's resource (Cloud Storage's JSON form)."""
    return StorageObjectData(
        bucket=resource["bucket"],
        cache_control=resource.get("cacheControl"),
        component_count=resource.get("componentCount"),
        content_disposition=resource.get("contentDisposition"),
        content_encoding=resource.get("contentEncoding"),
        content_language=resource.get("contentLanguage"),
        content_type=resource.get("contentType"),
        crc32c=resource.get("crc32c"),
        customer_encryption=None,
        etag=resource.get("etag"),
        generation=resource["generation"],
        id=resource["id"],
        kind=resource.get("kind"),
        md5_hash=resource.get("md5Hash"),
        media_link=resource.get("mediaLink"),
        metadata=resource.get("metadata"),
        metageneration=resource["metageneration"],
        name=resource["name"],
        self_link=resource.get("selfLink"),
        size=resource["size"],
        storage_class=resource.get("storageClass", "STANDARD"),
        time_created=resource.get("timeCreated"),
        time_deleted=resource.get("timeDeleted"),
        time_storage_class_updated=resource.get("timeStorageClassUpdated"),
        updated=resource.get("updated"),
    )


def _convert(event: OncefireEvent) -> CloudEvent[StorageObjectData]:
    message = event.data
    resource = message.data
    return CloudEvent(
        id=event.id,
        source=f"//storage.googleapis.com/projects/_/buckets/{resource['bucket']}",
        type=EVENT_TYPES[message.attributes["eventType"]],
        time=event.time,
        data=object_data(resource),
        subject=f"objects/{resource['name']}",
    )


def _trigger(event_type: str, where: str, options: dict[str, Any]) -> Callable[[F], F]:
    given = resolve(options.pop("bucket", None))  # a param gives its value
    name = storage_names.check_bucket(given if given is not None else default_bucket_name())
    opts = firebase_options.event_options(where, options)
    app = default_app()

    def decorator(fn: F) -> F:
        topic = storage_names.topic_of(name)
        filtered = {"eventType": event_type}
        app.on_message(topic, attributes=filtered, name=fn.__name__, **opts)(adapt(fn, _convert))
        return fn

    return decorator


def on_object_finalized(**options: Any) -> Callable[[F], F]:
    """Run the function when an object is created (or a new generation of one uploaded)."""
    return _trigger(storage_names.FINALIZE, "storage_fn.on_object_finalized", options)


def on_object_deleted(**options: Any) -> Callable[[F], F]:
    """Run the function when an object is deleted, or replaced in a bucket without
    versioning."""
    return _trigger(storage_names.DELETE, "storage_fn.on_object_deleted", options)


def on_object_archived(**options: Any) -> Callable[[F], F]:
    """Run the function when a versioned bucket's live object becomes an archived generation
    (replaced or deleted)."""
    return _trigger(storage_names.ARCHIVE, "storage_fn.on_object_archived", options)


def on_object_metadata_updated(**options: Any) -> Callable[[F], F]:
    """Run the function when an object's metadata changes."""
    return _trigger(storage_names.METADATA_UPDATE, "storage_fn.on_object_metadata_updated", options)
