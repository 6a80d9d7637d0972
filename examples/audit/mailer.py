"""A helper the planted app calls: it mails through an HTTP gateway, with no idempotency key,
so a retried delivery mails twice. The audit follows the call into this module."""

from __future__ import annotations

import json
import urllib.request

GATEWAY = "https://mail.example.invalid/send"


def send(address: str, text: str) -> None:
    """Post one email to the gateway."""
    body = json.dumps({"to": address, "text": text}).encode()
    urllib.request.urlopen(GATEWAY, data=body, timeout=10)  # planted: external-call-without-key
