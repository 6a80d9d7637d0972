"""The read model (`store.reads`, stores/reads/contract.py) on each store: every read answers
from a known history, and runs through the store's statements (the fault hooks see it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from oncefire import App, PermanentError
from oncefire.events import Event
from oncefire.model.buckets import hour_of
from oncefire.stores import faults, marks
from oncefire.stores.reads import Awaited, OutcomeSums, ReadModel
from oncefire.testing import TestClock

ERROR = "PermanentError: card declined"  # an error's first line


@pytest.fixture
def history(app: App, clock: TestClock) -> App:
    """Three orders charged (one fails for good), and a message no function takes."""

    @app.on_document_created("orders/{o}", name="charge")
    def charge(event: Event) -> None:
        clock.advance(1)
        if event.params["o"] == "bad":
            raise PermanentError("card declined")

    for order in ("o1", "o2", "bad"):
        app.db.document(f"orders/{order}").set({"amount": 5})
    app.drain()
    app.publish("nobody", {"n": 1})
    return app


@pytest.fixture
def reads(history: App) -> ReadModel:
    return history.store.reads


def test_the_store_gives_one_read_model(app: App) -> None:
    assert app.store.reads is app.store.reads
    methods = [name for name in vars(ReadModel) if not name.startswith("_")]
    assert len(methods) <= 20
    assert all(callable(getattr(app.store.reads, name)) for name in methods)


def test_attempts_and_their_outcomes_are_read(reads: ReadModel, clock: TestClock) -> None:
    outcomes = sorted(reads.outcomes_since(0.0))
    assert outcomes == [("charge", "permanent", 1), ("charge", "succeeded", 2)]
    assert reads.outcomes_since(clock.now() + 1) == []
    recent = reads.recent_attempts("charge", 10)
    assert [r["outcome"] for r in recent].count("succeeded") == 2
    assert {"delivery_id", "event_id", "number", "worker", "started_at", "error"} <= set(recent[0])
    failed = reads.recent_attempts("charge", 10, outcome="permanent")
    assert [(r["outcome"], r["error"].splitlines()[0]) for r in failed] == [("permanent", ERROR)]


def test_events_and_their_deliveries_are_read(history: App, reads: ReadModel) -> None:
    [event_id] = [r["event_id"] for r in reads.recent_attempts("charge", 10, "permanent")]
    event = reads.event(event_id)
    assert event is not None and event.source == "orders/bad"
    assert event.data["after"]["data"] == {"amount": 5}
    assert reads.event("no-such-event") is None
    [delivery] = reads.event_deliveries(event_id)
    assert (delivery["function"], delivery["state"], delivery["attempt"]) == ("charge", "dead", 1)


def test_dead_letters_are_grouped_and_listed_by_time(reads: ReadModel) -> None:
    [(error, count, last_at)] = reads.dead_groups("charge", 10)
    assert (error, count) == (ERROR, 1)
    assert [at for _, at in reads.dead_since(0.0, 10)] == [last_at]
    assert reads.dead_since(last_at + 1, 10) == []


def test_hour_buckets_give_cost_per_hour_and_totals(reads: ReadModel, clock: TestClock) -> None:
    since = hour_of(clock.now())
    assert reads.attempts_per_hour("charge", since) == [(0, 3, 1)]
    sums = {s.outcome: s for s in reads.cost_sums(0.0)}
    assert isinstance(sums["succeeded"], OutcomeSums)
    assert (sums["succeeded"].attempts, sums["permanent"].attempts) == (2, 1)
    assert sums["succeeded"].seconds == pytest.approx(2.0)
    totals = [row for row in reads.metric_totals() if row[0] == "charge"]
    assert sum(count for _, kind, _, count, _ in totals if kind == "succeeded") == 2


def test_deliveries_now_and_the_backlog(history: App, reads: ReadModel) -> None:
    assert ("charge", "dead", 1) in reads.states_by_function()
    assert reads.pending_backlog(history.clock.now()) == []
    history.db.document("orders/o4").set({"amount": 1})
    [(function, pending, oldest_due)] = reads.pending_backlog(history.clock.now())
    assert (function, pending) == ("charge", 1) and oldest_due is not None


def test_functions_and_the_audit_log(history: App, reads: ReadModel) -> None:
    [state] = reads.function_states()
    assert state["name"] == "charge" and state["paused_at"] is None
    assert reads.audit_log(10) == []
    letter = history.dead_letters.list("charge")[0]
    history.operators.dismiss(letter.id, actor="ops")
    [entry] = reads.audit_log(10)
    assert (entry["actor"], entry["action"], entry["function"]) == ("ops", "dismiss", "charge")
    assert reads.audit_log(10, before=entry["id"]) == []


def test_audit_reads_group_history(reads: ReadModel) -> None:
    assert reads.looping_events(0.0, most_attempts=0, most_deliveries=0)[0].function == "charge"
    assert reads.looping_events(0.0, most_attempts=5, most_deliveries=5) == []
    assert reads.deep_lineages(0.0, least_depth=1) == []
    [group] = reads.failure_groups(0.0, least_events=1)
    assert (group.function, group.error, group.events) == ("charge", ERROR, 1)
    [half] = reads.attempt_halves(0.0, 1e12)
    assert (half.function, half.early, half.late, half.early_failures) == ("charge", 3, 0, 1)
    [dead] = reads.dead_letter_halves(0.0, 1e12)
    assert (dead.function, dead.early, dead.late) == ("charge", 1, 0)


def test_unrouted_events_and_awaited_sources(history: App, reads: ReadModel) -> None:
    assert ("message", "nobody", 1) in reads.unrouted_origins()
    history.keep_unrouted("nobody")
    assert Awaited("message", "nobody", "kept") in reads.awaited_sources()


def test_alert_marks_are_written_once(history: App) -> None:
    store = history.store
    assert marks.mark_at(store, "k") is None
    assert marks.mark(store, "k", 5.0) and not marks.mark(store, "k", 6.0)
    assert marks.mark_at(store, "k") == 5.0
    assert marks.unmark(store, "k") and not marks.unmark(store, "k")


@pytest.fixture
def fail_first_statement() -> Iterator[faults.FaultPlan]:
    plan = faults.FaultPlan(at=1)
    faults.FAULTS = plan
    try:
        yield plan
    finally:
        faults.FAULTS = None


def test_a_read_runs_through_the_fault_hooks(
    reads: ReadModel, fail_first_statement: faults.FaultPlan
) -> None:
    with pytest.raises(faults.InjectedFault):
        reads.function_states()
    assert fail_first_statement.fired is not None
