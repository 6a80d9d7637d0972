"""A function renamed in code (issue 44, point 6): `app.functions.rename(old, new)` moves its
pending deliveries, dead letters, history and @idempotent records to the new name, in one
transaction; a drain warns once of functions the app does not define whose deliveries wait;
a dead letter of a function the store does not know is not replayed unless asked anyway."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from oncefire import App, idempotent
from oncefire.errors import ConfigError, FunctionNotFoundError, InvalidPathError, ReplayError
from oncefire.events import Event
from oncefire.testing import deliver, make_event


def shop(app: App, name: str, runs: list[str], ids: dict[str, str] | None = None) -> None:
    """One function on orders/{o} under this name: it charges once per event (@idempotent),
    and raises for orders whose `bad` field is set (retry=False: a dead letter at once)."""

    @app.on_document_created("orders/{o}", name=name, retry=False, ordering="document")
    @idempotent()
    def charge(event: Event) -> str:
        if (event.data.to_dict() or {}).get("bad"):
            raise ValueError("card declined")
        runs.append(f"{name}:{event.params['o']}")
        if ids is not None:
            ids[event.params["o"]] = event.id
        return "charged"


def test_rename_moves_pending_deliveries_dead_letters_history_and_records(
    make_app: Callable[..., App],
) -> None:
    runs: list[str] = []
    ids: dict[str, str] = {}
    old = make_app()
    shop(old, "charge", runs, ids)
    old.db.document("orders/o1").set({"n": 1})
    old.db.document("orders/o2").set({"bad": True})
    old.drain()  # o1 charged, o2 a dead letter
    old.functions.pause("charge")
    old.db.document("orders/o3").set({"n": 3})  # pending under charge
    old.db.document("orders/o4").set({"n": 4})
    assert runs == ["charge:o1"]
    cli = make_app()  # what `oncefire functions rename` opens: no function of its own
    moved = cli.functions.rename("charge", "charge_v2")
    assert (moved.pending, moved.dead) == (2, 1)
    rows = {r.name: r for r in cli.functions.list()}
    assert set(rows) == {"charge_v2"}
    assert rows["charge_v2"].paused_at is not None  # the catalogue row moved, pause and all
    assert rows["charge_v2"].pending == 2
    [letter] = cli.dead_letters.list()
    assert letter.function == "charge_v2" and letter.source == "orders/o2"
    # The counters of /metrics go on under the new name, counted once.
    totals = cli.history.totals()
    assert "charge" not in totals
    assert totals["charge_v2"].attempts == {"succeeded": 1, "failed": 1}
    assert totals["charge_v2"].dead_letters == 1
    figures = cli.stats()
    assert "charge" not in figures
    assert (figures["charge_v2"].succeeded, figures["charge_v2"].dead_letters) == (1, 1)
    new = make_app()  # the renamed code
    shop(new, "charge_v2", runs, ids)
    new.functions.resume("charge_v2")
    new.drain()
    assert runs == ["charge:o1", "charge_v2:o3", "charge_v2:o4"]
    # o1's @idempotent record moved with it: a redelivery of o1's event under the new name
    # returns the stored result and charges nothing again.
    o1 = make_event("document.created", "orders/o1", {"n": 1}, id=ids["o1"])
    assert deliver(new, "charge_v2", o1, times=1)["succeeded"] == 1
    assert runs == ["charge:o1", "charge_v2:o3", "charge_v2:o4"]


def test_rename_refuses_an_unknown_old_name_and_a_new_name_with_deliveries(
    make_app: Callable[..., App],
) -> None:
    runs: list[str] = []
    app = make_app()
    shop(app, "charge", runs)
    shop(app, "refund", runs)
    app.db.document("orders/o1").set({"n": 1})  # a delivery for each
    with pytest.raises(FunctionNotFoundError, match="No stored function named 'nobody'"):
        app.functions.rename("nobody", "charge_v2")
    with pytest.raises(ConfigError, match="'refund' has deliveries of its own") as mixed:
        app.functions.rename("charge", "refund")
    assert len(str(mixed.value).splitlines()) == 1
    with pytest.raises(ConfigError, match="already the function's name"):
        app.functions.rename("charge", "charge")
    with pytest.raises(InvalidPathError):
        app.functions.rename("charge", "a/b")
    assert {r.name: r.pending for r in app.functions.list()} == {"charge": 1, "refund": 1}


def test_a_forgotten_functions_dead_letters_can_be_renamed_then_replayed(
    make_app: Callable[..., App],
) -> None:
    runs: list[str] = []
    old = make_app()
    shop(old, "charge", runs)
    old.db.document("orders/o1").set({"n": 1})
    assert old.functions.forget("charge") == 1
    [letter] = old.dead_letters.list()
    with pytest.raises(ReplayError, match="No function 'charge' is stored") as refused:
        old.dead_letters.replay(letter.id)
    assert "oncefire functions rename" in str(refused.value)
    with pytest.raises(ReplayError):
        old.operators.replay(letter.id)
    with pytest.raises(ReplayError):
        old.dead_letters.replay_all()
    with pytest.raises(ReplayError):
        old.operators.replay_edited(letter.id, {"n": 2})
    assert old.dead_letters.count() == 1  # nothing replayed
    new = make_app()
    shop(new, "charge_v2", runs)
    assert new.functions.rename("charge", "charge_v2").dead == 1
    new.dead_letters.replay(letter.id)
    new.drain()
    assert runs == ["charge_v2:o1"]


def test_replay_anyway_keeps_the_delivery_for_when_the_name_returns(
    make_app: Callable[..., App],
) -> None:
    runs: list[str] = []
    old = make_app()
    shop(old, "charge", runs)
    old.db.document("orders/o1").set({"n": 1})
    old.functions.forget("charge")
    [letter] = old.dead_letters.list()
    old.dead_letters.replay(letter.id, anyway=True)
    assert old.dead_letters.count() == 0
    back = make_app()
    shop(back, "charge", runs)  # the name returns
    back.drain()
    assert runs == ["charge:o1"]


def test_a_drain_warns_once_of_functions_it_does_not_define_whose_deliveries_wait(
    make_app: Callable[..., App], caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[str] = []
    old = make_app()
    shop(old, "charge", runs)
    old.db.document("orders/o1").set({"n": 1})
    old.db.document("orders/o2").set({"n": 2})
    new = make_app()
    shop(new, "charge_v2", runs)
    with caplog.at_level(logging.WARNING, logger="oncefire.engine.routing"):
        new.drain()
        new.drain()
    warnings = [r.getMessage() for r in caplog.records if r.name == "oncefire.engine.routing"]
    assert len(warnings) == 1, warnings
    assert "does not serve, with pending deliveries: charge (2);" in warnings[0]
    assert "oncefire functions rename OLD NEW" in warnings[0]
    assert "charge_v2" not in warnings[0]
    assert new.functions.stranded() == {"charge": 2}
    assert old.functions.stranded() == {}
