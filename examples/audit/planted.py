"""A planted app for `oncefire audit`: exactly one instance of each static rule.

Each line marked `# planted: RULE` is where the audit reports that rule; it reports
nothing else. Run `oncefire audit examples/audit/planted.py` to see them, and read
docs/audit.md for the fixed version of each (examples/audit/clean.py).
"""

from __future__ import annotations

import mailer

from oncefire import SERVER_TIMESTAMP, App, Event, Increment, PermanentError, idempotent

app = App()


@app.on_document_created("signups/{uid}", max_instances=5)
def welcome_signup(event: Event) -> None:  # planted: retry-without-guard
    """Queue a welcome email: a retry adds a second one."""
    email = event.data.get("email")
    app.db.collection("emails").add({"to": email, "template": "welcome"})


@app.on_document_created("orders/{orderId}", max_instances=10)
@idempotent(lease=60)
def count_order(event: Event) -> None:
    """Count orders: a redelivery after the update committed counts the order twice."""
    app.db.document("stats/orders").update({"count": Increment(1)})  # planted: increment-in-trigger


@app.on_document_created("payments/{paymentId}")
def record_payment(event: Event) -> None:  # planted: no-max-instances
    """Write a ledger line once per payment, with no cap on how many run at once."""
    with app.db.transaction() as tx:
        if not tx.claim(event.id):
            return
        tx.set(app.db.document(f"ledger/{event.id}"), {"amount": event.data.get("amount")})


@app.on_message("receipts", max_instances=4)
def send_receipt(event: Event) -> None:
    """Mail a receipt through a helper that passes no idempotency key."""
    address = event.data.data.get("email")
    if not address:
        raise PermanentError("The message has no email address.")
    mailer.send(address, "Thank you for your order.")


@app.on_document_created("invoices/{invoiceId}", max_instances=4)
def archive_invoice(event: Event) -> None:
    """Archive an invoice once; a failure is printed and the delivery counts as succeeded."""
    try:
        with app.db.transaction() as tx:
            if not tx.claim(event.id):
                return
            path = f"archive/{event.params['invoiceId']}"
            tx.set(app.db.document(path), event.data.to_dict())
    except Exception:  # planted: broad-except
        print("could not archive", event.id)


@app.on_document_updated("profiles/{uid}", max_instances=2)
@idempotent(lease=60)
def stamp_profile(event: Event) -> None:
    """Stamp a profile when it changes: the stamp is a change, which runs this again."""
    uid = event.params["uid"]
    app.db.document(f"profiles/{uid}").update({"seen": SERVER_TIMESTAMP})  # planted: self-trigger
