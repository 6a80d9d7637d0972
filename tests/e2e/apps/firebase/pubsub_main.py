# A Firebase Cloud Functions main.py that greets the names Pub/Sub messages carry, as plain
# text or as JSON, written from Firebase's public documentation of pubsub_fn (message.data is
# the base64 of the message's bytes; message.json reads them as JSON). It is kept in
# Firebase's spelling: the tests run `oncefire port` on it and run the result unchanged.

import base64

from firebase_admin import firestore, initialize_app
from firebase_functions import pubsub_fn

initialize_app()


@pubsub_fn.on_message_published(topic="greetings")
def greet(event: pubsub_fn.CloudEvent[pubsub_fn.MessagePublishedData]) -> None:
    """Store a greeting for the name in each message, plain text or {"name": ...}."""
    message = event.data.message
    try:
        name = message.json["name"]
        kind = "json"
    except ValueError:
        name = base64.b64decode(message.data).decode("utf-8")
        kind = "text"
    firestore.client().collection("greetings").document(message.message_id).set(
        {"greeting": f"Hello {name}!", "kind": kind, "attributes": message.attributes}
    )
