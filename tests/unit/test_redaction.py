"""redact() hides secrets wherever they nest; restore() gives an edit its secrets back."""

from __future__ import annotations

from oncefire.operations.redaction import REDACTED, redact, restore
from oncefire.web.dashboard.views import colour


def test_every_key_naming_a_secret_is_redacted_at_any_depth() -> None:
    payload = {
        "Password": "p",
        "user": {"api_key": "k", "name": "ada", "tokens": ["a", "b"]},
        "headers": [{"Authorization": "Bearer x", "Cookie": "c", "accept": "json"}],
        "client_secret": {"nested": "s"},
        "amount": 5,
    }
    assert redact(payload) == {
        "Password": REDACTED,
        "user": {"api_key": REDACTED, "name": "ada", "tokens": REDACTED},
        "headers": [{"Authorization": REDACTED, "Cookie": REDACTED, "accept": "json"}],
        "client_secret": REDACTED,
        "amount": 5,
    }
    assert payload["Password"] == "p"  # a copy: the original is untouched


def test_an_edit_keeps_the_secrets_it_left_redacted() -> None:
    original = {"token": "t-1", "card": {"api_key": "k", "last4": "4242"}, "items": [{"secret": 1}]}
    edited = redact(original)
    edited["card"]["last4"] = "0000"
    edited["note"] = "fixed"
    assert restore(edited, original) == {
        "token": "t-1",
        "card": {"api_key": "k", "last4": "0000"},
        "items": [{"secret": 1}],
        "note": "fixed",
    }
    assert restore({"token": "new"}, original) == {"token": "new"}  # an edited secret is kept


def test_the_success_bar_colours() -> None:
    assert [colour(r) for r in (1.0, 0.99, 0.989, 0.9, 0.899, 0.0, None)] == [
        "green",
        "green",
        "amber",
        "amber",
        "red",
        "red",
        "none",
    ]
