"""firebase_admin.storage: `bucket(name)` returns a local bucket with google-cloud-storage's
`Bucket` and `Blob` methods, whose uploads, deletes and metadata changes fire `storage_fn`'s
functions (see local.py for how their events commit, names.py for where objects are).

    blob = storage.bucket().blob("photos/a.jpg")
    blob.upload_from_filename("a.jpg")            # on_object_finalized fires, once
    blob.metadata = {"owner": "ada"}; blob.patch()  # on_object_metadata_updated
    blob.download_as_bytes(); blob.delete()        # on_object_deleted
"""

from __future__ import annotations

import mimetypes
import os
from datetime import datetime
from typing import Any, BinaryIO

from oncefire.errors import ConfigError
from oncefire.firebase import params
from oncefire.firebase.exceptions import NotFoundError
from oncefire.firebase.registration.apps import FirebaseApp, current_app, firebase_app
from oncefire.firebase.storage.local import LocalBucket, PreconditionFailedError
from oncefire.firebase.storage.names import check_name

__all__ = ["Blob", "Bucket", "NotFoundError", "PreconditionFailedError", "bucket"]

MATCHES = ("if_generation_match", "if_metageneration_match")
# Blob properties a patch() sends, by their attribute and resource names.
PATCHED = {
    "content_type": "contentType",
    "cache_control": "cacheControl",
    "content_disposition": "contentDisposition",
    "content_encoding": "contentEncoding",
    "content_language": "contentLanguage",
    "metadata": "metadata",
}


def default_bucket_name(app: Any = None) -> str:
    """The default bucket, as Firebase finds it: the storageBucket option of the Firebase app
    (of initialize_app(), by default), else params.STORAGE_BUCKET ($STORAGE_BUCKET, else
    `<project id>.appspot.com`); ConfigError when there is none."""
    if not isinstance(app, FirebaseApp):
        app = firebase_app()
    named = app.options.get("storageBucket") if app is not None else params.STORAGE_BUCKET.value
    if not named:
        raise ConfigError(
            "Storage bucket name not specified: name the bucket, or set the storageBucket "
            "option of initialize_app(), $STORAGE_BUCKET or the project id "
            "(ONCEFIRE_PROJECT_ID) whose <project>.appspot.com is the default bucket."
        )
    return str(named)


def bucket(name: str | None = None, app: Any = None) -> Bucket:
    """A handle to a local bucket (the default bucket when name is None); makes no call. app
    is a Firebase app (initialize_app's) or an oncefire App; None: the running one."""
    runtime = current_app() if app is None or isinstance(app, FirebaseApp) else app
    return Bucket(runtime, name if name is not None else default_bucket_name(app))


class Bucket:
    """A local bucket, with google-cloud-storage's `Bucket` methods."""

    def __init__(self, app: Any, name: str) -> None:
        self._local = LocalBucket(app, name)
        self.name = self._local.name
        self._versioning: bool | None = None

    def blob(self, blob_name: str, generation: int | None = None, **_: Any) -> Blob:
        """A handle to an object of this bucket (it need not exist)."""
        return Blob(blob_name, self, generation=generation)

    def get_blob(self, blob_name: str, generation: int | None = None, **_: Any) -> Blob | None:
        """The object with its properties loaded, or None when it does not exist."""
        record = self._local.get(check_name(blob_name), generation)
        return None if record is None else Blob._loaded(self, record["object"])

    def list_blobs(
        self,
        max_results: int | None = None,
        prefix: str | None = None,
        delimiter: str | None = None,
        versions: bool = False,
        **_: Any,
    ) -> BlobList:
        """The objects whose name starts with prefix, by name; with a delimiter, those
        directly under it, and `.prefixes` the 'folders' below; with versions, archived
        generations too."""
        found, prefixes = [], set()
        for record in self._local.records(prefix or "", versions):
            name = record["object"]["name"]
            rest = name[len(prefix or "") :]
            if delimiter and delimiter in rest:
                prefixes.add((prefix or "") + rest[: rest.index(delimiter) + len(delimiter)])
                continue
            found.append(Blob._loaded(self, record["object"]))
        return BlobList(found[:max_results] if max_results is not None else found, prefixes)

    def delete_blob(self, blob_name: str, generation: int | None = None, **match: Any) -> None:
        """Delete an object (NotFoundError when there is none)."""
        self._local.delete(check_name(blob_name), generation, **match)

    def copy_blob(
        self, blob: Blob, destination_bucket: Bucket, new_name: str | None = None, **_: Any
    ) -> Blob:
        """Copy an object, its properties included, to a bucket (this one or another)."""
        copy = destination_bucket.blob(new_name if new_name is not None else blob.name)
        source = blob._local_record()
        data = blob.bucket._local.read(blob.name, source["generation"])
        kept = {v: source.get(v) for v in PATCHED.values()}
        copy._properties = destination_bucket._local.upload(copy.name, data, kept)
        return copy

    def rename_blob(self, blob: Blob, new_name: str, **_: Any) -> Blob:
        """Copy the object to new_name in this bucket, then delete it."""
        renamed = self.copy_blob(blob, self, new_name)
        blob.delete()
        return renamed

    def exists(self, **_: Any) -> bool:
        """True: a local bucket exists as soon as it is named."""
        return True

    @property
    def versioning_enabled(self) -> bool:
        """Whether replaced and deleted objects are kept as archived generations."""
        if self._versioning is None:
            self._versioning = self._local.is_versioned()
        return self._versioning

    @versioning_enabled.setter
    def versioning_enabled(self, value: bool) -> None:
        self._versioning = bool(value)

    def reload(self, **_: Any) -> None:
        """Read the bucket's settings again."""
        self._versioning = self._local.is_versioned()

    def patch(self, **_: Any) -> None:
        """Save the bucket's settings (versioning_enabled)."""
        if self._versioning is not None:
            self._local.set_versioning(self._versioning)

    def __repr__(self) -> str:
        return f"<Bucket: {self.name}>"


