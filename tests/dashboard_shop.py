"""A small shop app the dashboard tests (HTTP and browser) look at: `charge` on a topic, whose
messages fail when they ask to, and `ship` on documents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oncefire import App, RetryPolicy
from oncefire.clock import Clock

TOKEN = "ops=s3cret-token-for-tests-0001"
SECRET = "s3cret-token-for-tests-0001"


@dataclass
class Shop:
    """The app and what its functions saw."""

    app: App
    charged: list[dict[str, Any]] = field(default_factory=list)

    def fail(self, n: int = 1, error: str = "card declined", **extra: Any) -> None:
        """Publish n messages that fail into dead letters, and run them."""
        for i in range(n):
            self.app.publish("payments", {"fail": True, "error": error, "n": i, **extra})
        self.app.drain()

    def succeed(self, n: int = 1) -> None:
        """Publish n messages that succeed, and run them."""
        for i in range(n):
            self.app.publish("payments", {"amount": 5, "n": i})
        self.app.drain()


def build(store_url: str, clock: Clock | None = None) -> Shop:
    """The shop on a store."""
    app = App(store_url, clock=clock)
    shop = Shop(app)

    @app.on_message("payments", name="charge", retry=False, max_instances=4)
    def charge(event: Any) -> None:
        body = event.data.data
        shop.charged.append(body)
        if body.get("fail"):
            raise ConnectionError(body.get("error") or "card declined")

    @app.on_document_created(
        "orders/{o}", name="ship", retry_policy=RetryPolicy(3, 10, 2, 60), timeout=30
    )
    def ship(event: Any) -> None:
        pass

    return shop
