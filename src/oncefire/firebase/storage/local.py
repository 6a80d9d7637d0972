"""A local Cloud Storage bucket: each object's bytes in a file under the app's storage folder,
its metadata a document of `__storage__` (names.py), each change's event a message on the
topic `firebase.storage.<bucket>`. The metadata and its events commit in one transaction; a
new object's file is written before it (removed if it fails), an old one's removed after it.

| change | events, in its transaction (ARCHIVE instead of DELETE when versioned) |
|---|---|
| upload of a new name | OBJECT_FINALIZE |
| upload over a live object | OBJECT_DELETE of the old generation, OBJECT_FINALIZE |
| delete | OBJECT_DELETE |
| patch of metadata | OBJECT_METADATA_UPDATE |
"""

from __future__ import annotations

import base64
import hashlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from oncefire.errors import ConfigError, OncefireError
from oncefire.events import EventType
from oncefire.features import usage
from oncefire.firebase.exceptions import FirebaseError, NotFoundError
from oncefire.firebase.storage.names import (
    ARCHIVE,
    DELETE,
    FINALIZE,
    METADATA_UPDATE,
    ROOT,
    archived_path,
    check_bucket,
    check_name,
    object_path,
    rfc3339,
    storage_dir,
    topic_of,
)
from oncefire.model import codec, paths
from oncefire.model.messages import message_payload
from oncefire.model.outbox import emit


class PreconditionFailedError(FirebaseError):
    """An if_generation_match or if_metageneration_match condition did not hold."""

    def __init__(self, message: str) -> None:
        super().__init__("FAILED_PRECONDITION", message)


class StorageError(OncefireError):
    """An object's bytes could not be written or read in the storage folder."""


