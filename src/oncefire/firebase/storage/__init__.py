"""`firebase_admin.storage`: local buckets with google-cloud-storage's `Bucket` and `Blob`
(blobs.py), kept in the App's store and a folder (local.py), with Cloud Storage's naming rules
and the paths and topics of their events (names.py)."""

from oncefire.firebase.storage.blobs import (
    Blob,
    Bucket,
    NotFoundError,
    PreconditionFailedError,
    bucket,
)

__all__ = ["Blob", "Bucket", "NotFoundError", "PreconditionFailedError", "bucket"]
