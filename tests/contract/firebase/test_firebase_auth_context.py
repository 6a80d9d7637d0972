"""firestore_fn.on_document_*_with_auth_context: event.auth_type and event.auth_id say who
wrote the document: "system" for a worker's write, "unauthenticated" for the CLI and an
anonymous caller, the user's uid inside auth_context.acting_as (what a callable sets)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncefire import App
from oncefire.firebase import auth_context, firestore, firestore_fn
from oncefire.firebase.registration.apps import set_default_app

ONCEFIRE = str(Path(sys.executable).parent / "oncefire")


@pytest.fixture
def default_app(app: App) -> Iterator[App]:
    set_default_app(app)
    yield app
    set_default_app(None)


def audited(kind: str) -> list[tuple[str, str, str | None, str]]:
    """(document id, auth_type, auth_id, event type) of each event an auth-context function
    of this kind (created, updated, deleted, written) gets on notes/{id}."""
    seen: list[tuple[str, str, str | None, str]] = []
    register = getattr(firestore_fn, f"on_document_{kind}_with_auth_context")

    def audit(event: firestore_fn.AuthEvent[Any]) -> None:
        seen.append((event.params["noteId"], event.auth_type, event.auth_id, event.type))

    audit.__name__ = f"audit_{kind}"  # the function's name is its name in the store
    register(document="notes/{noteId}")(audit)
    return seen


def test_each_writer_is_named_in_the_event(default_app: App, store_url: str) -> None:
    seen = audited("written")

    @firestore_fn.on_document_created(document="requests/{id}")
    def worker_write(event: firestore_fn.Event[Any]) -> None:
        firestore.client().document(f"notes/{event.params['id']}").set({"by": "worker"})

    db = firestore.client()
    db.document("notes/plain").set({"n": 1})
    with auth_context.acting_as("uid-ada"):
        db.document("notes/ada").set({"n": 1})
        batch = db.batch()
        batch.set(db.document("notes/ada-batch"), {"n": 1})
        batch.commit()
    with auth_context.acting_as(None):
        db.document("notes/anonymous").set({"n": 1})
    db.document("requests/from-worker").set({})
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    done = subprocess.run(
        [ONCEFIRE, "doc", "set", "notes/cli", '{"n": 1}', "--store", store_url],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    default_app.drain()
    default_app.drain()  # the worker's own write
    written = "google.cloud.firestore.document.v1.written.withAuthContext"
    assert sorted(seen) == [
        ("ada", "unknown", "uid-ada", written),
        ("ada-batch", "unknown", "uid-ada", written),
        ("anonymous", "unauthenticated", None, written),
        ("cli", "unauthenticated", None, written),
        ("from-worker", "system", None, written),
        ("plain", "unknown", None, written),
    ]


def test_every_kind_has_an_auth_context_trigger(default_app: App) -> None:
    kinds = ("created", "updated", "deleted")
    seen = {kind: audited(kind) for kind in kinds}
    ref = firestore.client().document("notes/n1")
    with auth_context.acting_as("uid-1"):
        ref.set({"v": 1})
        ref.update({"v": 2})
    with auth_context.acting_as("uid-2"):
        ref.delete()
    default_app.drain()
    assert [seen[kind][0][1:3] for kind in kinds] == [
        ("unknown", "uid-1"),
        ("unknown", "uid-1"),
        ("unknown", "uid-2"),
    ]
    assert [e[3].rsplit(".", 2)[-2] for kind in kinds for e in seen[kind]] == list(kinds)


def test_a_callable_in_a_running_function_overrides_the_system(default_app: App) -> None:
    seen = audited("created")

    @firestore_fn.on_document_created(document="jobs/{id}")
    def on_behalf(event: firestore_fn.Event[Any]) -> None:
        with auth_context.acting_as("uid-owner"):
            firestore.client().document("notes/owned").set({})
        firestore.client().document("notes/system").set({})

    firestore.client().document("jobs/j1").set({})
    default_app.drain()
    default_app.drain()
    assert sorted(s[:3] for s in seen) == [
        ("owned", "unknown", "uid-owner"),
        ("system", "system", None),
    ]
    assert auth_context.current() is None  # the block's setting ended with it
