"""`oncefire purge [APP] [--dry-run]`: a dry run counts and changes nothing; a purge deletes
what it counted and never a dead letter; a retention shorter than a function's retry window
is refused."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from oncefire import App, PermanentError
from oncefire.events import Event
from oncefire.testing import TestClock
from tests.e2e.cli_support import Run, assert_user_error

APP = """
from oncefire import App

app = App()

@app.on_document_created("orders/{o}")
def ship(event):
    pass
"""


def old_history(store: str) -> None:
    """A month ago: three shipped orders, one dead letter, an unrouted message, a claim."""
    app = App(store, clock=TestClock(time.time() - 30 * 86400))

    @app.on_document_created("orders/{o}")
    def ship(event: Event) -> None: ...

    @app.on_document_created("refunds/{r}", retry=False)
    def refund(event: Event) -> None:
        raise PermanentError("refund refused")

    for n in range(3):
        app.db.document(f"orders/o{n}").set({"n": n})
    app.db.document("refunds/r1").set({"n": 1})
    app.publish("nobody", {"n": 1})
    with app.db.transaction() as tx:
        tx.claim("k1", ttl=60)
    app.drain()
    app.close()


def counts(run: Run, *args: str) -> dict[str, int]:
    result = run("purge", *args, "--json")
    assert result.returncode == 0, result.stderr
    found: dict[str, int] = json.loads(result.stdout)
    return found


@pytest.mark.slow
def test_purge_dry_run_counts_and_changes_nothing_then_purge_deletes_it(
    run: Run, store: str
) -> None:
    old_history(store)
    planned = counts(run, "--dry-run")
    assert planned == {
        "dry_run": True,
        "deliveries": 3,
        "attempts": 3,
        "events": 3,
        "claims": 1,
        "unrouted": 1,
        "dedupe_hits": 0,
        "buckets": 0,
    }
    assert counts(run, "--dry-run") == planned  # the dry run changed nothing
    table = run("purge", "--dry-run")
    assert "would purge 11 row(s)" in table.stdout
    assert {**counts(run), "dry_run": True} == planned
    assert sum(v for k, v in counts(run, "--dry-run").items() if k != "dry_run") == 0
    assert "refund refused" in run("dlq", "list").stdout  # dead letters are never purged


def test_purge_with_an_app_refuses_a_retention_shorter_than_its_retry_window(
    run: Run, store: str, tmp_path: Path
) -> None:
    old_history(store)
    (tmp_path / "shop.py").write_text(APP)
    short = {"ONCEFIRE_SUCCEEDED_RETENTION": "60"}
    assert_user_error(run("purge", "shop.py", env=short), "succeeded_retention of at least")
    assert counts(run, "--dry-run")["deliveries"] == 3  # nothing purged
    purged = run("purge", "shop.py")
    assert purged.returncode == 0, purged.stderr
    assert "purged 11 row(s)" in purged.stdout