class BlobList(list["Blob"]):
    """What list_blobs returns: the blobs, and with a delimiter the `prefixes` below."""

    def __init__(self, blobs: list[Blob], prefixes: set[str]) -> None:
        super().__init__(blobs)
        self.prefixes = prefixes


def _writable(key: str, doc: str) -> Any:
    """A Blob property kept in its resource under key, which patch() saves."""

    def get(blob: Blob) -> Any:
        return blob._get(key)

    def put(blob: Blob, value: Any) -> None:
        blob._set(key, value)

    return property(get, put, doc=doc)


def _read_only(key: str, doc: str) -> Any:
    """A Blob property read from its resource (None until loaded or uploaded)."""

    def get(blob: Blob) -> Any:
        if key == "generation":
            return blob._properties.get(key, blob._generation)
        return blob._properties.get(key)

    return property(get, doc=doc)


class Blob:
    """An object of a local bucket, with google-cloud-storage's `Blob` methods."""

    def __init__(self, name: str, bucket: Bucket, generation: int | None = None, **_: Any) -> None:
        self.name = check_name(name)
        self.bucket = bucket
        self._generation = generation
        self._properties: dict[str, Any] = {}
        self._changed: dict[str, Any] = {}

    @classmethod
    def _loaded(cls, bucket: Bucket, resource: dict[str, Any]) -> Blob:
        blob = cls(resource["name"], bucket, generation=resource["generation"])
        blob._properties = dict(resource)
        return blob

    def _local_record(self) -> dict[str, Any]:
        record = self.bucket._local.get(self.name, self._generation)
        if record is None:
            raise NotFoundError(f"No object {self.name!r} in bucket {self.bucket.name!r}.")
        return dict(record["object"])

    # -- properties ----------------------------------------------------------------------

    def _get(self, key: str) -> Any:
        return self._changed.get(key, self._properties.get(key))

    def _set(self, key: str, value: Any) -> None:
        self._changed[key] = value

    content_type = _writable("contentType", "The content type (set it, then patch()).")
    cache_control = _writable("cacheControl", "The Cache-Control of the content.")
    content_disposition = _writable("contentDisposition", "The Content-Disposition.")
    content_encoding = _writable("contentEncoding", "The Content-Encoding.")
    content_language = _writable("contentLanguage", "The Content-Language.")

    @property
    def metadata(self) -> dict[str, str] | None:
        """The user's key/value metadata (set it, then patch(); a value None removes a key)."""
        value = self._get("metadata")
        return None if value is None else dict(value)

    @metadata.setter
    def metadata(self, value: dict[str, str | None] | None) -> None:
        if value is not None and not (
            isinstance(value, dict)
            and all(isinstance(k, str) and k for k in value)
            and all(v is None or isinstance(v, str) for v in value.values())
        ):
            raise ConfigError(f"metadata={value!r}: give a dict of non-empty strings to strings.")
        self._set("metadata", value)

    generation = _read_only("generation", "The content's generation (microseconds).")
    metageneration = _read_only("metageneration", "The metadata's version in its generation.")
    size = _read_only("size", "The content's length in bytes.")
    md5_hash = _read_only("md5Hash", "The content's MD5, base64.")
    etag = _read_only("etag", "The entity tag of this generation and metageneration.")
    id = _read_only("id", "bucket/name/generation.")
    storage_class = _read_only("storageClass", "STANDARD.")
    crc32c = _read_only("crc32c", "None: not computed here.")

    @property
    def time_created(self) -> datetime | None:
        """When this generation was created."""
        return _time(self._properties.get("timeCreated"))

    @property
    def updated(self) -> datetime | None:
        """When the metadata last changed."""
        return _time(self._properties.get("updated"))

    @property
    def time_deleted(self) -> datetime | None:
        """When this generation was archived (None for a live object)."""
        return _time(self._properties.get("timeDeleted"))

    @property
    def path(self) -> str:
        """The object's path in Cloud Storage's JSON API."""
        from urllib.parse import quote

        return f"/b/{self.bucket.name}/o/{quote(self.name, safe='')}"

    # -- calls ---------------------------------------------------------------------------

    def exists(self, **_: Any) -> bool:
        """Whether the object (or this generation) exists."""
        return self.bucket._local.get(self.name, self._generation) is not None

    def reload(self, **_: Any) -> None:
        """Load the object's properties (NotFoundError when it does not exist)."""
        self._properties, self._changed = self._local_record(), {}

    def upload_from_string(
        self, data: str | bytes, content_type: str = "text/plain", **match: Any
    ) -> None:
        """Store data as the object's content (a str as UTF-8)."""
        if isinstance(data, str):
            data = data.encode()
        if not isinstance(data, bytes | bytearray):
            raise ConfigError(f"upload_from_string takes str or bytes, not {type(data).__name__}.")
        self._upload(bytes(data), content_type, **match)

    def upload_from_filename(
        self, filename: str | os.PathLike[str], content_type: str | None = None, **match: Any
    ) -> None:
        """Store a file's content (its content type guessed from its name if not given)."""
        with open(filename, "rb") as source:
            data = source.read()
        guessed = mimetypes.guess_type(str(filename))[0]
        self._upload(data, content_type or self.content_type or guessed, **match)

    def upload_from_file(
        self,
        file_obj: BinaryIO,
        rewind: bool = False,
        content_type: str | None = None,
        **match: Any,
    ) -> None:
        """Store what a binary file object holds from its position."""
        if rewind:
            file_obj.seek(0)
        self._upload(file_obj.read(), content_type or self.content_type, **match)

    def _upload(self, data: bytes, content_type: str | None, **match: Any) -> None:
        fields = {v: self._get(v) for v in PATCHED.values()}
        metadata = {k: v for k, v in (fields["metadata"] or {}).items() if v is not None}
        fields["metadata"] = metadata or None  # a key set to None is no key of a new object
        fields["contentType"] = content_type or "application/octet-stream"
        self._properties = self.bucket._local.upload(self.name, data, fields, **_matches(match))
        self._changed, self._generation = {}, None

    def download_as_bytes(
        self, start: int | None = None, end: int | None = None, **_: Any
    ) -> bytes:
        """The object's content (bytes start to end, both included, when given)."""
        data = self.bucket._local.read(self.name, self._generation)
        first = start or 0
        return data[first : None if end is None else end + 1]

    def download_as_string(
        self, start: int | None = None, end: int | None = None, **_: Any
    ) -> bytes:
        """download_as_bytes (its older name)."""
        return self.download_as_bytes(start, end)

    def download_as_text(self, encoding: str | None = None, **_: Any) -> str:
        """The object's content decoded (UTF-8 unless encoding says otherwise)."""
        return self.download_as_bytes().decode(encoding or "utf-8")

    def download_to_filename(self, filename: str | os.PathLike[str], **_: Any) -> None:
        """Write the object's content to a file."""
        data = self.download_as_bytes()
        with open(filename, "wb") as out:
            out.write(data)

    def download_to_file(self, file_obj: BinaryIO, **_: Any) -> None:
        """Write the object's content to a binary file object."""
        file_obj.write(self.download_as_bytes())

    def delete(self, **match: Any) -> None:
        """Delete the object (or this generation); NotFoundError when there is none."""
        self.bucket._local.delete(self.name, self._generation, **_matches(match))

    def patch(self, **match: Any) -> None:
        """Save the properties set since the last load (metadata, content_type, ...)."""
        changes = {k: v for k, v in self._changed.items()}
        self._properties = self.bucket._local.patch(self.name, changes, **_matches(match))
        self._changed = {}

    def __repr__(self) -> str:
        return f"<Blob: {self.bucket.name}, {self.name}, {self.generation}>"


def _matches(given: dict[str, Any]) -> dict[str, Any]:
    """The preconditions of a call (if_generation_match, if_metageneration_match); the other
    google-cloud-storage keywords (timeout, retry, ...) mean nothing here."""
    return {
        k: v for k, v in given.items() if k in ("if_generation_match", "if_metageneration_match")
    }


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))