class LocalBucket:
    """The objects of one bucket of an app: reads, and writes that emit their events."""

    def __init__(self, app: Any, bucket: str) -> None:
        self.app = app
        self.name = check_bucket(bucket)

    @property
    def folder(self) -> Path:
        """Where this bucket's files are."""
        return storage_dir(self.app) / self.name

    # -- reads ---------------------------------------------------------------------------

    def get(self, name: str, generation: int | None = None) -> dict[str, Any] | None:
        """The stored record {"object": resource, "file": path} of a live object (or of that
        generation, live or archived), or None."""
        with self.app.db.reading() as tx:
            usage.count_reads(1)
            found = tx.get_document(object_path(self.name, name))
            record = None if found is None else found["data"]
            if generation is None or (record and record["object"]["generation"] == generation):
                return record
            found = tx.get_document(archived_path(self.name, name, generation))
            return None if found is None else found["data"]

    def records(self, prefix: str, versions: bool) -> list[dict[str, Any]]:
        """The records of the live objects whose name starts with prefix (and with versions,
        the archived generations too), by name and generation."""
        kinds = ("objects", "archived") if versions else ("objects",)
        out = []
        with self.app.db.reading() as tx:
            for kind in kinds:
                for _, found in tx.list_documents(f"{ROOT}/{self.name}/{kind}"):
                    if found["data"]["object"]["name"].startswith(prefix):
                        out.append(found["data"])
        usage.count_reads(max(1, len(out)))
        return sorted(out, key=lambda r: (r["object"]["name"], r["object"]["generation"]))

    def read(self, name: str, generation: int | None = None) -> bytes:
        """An object's bytes (NotFoundError if there is no such object)."""
        for _ in range(3):  # a concurrent replace may remove the file just found: read again
            record = self.get(name, generation)
            if record is None:
                raise NotFoundError(f"No object {name!r} in bucket {self.name!r}.")
            try:
                return (self.folder / str(record["file"])).read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StorageError(f"Cannot read object {name!r}: {exc}.") from exc
        raise NotFoundError(f"Object {name!r} in bucket {self.name!r} was just replaced.")

    def is_versioned(self) -> bool:
        """Whether the bucket keeps replaced and deleted objects as archived generations."""
        with self.app.db.reading() as tx:
            found = tx.get_document(f"{ROOT}/{self.name}")
        return bool(found and found["data"].get("versioning"))

    def set_versioning(self, enabled: bool) -> None:
        """Turn object versioning on or off."""
        now = self.app.clock.now()
        with self._transaction() as tx:
            found = tx.get_document(f"{ROOT}/{self.name}")
            created = now if found is None else found["create_time"]
            data = codec.encode_document({"versioning": bool(enabled)})
            tx.put_document(f"{ROOT}/{self.name}", ROOT, data, created, now)

    # -- writes --------------------------------------------------------------------------

    def upload(
        self, name: str, data: bytes, fields: dict[str, Any], **match: Any
    ) -> dict[str, Any]:
        """Store data as the object's new generation with these resource fields (contentType,
        metadata, ...); its events commit with the metadata. The new resource."""
        check_name(name)
        file = self._write_file(name, data)
        try:
            now = self.app.clock.now()
            with self._transaction() as tx:
                current = self._live(tx, name)
                _check_match(name, current, match)
                generation = int(now * 1_000_000)
                if current is not None:
                    generation = max(generation, current["object"]["generation"] + 1)
                resource = {
                    **{k: v for k, v in fields.items() if v is not None},
                    "kind": "storage#object",
                    "id": f"{self.name}/{name}/{generation}",
                    "bucket": self.name,
                    "name": name,
                    "generation": generation,
                    "metageneration": 1,
                    "size": len(data),
                    "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
                    "etag": f"{generation:x}1",
                    "storageClass": "STANDARD",
                    "timeCreated": rfc3339(now),
                    "updated": rfc3339(now),
                    "timeStorageClassUpdated": rfc3339(now),
                }
                removed = self._retire(tx, current, now) if current is not None else None
                self._put(tx, object_path(self.name, name), {"object": resource, "file": file})
                self._emit(tx, FINALIZE, resource, now)
        except BaseException:
            self._remove_file(file)
            raise
        if removed is not None:  # after the commit: a crash between leaves an unused file only
            self._remove_file(removed)
        return resource

    def delete(self, name: str, generation: int | None = None, **match: Any) -> None:
        """Delete the live object (archived when versioned), or one archived generation."""
        now = self.app.clock.now()
        with self._transaction() as tx:
            current = self._live(tx, name)
            live = None if current is None else current["object"]["generation"]
            if generation is not None and generation != live:
                path = archived_path(self.name, name, generation)
                found = tx.get_document(path)
                if found is None:
                    raise NotFoundError(f"No generation {generation} of {name!r}.")
                tx.delete_document(path)
                self._emit(tx, DELETE, found["data"]["object"], now)
                removed: str | None = found["data"]["file"]
            else:
                if current is None:
                    raise NotFoundError(f"No object {name!r} in bucket {self.name!r}.")
                _check_match(name, current, match)
                removed = self._retire(tx, current, now)
                tx.delete_document(object_path(self.name, name))
        if removed is not None:
            self._remove_file(removed)

    def patch(self, name: str, changes: dict[str, Any], **match: Any) -> dict[str, Any]:
        """Change an object's metadata fields (a `metadata` dict is merged, None removing a
        key); the new resource, with its OBJECT_METADATA_UPDATE event."""
        now = self.app.clock.now()
        with self._transaction() as tx:
            current = self._live(tx, name)
            if current is None:
                raise NotFoundError(f"No object {name!r} in bucket {self.name!r}.")
            _check_match(name, current, match)
            resource = dict(current["object"])
            for key, value in changes.items():
                if key == "metadata" and value is not None:
                    merged = {**(resource.get("metadata") or {}), **value}
                    value = {k: v for k, v in merged.items() if v is not None} or None
                if value is None:
                    resource.pop(key, None)
                else:
                    resource[key] = value
            if resource == current["object"]:
                return resource  # nothing changed: no new metageneration, no event
            resource["metageneration"] += 1
            resource["updated"] = rfc3339(now)
            resource["etag"] = f"{resource['generation']:x}{resource['metageneration']}"
            self._put(tx, object_path(self.name, name), {**current, "object": resource})
            self._emit(tx, METADATA_UPDATE, resource, now)
        return resource

    # -- inside a write ------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """The store handle of one change's transaction (refused inside an open document
        transaction: a change's files are kept or removed once its own commit is known)."""
        if self.app.db.active_transaction() is not None:
            raise ConfigError(
                "Storage writes commit on their own: upload, delete or patch outside "
                "app.db.transaction()."
            )
        with self.app.db.transaction(), self.app.db.reading() as tx:
            yield tx

    def _live(self, tx: Any, name: str) -> dict[str, Any] | None:
        found = tx.get_document(object_path(self.name, name))
        return None if found is None else found["data"]

    def _retire(self, tx: Any, current: dict[str, Any], now: float) -> str | None:
        """Archive (versioned) or delete the live generation `current`, with its event; the
        file to remove after the commit, if any."""
        resource = current["object"]
        found = tx.get_document(f"{ROOT}/{self.name}")
        if found is not None and found["data"].get("versioning"):
            archived = {**resource, "timeDeleted": rfc3339(now)}
            path = archived_path(self.name, resource["name"], resource["generation"])
            self._put(tx, path, {**current, "object": archived})
            self._emit(tx, ARCHIVE, archived, now)
            return None
        self._emit(tx, DELETE, resource, now)
        return str(current["file"])

    def _put(self, tx: Any, path: str, record: dict[str, Any]) -> None:
        now = self.app.clock.now()
        found = tx.get_document(path)
        created = now if found is None else found["create_time"]
        usage.count_write()
        tx.put_document(path, paths.parent_of(path), codec.encode_document(record), created, now)

    def _emit(self, tx: Any, kind: str, resource: dict[str, Any], now: float) -> None:
        attributes = {
            "eventType": kind,
            "bucketId": self.name,
            "objectId": resource["name"],
            "objectGeneration": str(resource["generation"]),
            "payloadFormat": "JSON_API_V1",
            "eventTime": rfc3339(now),
        }
        topic = topic_of(self.name)
        payload = message_payload(topic, resource, attributes)
        emit(tx, event_type=EventType.MESSAGE_PUBLISHED, source=topic, data=payload, now=now)

    def _write_file(self, name: str, data: bytes) -> str:
        """Write data to a new file of this bucket, synced; its path under the folder."""
        digest = hashlib.sha256(name.encode()).hexdigest()
        relative = f"{digest[:2]}/{digest}-{uuid.uuid4().hex}"
        target = self.folder / relative
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            directory = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        except OSError as exc:
            self._remove_file(relative)
            raise StorageError(
                f"Cannot write object {name!r} under {self.folder}: {exc}. Check the "
                "storage_dir setting (ONCEFIRE_STORAGE_DIR)."
            ) from exc
        return relative

    def _remove_file(self, relative: str) -> None:
        with suppress(OSError):  # an unreferenced file left behind takes room, nothing else
            (self.folder / relative).unlink(missing_ok=True)


def _check_match(name: str, current: dict[str, Any] | None, match: dict[str, Any]) -> None:
    """Cloud Storage's preconditions: if_generation_match (0: the object must not exist) and
    if_metageneration_match."""
    resource = None if current is None else current["object"]
    wanted = match.get("if_generation_match")
    if wanted is not None and (resource["generation"] if resource else 0) != wanted:
        raise PreconditionFailedError(f"if_generation_match={wanted} does not hold for {name!r}.")
    wanted = match.get("if_metageneration_match")
    if wanted is not None and (resource is None or resource["metageneration"] != wanted):
        raise PreconditionFailedError(
            f"if_metageneration_match={wanted} does not hold for {name!r}."
        )
