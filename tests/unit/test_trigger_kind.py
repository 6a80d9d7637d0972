"""Every trigger kind is handled wherever kinds are dispatched.

Each table below holds one line per TriggerKind; a new kind fails these tests until each
place that dispatches on kinds says what the new kind does there.
"""

from __future__ import annotations

import pytest

from oncefire.events import EventType
from oncefire.model.outbox import subscribers
from oncefire.model.trigger_kind import TriggerKind
from oncefire.operations.unrouted import LABELS, trigger_source
from oncefire.stores.base import FunctionEntry
from oncefire.triggers import Options, Trigger, check_ordering

# Whether workers run the kind's deliveries.
RUN_BY_WORKERS = {
    TriggerKind.DOCUMENT: True,
    TriggerKind.ROW: True,
    TriggerKind.MESSAGE: True,
    TriggerKind.SCHEDULE: True,
    TriggerKind.HTTP: False,
    TriggerKind.DATABASE: True,
}

# (stored source, event type, event source that starts it, one that does not).
MATCHING = {
    TriggerKind.DOCUMENT: (
        "orders/{o}",
        EventType.DOCUMENT_CREATED,
        "orders/o1",
        "users/u1",
    ),
    TriggerKind.ROW: ("orders", EventType.ROW_INSERTED, "orders", "users"),
    TriggerKind.MESSAGE: ("payments", EventType.MESSAGE_PUBLISHED, "payments", "refunds"),
    TriggerKind.SCHEDULE: ("nightly", EventType.SCHEDULE_TICK, "nightly", "hourly"),
    TriggerKind.HTTP: ("/charge", EventType.HTTP_REQUEST, "/charge", "/refund"),
    TriggerKind.DATABASE: ("users/{u}/name", EventType.VALUE_CREATED, "users/u1/name", "users/u1"),
}

# The source unrouted events of the kind are kept under, for a stored source (None: none).
AWAITED_SOURCE = {
    TriggerKind.DOCUMENT: ("orders/{o}", "orders/{}"),
    TriggerKind.ROW: ("orders[status]", "orders"),
    TriggerKind.MESSAGE: ("payments", "payments"),
    TriggerKind.SCHEDULE: ("nightly", None),
    TriggerKind.HTTP: ("/charge", None),
    TriggerKind.DATABASE: ("users/{u}", None),
}

# Whether ordering="document" is refused for the kind (it has no document to order by).
REFUSES_DOCUMENT_ORDERING = {
    TriggerKind.DOCUMENT: False,
    TriggerKind.ROW: False,
    TriggerKind.MESSAGE: True,
    TriggerKind.SCHEDULE: True,
    TriggerKind.HTTP: False,
    TriggerKind.DATABASE: False,
}

TABLES = [RUN_BY_WORKERS, MATCHING, AWAITED_SOURCE, REFUSES_DOCUMENT_ORDERING]


@pytest.mark.parametrize("table", TABLES, ids=lambda t: str(len(t)))
def test_every_table_names_every_kind(table: dict[TriggerKind, object]) -> None:
    assert set(table) == set(TriggerKind)


@pytest.mark.parametrize("kind", list(TriggerKind))
def test_workers_run_every_kind_but_http(kind: TriggerKind) -> None:
    assert kind.is_run_by_workers is RUN_BY_WORKERS[kind]


@pytest.mark.parametrize("kind", list(TriggerKind))
def test_a_stored_function_takes_the_events_of_its_source(kind: TriggerKind) -> None:
    source, event_type, taken, other = MATCHING[kind]
    entry = FunctionEntry("f", str(kind), source, (str(event_type),), 0.0)
    assert subscribers([entry], event_type, taken) == ["f"]
    assert subscribers([entry], event_type, other) == []


@pytest.mark.parametrize("kind", list(TriggerKind))
def test_unrouted_events_are_awaited_by_kind(kind: TriggerKind) -> None:
    stored, awaited = AWAITED_SOURCE[kind]
    pair = trigger_source(str(kind), stored)
    assert pair == (None if awaited is None else (kind, awaited))
    assert (kind in LABELS) is (awaited is not None)


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="telepathy"):
        trigger_source("telepathy", "x")
    with pytest.raises(ValueError, match="telepathy"):
        Trigger("f", print, "telepathy", "x", (), Options())  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", list(TriggerKind))
def test_document_ordering_is_refused_where_there_is_no_document(kind: TriggerKind) -> None:
    options = Options(ordering="document")
    if REFUSES_DOCUMENT_ORDERING[kind]:
        with pytest.raises(Exception, match="no document"):
            check_ordering(kind, options)
    else:
        check_ordering(kind, options)


def test_a_trigger_holds_its_kind_as_the_enum() -> None:
    trigger = Trigger("f", print, "message", "payments", (), Options())  # type: ignore[arg-type]
    assert trigger.kind is TriggerKind.MESSAGE
