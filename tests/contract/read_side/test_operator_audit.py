"""Every operator action that changes deliveries is in the audit log (issue 44, point 12):
replay, dismiss, edit, their bulk forms, pause, resume, forget, rename, and a purge by hand;
each with who, what and how many."""

from __future__ import annotations

from collections.abc import Callable

from oncefire import App
from oncefire.events import Event
from oncefire.testing import TestClock


def failing(app: App, name: str) -> None:
    @app.on_document_created(f"{name}/{{o}}", name=name, retry=False)
    def fail(event: Event) -> None:
        raise ValueError("card declined")


def test_each_action_on_deliveries_leaves_one_audit_entry(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app(succeeded_retention=3600.0)
    failing(app, "charge")
    failing(app, "refund")
    app.on_document_created("notes/{n}", name="note")(lambda event: None)
    app.db.document("notes/n1").set({"n": 1})  # succeeds: history a purge takes
    ops = app.operators
    for n in range(6):
        app.db.document(f"charge/c{n}").set({"n": n})
    app.db.document("refund/r1").set({"n": 1})
    app.drain()
    ids = [d.id for d in app.dead_letters.list(function="charge")]
    ops.pause("refund", actor="ada")
    ops.resume("refund", actor="ada")
    ops.replay(ids[0], actor="ada")
    ops.dismiss(ids[1], actor="ada")
    ops.replay_edited(ids[2], {"n": 99}, actor="ada")
    app.drain()  # the replays fail again: dead letters once more
    ops.replay_all("charge", error_contains="declined", actor="ada")
    app.drain()
    ops.dismiss_all("charge", actor="ada")
    app.db.document("refund/r2").set({"n": 2})  # pending
    assert ops.forget("refund", actor="ada") == 1
    failing(app, "charge_v2")
    app.db.document("charge/c9").set({"n": 9})  # pending for charge (and charge_v2's own)
    renamed = make_app()  # a bare app, as the CLI opens: charge_v2 is not stored there
    app.functions.forget("charge_v2")
    assert renamed.operators.rename("charge", "charge_v3", actor="bob").pending == 1
    clock.advance(7200)
    purged = ops.purge(actor="ada")
    entries = ops.audit_log()
    assert [(e.action, e.actor) for e in entries] == [
        ("purge", "ada"),
        ("rename", "bob"),
        ("forget", "ada"),
        ("dismiss_all", "ada"),
        ("replay_all", "ada"),
        ("replay_edited", "ada"),
        ("dismiss", "ada"),
        ("replay", "ada"),
        ("resume", "ada"),
        ("pause", "ada"),
    ]
    purge, rename, forget = entries[0], entries[1], entries[2]
    assert purge.count == purged.total() > 0
    assert purge.detail == purged.to_dict()
    assert (rename.function, rename.target, rename.count) == ("charge_v3", "charge", 1)
    assert rename.detail == {"from": "charge", "to": "charge_v3", "pending": 1, "dead_letters": 0}
    assert (forget.function, forget.count, forget.detail) == ("refund", 1, {"dead_letters": 1})


def test_a_dry_run_purge_changes_nothing_and_is_not_recorded(app: App, clock: TestClock) -> None:
    failing(app, "charge")
    app.db.document("charge/c1").set({"n": 1})
    app.drain()
    assert app.purge(dry_run=True).total() == 0
    assert app.operators.audit_log() == []
