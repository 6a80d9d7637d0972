"""@idempotent's rules that need no store: registration limits, settings, the payload hash."""

from __future__ import annotations

import math
from typing import Any

import pytest

from oncefire import App, ConfigError, RetryPolicy, idempotent
from oncefire.events import Event
from oncefire.idempotency import payload_hash

# max_attempts=3: attempts at 0, 10 and 10 + 20 s, so the retry window is 30 s.
POLICY = RetryPolicy(max_attempts=3, first_delay=10, multiplier=2)


def unregistered_app() -> App:
    """An App whose store is never opened: registration alone does no I/O."""
    return App("sqlite://:memory:")


def noop(event: Event) -> None:
    """A function body for registration tests."""


def register(ttl: float, lease: float = 60.0, **options: Any) -> None:
    app = unregistered_app()
    if options.get("retry", True):  # retry=False takes no policy
        options.setdefault("retry_policy", POLICY)
    app.on_message("payments", **options)(idempotent(lease=lease, ttl=ttl)(noop))


def an_event(raw: dict[str, Any], event_id: str = "e1") -> Event:
    from datetime import UTC, datetime

    return Event(
        id=event_id,
        type="message.published",
        source="payments",
        time=datetime.now(UTC),
        data=None,
        params={},
        attempt=1,
        size=0,
        function="charge",
        raw=raw,
    )


def test_ttl_shorter_than_max_event_age_plus_retry_window_is_refused_with_the_minimum() -> None:
    with pytest.raises(ConfigError, match=r"at least 130 s"):
        register(ttl=129, max_event_age=100)


def test_ttl_equal_to_max_event_age_plus_retry_window_is_accepted() -> None:
    register(ttl=130, max_event_age=100)


def test_ttl_shorter_than_retry_window_is_refused_without_max_event_age() -> None:
    with pytest.raises(ConfigError, match=r"at least 30 s"):
        register(ttl=29)
    register(ttl=30)


def test_default_ttl_covers_the_default_retry_window() -> None:
    app = unregistered_app()
    # RetryPolicy(): 1 + 2 + 4 + 8 + 16 minutes between six attempts.
    assert RetryPolicy().window() == 1860
    app.on_message("payments", max_event_age=86400)(idempotent()(noop))


def test_without_retries_the_minimum_ttl_is_max_event_age() -> None:
    with pytest.raises(ConfigError, match=r"at least 100 s"):
        register(ttl=99, retry=False, max_event_age=100)
    register(ttl=100, retry=False, max_event_age=100)


def test_lease_shorter_than_the_timeout_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"lease of at least 60 s"):
        register(ttl=86400, lease=59, timeout=60)
    register(ttl=86400, lease=10, timeout=10)


def test_registration_check_sees_through_functools_wraps() -> None:
    import functools

    inner = idempotent(lease=60, ttl=1)(noop)

    @functools.wraps(inner)
    def outer(event: Event) -> None:
        inner(event)

    with pytest.raises(ConfigError, match=r"at least 30 s"):
        unregistered_app().on_message("payments", retry_policy=POLICY)(outer)


@pytest.mark.parametrize(
    ("lease", "ttl"),
    [(0, 60), (-1, 60), (60, 0), (60, -5), (math.inf, 60), (60, math.inf), (60, math.nan)],
)
def test_lease_and_ttl_must_be_positive_and_finite(lease: float, ttl: float) -> None:
    with pytest.raises(ConfigError, match="positive, finite"):
        idempotent(lease=lease, ttl=ttl)


def test_payload_hash_is_the_same_for_the_same_payload_and_differs_for_another() -> None:
    first = an_event({"data": {"amount": 5}, "attributes": {}})
    again = an_event({"attributes": {}, "data": {"amount": 5}}, event_id="e2")
    other = an_event({"data": {"amount": 6}, "attributes": {}})
    assert payload_hash(first) == payload_hash(again)
    assert payload_hash(first) != payload_hash(other)


def test_payload_hash_names_the_function_that_claims() -> None:
    event = an_event({"data": {"amount": 5}, "attributes": {}})
    assert payload_hash(event, "charge_once") == payload_hash(event, "charge_once")
    assert payload_hash(event, "charge_once") != payload_hash(event, "email_once")


def test_idempotent_above_the_trigger_decorator_is_refused() -> None:
    app = App("sqlite://:memory:")
    with pytest.raises(ConfigError, match="below it"):

        @idempotent()
        @app.on_document_created("orders/{o}")
        def charge(event: Event) -> None: ...
