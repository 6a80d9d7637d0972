"""The planted app's functions, fixed: `oncefire audit examples/audit/clean.py` finds nothing."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from oncefire import SERVER_TIMESTAMP, App, Event, Increment, PermanentError

app = App()
GATEWAY = "https://mail.example.invalid/send"


@app.on_document_created("signups/{uid}", max_instances=5)
def welcome_signup(event: Event) -> None:
    """Queue one welcome email: the email's id is the event's id, so a retry rewrites it."""
    email = event.data.get("email")
    app.db.collection("emails").document(event.id).set({"to": email, "template": "welcome"})


@app.on_document_created("orders/{orderId}", max_instances=10)
def count_order(event: Event) -> None:
    """Count each order once: the claim and the increment commit together."""
    with app.db.transaction() as tx:
        if not tx.claim(event.id):
            return
        tx.update(app.db.document("stats/orders"), {"count": Increment(1)})


@app.on_document_created("payments/{paymentId}", max_instances=8)
def record_payment(event: Event) -> None:
    """Write a ledger line once per payment, at most eight at a time."""
    with app.db.transaction() as tx:
        if not tx.claim(event.id):
            return
        tx.set(app.db.document(f"ledger/{event.id}"), {"amount": event.data.get("amount")})


@app.on_message("receipts", max_instances=4)
def send_receipt(event: Event) -> None:
    """Mail a receipt; the gateway drops a second request with the same key."""
    address = event.data.data.get("email")
    if not address:
        raise PermanentError("The message has no email address.")
    body = json.dumps({"to": address, "text": "Thank you for your order."}).encode()
    request = urllib.request.Request(GATEWAY, data=body, headers={"Idempotency-Key": event.id})
    try:
        urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as exc:
        if exc.code < 500:
            raise PermanentError(f"The gateway refused the receipt: {exc.code}.") from exc
        raise


@app.on_document_created("invoices/{invoiceId}", max_instances=4)
def archive_invoice(event: Event) -> None:
    """Archive an invoice once; a failure is retried."""
    with app.db.transaction() as tx:
        if not tx.claim(event.id):
            return
        tx.set(app.db.document(f"archive/{event.params['invoiceId']}"), event.data.to_dict())


@app.on_document_updated("profiles/{uid}", max_instances=2)
def stamp_profile(event: Event) -> None:
    """Stamp a profile's change in another collection, which starts nothing."""
    with app.db.transaction() as tx:
        if not tx.claim(event.id):
            return
        tx.set(app.db.document(f"profile_views/{event.params['uid']}"), {"seen": SERVER_TIMESTAMP})
