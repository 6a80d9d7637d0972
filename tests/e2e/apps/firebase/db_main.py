# A Firebase Cloud Functions main.py over the Realtime Database, written from Firebase's
# public documentation of db_fn (value triggers on a reference pattern, event.data a Change
# for writes) and of firebase_admin.db (push, child, transaction, ordered queries). It is
# kept in Firebase's spelling: the tests run `oncefire port` on it and serve the result
# unchanged.

import json

from firebase_admin import db, initialize_app
from firebase_functions import db_fn, https_fn

initialize_app()


@https_fn.on_request()
def addmessage(req: https_fn.Request) -> https_fn.Response:
    """Push the text parameter under /messages."""
    original = req.args.get("text")
    if original is None:
        return https_fn.Response("No text parameter provided", status=400)
    ref = db.reference("/messages").push({"original": original})
    return https_fn.Response(f"Message with ID {ref.key} added.")


@db_fn.on_value_created(reference="/messages/{pushId}/original")
def makeuppercase(event: db_fn.Event[object]) -> None:
    """Write an uppercase copy beside each new original."""
    upper = str(event.data).upper()
    db.reference(f"/messages/{event.params['pushId']}").child("uppercase").set(upper)


@db_fn.on_value_written(reference="/messages/{pushId}")
def countmessages(event: db_fn.Event[db_fn.Change[object]]) -> None:
    """Keep /stats/messages at the number of messages, in a transaction."""
    if event.data.before is None and event.data.after is not None:
        delta = 1
    elif event.data.before is not None and event.data.after is None:
        delta = -1
    else:
        return
    db.reference("/stats/messages").transaction(lambda current: (current or 0) + delta)


@https_fn.on_request()
def latest(req: https_fn.Request) -> https_fn.Response:
    """The uppercase copies of the last n messages, oldest first."""
    count = int(req.args.get("n", "2"))
    found = db.reference("/messages").order_by_key().limit_to_last(count).get() or {}
    copies = [message.get("uppercase") for message in found.values()]
    return https_fn.Response(json.dumps(copies), content_type="application/json")
