# A Firebase Cloud Functions main.py that keeps notes in Firestore, written from Firebase's
# public documentation of the Firestore client (batched writes, transactions, field
# transforms, collection group queries, aggregation, cursors) and of Firestore triggers with
# auth context. It is kept in Firebase's spelling: the tests run `oncefire port` on it and
# serve the result unchanged.

import json
from typing import Any

import google.cloud.firestore
from firebase_admin import firestore, initialize_app
from firebase_functions import firestore_fn, https_fn
from google.cloud.firestore_v1.base_query import FieldFilter

initialize_app()


@https_fn.on_call()
def addnote(req: https_fn.CallableRequest) -> Any:
    """Save a note for the signed-in user, and count it on the user, in one batch."""
    if req.auth is None:
        raise https_fn.HttpsError(
            code=https_fn.FunctionsErrorCode.UNAUTHENTICATED,
            message="Sign in to add notes.",
        )
    text = req.data.get("text")
    tags = req.data.get("tags", [])
    if not isinstance(text, str) or not text:
        raise https_fn.HttpsError(https_fn.FunctionsErrorCode.INVALID_ARGUMENT, "No text.")
    db = firestore.client()
    user = db.collection("users").document(req.auth.uid)
    note = user.collection("notes").document()
    batch = db.batch()
    batch.set(note, {"text": text, "tags": tags, "created": firestore.SERVER_TIMESTAMP})
    batch.set(
        user,
        {"notes": firestore.Increment(1), "tags": firestore.ArrayUnion(tags), "draft": "x"},
        merge=True,
    )
    batch.update(user, {"draft": firestore.DELETE_FIELD})
    batch.commit()
    return {"id": note.id}


@firestore_fn.on_document_created_with_auth_context(document="users/{uid}/notes/{noteId}")
def auditnote(event: firestore_fn.AuthEvent[firestore_fn.DocumentSnapshot | None]) -> None:
    """Record who created each note."""
    firestore.client().collection("audit").document(event.params["noteId"]).set(
        {"owner": event.params["uid"], "authType": event.auth_type, "authId": event.auth_id}
    )


@firestore_fn.on_document_created(document="users/{uid}/notes/{noteId}")
def counttags(event: firestore_fn.Event[firestore_fn.DocumentSnapshot | None]) -> None:
    """Count the notes of each tag, one transaction a tag."""
    if event.data is None:
        return
    db = firestore.client()

    @google.cloud.firestore.transactional
    def bump(transaction: google.cloud.firestore.Transaction, tag_ref: Any) -> None:
        snapshot = tag_ref.get(transaction=transaction)
        count = snapshot.get("count") if snapshot.exists else 0
        transaction.set(tag_ref, {"count": count + 1})

    for tag in event.data.get("tags"):
        bump(db.transaction(), db.collection("tags").document(tag))


@https_fn.on_request()
def search(req: https_fn.Request) -> https_fn.Response:
    """Notes of every user with a tag, by text: how many, and one page after a cursor."""
    db = firestore.client()
    tag = req.args.get("tag", "")
    notes = (
        db.collection_group("notes")
        .where(filter=FieldFilter("tags", "array_contains", tag))
        .order_by("text")
    )
    total = notes.count().get()[0][0].value
    page = notes.limit(int(req.args.get("limit", "10")))
    after = req.args.get("after")
    if after is not None:
        page = page.start_after({"text": after})
    texts = [snapshot.get("text") for snapshot in page.stream()]
    return https_fn.Response(
        json.dumps({"total": total, "texts": texts}), content_type="application/json"
    )
