"""Where a local storage bucket keeps things: object and bucket names checked as Cloud Storage
checks them, the folder of the objects' bytes (the storage_dir setting), the paths of the
metadata documents in the reserved collection `__storage__`, and the topic of the events."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from oncefire.clock import to_datetime
from oncefire.errors import ConfigError, InvalidPathError
from oncefire.model import paths
from oncefire.settings import MEMORY_URLS

ROOT = "__storage__"  # Firestore reserves ids of the form __x__: no ported app uses it
TOPIC_PREFIX = "firebase.storage."
FINALIZE, DELETE, ARCHIVE, METADATA_UPDATE = (
    "OBJECT_FINALIZE",
    "OBJECT_DELETE",
    "OBJECT_ARCHIVE",
    "OBJECT_METADATA_UPDATE",
)
MAX_NAME_BYTES = 1024  # Cloud Storage's limit on an object's name
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_temporary: dict[str, Path] = {}  # storage folders of in-memory stores, by store URL


def topic_of(bucket: str) -> str:
    """The topic a bucket's storage events are published on."""
    return TOPIC_PREFIX + bucket


def check_bucket(name: Any) -> str:
    """A bucket name, checked: an id (no '/', printable, not '.' or '..')."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"Invalid storage bucket name: {name!r}: give a non-empty string.")
    try:
        return paths.check_id(name, "bucket name")
    except InvalidPathError as exc:
        raise ConfigError(str(exc)) from None


def check_name(name: Any) -> str:
    """An object name, checked as Cloud Storage does (non-empty, at most 1024 bytes of
    UTF-8, not '.' or '..'), and printable (no control characters, which no store keeps)."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"Invalid object name {name!r}: give a non-empty string.")
    if name in (".", ".."):
        raise ConfigError(f"The object name {name!r} is reserved: choose another name.")
    if _CONTROL.search(name):
        raise ConfigError(f"The object name {name!r} holds a control character: remove it.")
    try:
        size = len(name.encode())
    except UnicodeEncodeError:
        raise ConfigError(f"The object name {name!r} is not valid Unicode.") from None
    if size > MAX_NAME_BYTES:
        raise ConfigError(f"The object name {name[:40]!r}... is over {MAX_NAME_BYTES} bytes.")
    return name


def storage_dir(app: Any) -> Path:
    """The folder of an app's objects: the `storage_dir` setting, else `<store file>-storage`
    beside a SQLite file, `oncefire-storage` in the working folder for PostgreSQL, and a
    temporary folder for an in-memory store."""
    settings = app.settings
    if settings.storage_dir:
        return Path(settings.storage_dir)
    url = settings.store
    if url in MEMORY_URLS:
        if url not in _temporary:
            _temporary[url] = Path(tempfile.mkdtemp(prefix="oncefire-storage-"))
        return _temporary[url]
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///") + "-storage")
    return Path("oncefire-storage")


def _encoded(name: str) -> str:
    """An object name as a document id: '%' and '/' percent-encoded, '.' and '..' too."""
    text = name.replace("%", "%25").replace("/", "%2F")
    return text.replace(".", "%2E") if text in (".", "..") else text


def object_path(bucket: str, name: str) -> str:
    """The path of the document holding a live object's metadata."""
    return f"{ROOT}/{bucket}/objects/{_encoded(name)}"


def archived_path(bucket: str, name: str, generation: int) -> str:
    """The path of the document holding an archived generation's metadata."""
    return f"{ROOT}/{bucket}/archived/{_encoded(name)}#{generation}"


def rfc3339(seconds: float) -> str:
    """A time as Cloud Storage writes it: 2024-01-31T12:00:00.000Z."""
    return to_datetime(seconds).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
