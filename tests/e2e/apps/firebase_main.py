# ruff: noqa: I001 - the imports stay where Firebase's sample has them, one changed line each
# A Firebase Cloud Functions main.py in the shape of Firebase's published Python samples
# (the quickstart's addmessage / makeuppercase, a Pub/Sub function, a scheduled clean-up),
# ported to oncefire by changing only the imports: the four marked lines below.

# The Cloud Functions for Firebase SDK to create Cloud Functions and set up triggers.
from oncefire.firebase import firestore_fn, https_fn, pubsub_fn, scheduler_fn  # ported import

# The Firebase Admin SDK to access Cloud Firestore.
from oncefire.firebase import initialize_app, firestore  # ported import
from oncefire.firebase.firestore import FieldFilter  # ported import
from oncefire.firebase import options  # ported import

app = initialize_app()
options.set_global_options(max_instances=10, region=options.SupportedRegion.US_CENTRAL1)


@https_fn.on_request()
def addmessage(req: https_fn.Request) -> https_fn.Response:
    """Take the text parameter passed to this HTTP endpoint and insert it into
    a new document in the messages collection."""
    # Grab the text parameter.
    original = req.args.get("text")
    if original is None:
        return https_fn.Response("No text parameter provided", status=400)

    firestore_client = firestore.client()

    # Push the new message into Cloud Firestore using the Firebase Admin SDK.
    _, doc_ref = firestore_client.collection("messages").add({"original": original})

    # Send back a message that we've successfully written the message
    return https_fn.Response(f"Message with ID {doc_ref.id} added.")


@firestore_fn.on_document_created(document="messages/{pushId}")
def makeuppercase(event: firestore_fn.Event[firestore_fn.DocumentSnapshot | None]) -> None:
    """Listens for new documents to be added to /messages. If the document has
    an "original" field, creates an "uppercase" field containg the contents of
    "original" in upper case."""

    # Get the value of "original" if it exists.
    if event.data is None:
        return
    try:
        original = event.data.get("original")
    except KeyError:
        # No "original" field, so do nothing.
        return

    # Set the "uppercase" field.
    print(f"Uppercasing {event.params['pushId']}: {original}")
    upper = original.upper()
    event.data.reference.update({"uppercase": upper})


@firestore_fn.on_document_updated(document="messages/{pushId}", memory=options.MemoryOption.MB_256)
def countedits(
    event: firestore_fn.Event[firestore_fn.Change[firestore_fn.DocumentSnapshot]],
) -> None:
    """Counts the edits of a message in its "edits" field."""
    before = event.data.before.to_dict() or {}
    after = event.data.after.to_dict() or {}
    if before.get("original") == after.get("original"):
        return
    event.data.after.reference.update({"edits": after.get("edits", 0) + 1})


@pubsub_fn.on_message_published(topic="greetings")
def hellopubsub(event: pubsub_fn.CloudEvent[pubsub_fn.MessagePublishedData]) -> None:  # type: ignore[type-arg]  # as Firebase publishes it
    """Writes a greeting for each Pub/Sub message with a "name"."""
    try:
        data = event.data.message.json
    except ValueError:
        print("PubSub message was not JSON")
        return
    if data is None:
        return
    if "name" not in data:
        print("No 'name' key")
        return
    name = data["name"]
    firestore.client().collection("greetings").document(event.data.message.message_id).set(
        {"greeting": f"Hello, {name}!", "attributes": event.data.message.attributes}
    )


@scheduler_fn.on_schedule(schedule="every day 00:00", timeout_sec=120)
def accountcleanup(event: scheduler_fn.ScheduledEvent) -> None:
    """Delete users who've been inactive, once a day."""
    db = firestore.client()
    inactive = db.collection("users").where(filter=FieldFilter("inactive", "==", True))
    for user in inactive.stream():
        user.reference.delete()
    db.collection("cleanups").add({"at": event.schedule_time.isoformat()})
