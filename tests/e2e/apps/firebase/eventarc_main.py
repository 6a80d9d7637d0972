"""Custom events as Firebase's guide to them describes: a function announces each order placed
as a custom event on the default channel, and functions subscribed to that event type (one
of them only for its region) react to it. Written in Firebase's spelling (Python's Admin SDK
has no eventarc module: the publishing side follows the Node.js Admin SDK's names); the tests
run it after `oncefire port`."""

from firebase_admin import eventarc, firestore, initialize_app
from firebase_functions import eventarc_fn, firestore_fn

app = initialize_app()
ORDER_PLACED = "com.example.shop.order.v1.placed"


@firestore_fn.on_document_created(document="orders/{orderId}")
def announceorder(event: firestore_fn.Event[firestore_fn.DocumentSnapshot]) -> None:
    """Publish an order.placed event for each new order."""
    order = event.data.to_dict()
    eventarc.channel().publish(
        eventarc.CloudEvent(
            type=ORDER_PLACED,
            source="/orders",
            subject=f"orders/{event.params['orderId']}",
            data={"id": event.params["orderId"], "total": order["total"]},
            region=order["region"],
        )
    )


@eventarc_fn.on_custom_event_published(event_type=ORDER_PLACED)
def recordorder(event: eventarc_fn.CloudEvent) -> None:
    """Enter every order placed in the ledger."""
    firestore.client().collection("ledger").document(event.data["id"]).set(
        {"total": event.data["total"], "subject": event.subject, "source": event.source}
    )


@eventarc_fn.on_custom_event_published(event_type=ORDER_PLACED, filters={"region": "eu"})
def vatinvoice(event: eventarc_fn.CloudEvent) -> None:
    """Invoice VAT on the orders placed in the EU only."""
    firestore.client().collection("invoices").document(event.data["id"]).set(
        {"vat": round(event.data["total"] * 0.2, 2)}
    )
