"""The runtime audit rules on history built on each store: a planted loop, a poison group,
orphan functions (unregistered, or registered with no worker serving them), a retry storm with
growing dead letters, and a healthy store."""

from __future__ import annotations

from collections.abc import Callable

from oncefire import App, RetryPolicy
from oncefire.audit import Thresholds
from oncefire.engine.worker import Worker
from oncefire.events import Event
from oncefire.testing import TestClock, deliver, make_event

EVERY_SECOND = RetryPolicy(max_attempts=12, first_delay=1, multiplier=1, max_delay=1)


def runtime(app: App, since: float = 3600) -> set[tuple[str, str]]:
    """(rule, function) of the runtime findings over the last `since` seconds."""
    return {(f.rule, f.function) for f in app.audit(since=since, is_static=False).findings}


def looper(event: Event) -> None:
    """Fails on every attempt, with the attempt in its error."""
    raise RuntimeError(f"still broken at attempt {event.attempt}")


def declined(event: Event) -> None:
    """Fails every event with one error."""
    raise ValueError("card declined")


def ok(event: Event) -> None:
    """Succeeds."""


def test_a_loop_a_poison_group_and_an_orphan_are_found(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    retired = make_app()
    retired.on_message("old-topic", name="retired")(ok)
    retired.store  # registers `retired` in the store  # noqa: B018
    app = make_app()
    app.on_document_created("loops/{id}", name="looper", retry_policy=EVERY_SECOND)(looper)
    app.on_document_created("cards/{id}", name="charge", retry=False)(declined)
    app.on_document_created("notes/{id}", name="healthy")(ok)
    app.db.document("loops/l1").set({"n": 1})
    for n in range(5):
        app.db.document(f"cards/c{n}").set({"n": n})
        app.db.document(f"notes/n{n}").set({"n": n})
    for _ in range(12):
        app.drain()
        clock.advance(1)
    assert app.store.delivery_states(app.dead_letters.list("looper")[0].event_id) == [
        ("looper", "dead", 12)
    ]
    assert runtime(app) == {
        ("looping-event", "looper"),
        ("poison-group", "charge"),
        ("orphan-function", "retired"),
    }
    findings = {f.rule: f for f in app.audit(since=3600, is_static=False).findings}
    assert "ran 12 times" in findings["looping-event"].message
    assert "5 events failed with 'ValueError: card declined'" in findings["poison-group"].message
    assert findings["looping-event"].file is not None  # points at the function's definition
    assert findings["looping-event"].line == looper.__code__.co_firstlineno
    assert findings["orphan-function"].file is None  # no code to point at
    clock.advance(7200)
    assert runtime(app) == {("orphan-function", "retired")}


def test_an_event_delivered_to_one_function_more_than_three_times_is_a_looping_event(
    make_app: Callable[..., App],
) -> None:
    app = make_app()
    app.on_message("payments", name="charge")(ok)
    event = make_event("message.published", "payments", {"n": 1})
    deliver(app, "charge", event, times=3)  # at the threshold: not yet a loop
    assert runtime(app) == set()
    deliver(app, "charge", event, times=1)  # a fourth delivery, each run once
    assert app.store.delivery_states(event.id) == [("charge", "succeeded", 1)] * 4
    [finding] = app.audit(since=3600, is_static=False).findings
    assert (finding.rule, finding.function) == ("looping-event", "charge")
    assert finding.message == f"event {event.id} ran 4 times over 4 deliveries"
    assert finding.line == ok.__code__.co_firstlineno
    four_allowed = Thresholds(looping_deliveries=4)
    assert app.audit(since=3600, is_static=False, thresholds=four_allowed).findings == ()


def test_an_event_a_person_replays_again_and_again_is_a_looping_event(
    make_app: Callable[..., App],
) -> None:
    app = make_app()
    app.on_message("payments", name="charge", retry=False)(declined)
    event_id = app.publish("payments", {"n": 1})
    app.drain()
    for replays in range(1, 4):  # each replay hands the dead letter over again, at attempt 1
        [letter] = app.dead_letters.list()
        app.dead_letters.replay(letter.id)
        app.drain()
        if replays < 3:
            assert runtime(app) == set()
    [finding] = app.audit(since=3600, is_static=False).findings
    assert (finding.rule, finding.function) == ("looping-event", "charge")
    assert finding.message == f"event {event_id} ran 4 times over 4 deliveries"


def test_a_healthy_store_has_no_runtime_finding(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    first = set[str]()

    def flaky_once(event: Event) -> None:
        if event.id not in first:
            first.add(event.id)
            raise TimeoutError("the gateway timed out")

    app.on_document_created("orders/{id}", name="charge")(ok)
    app.on_document_created("orders/{id}", name="flaky")(flaky_once)
    for n in range(30):  # an order a minute for half an hour; each first charge times out
        app.db.document(f"orders/o{n}").set({"n": n})
        app.drain()
        clock.advance(60)
    app.drain()
    stats = app.stats(3600)
    assert stats["flaky"].failed == 30 and stats["flaky"].succeeded == 30
    assert runtime(app) == set()


def test_a_registered_function_no_worker_serves_is_an_orphan(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    app.on_message("payments", name="charge")(ok)
    for n in range(3):
        app.publish("payments", {"n": n})
    assert runtime(app) == set()  # just written: a worker has not had the time yet
    clock.advance(301)
    [finding] = app.audit(since=3600, is_static=False).findings
    assert (finding.rule, finding.function) == ("orphan-function", "charge")
    assert finding.message == (
        "no worker has served it yet: its 3 pending deliveries wait, the oldest due for 301 s"
    )
    assert finding.line == ok.__code__.co_firstlineno  # it points at the function
    patient = Thresholds(unserved_after=600)
    assert app.audit(since=3600, is_static=False, thresholds=patient).findings == ()

    app.drain()  # a worker served it and drained it: healthy
    assert runtime(app) == set()
    app.publish("payments", {"n": 3})
    clock.advance(301)  # ... then it stopped: the new delivery waits
    [finding] = app.audit(since=3600, is_static=False).findings
    assert finding.message == (
        "no worker has served it for 301 s: its 1 pending deliveries wait, the oldest due for 301 s"
    )
    worker = Worker(app.runtime)
    try:
        worker.maintain(force=True)  # a worker that serves it is up (it says so): no orphan
    finally:
        worker.shutdown()
    assert runtime(app) == set()


def test_a_delivery_waiting_for_its_retry_is_no_orphan(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    hourly = RetryPolicy(first_delay=3600)
    app.on_message("payments", name="charge", retry_policy=hourly)(declined)
    app.publish("payments", {"n": 1})
    app.drain()  # the first attempt fails; the retry is due in an hour
    clock.advance(1800)  # no worker since, but nothing is due
    assert app.functions.get("charge").pending == 1
    assert ("orphan-function", "charge") not in runtime(app)
    clock.advance(1801)  # due for 1 s: not yet unserved
    assert ("orphan-function", "charge") not in runtime(app)
    clock.advance(300)
    assert ("orphan-function", "charge") in runtime(app)


def test_a_retry_storm_and_growing_dead_letters_are_found(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()
    failing = set[str]()

    def sometimes(event: Event) -> None:
        if event.params["id"] in failing:
            raise ValueError(f"order {event.params['id']} is malformed")

    app.on_document_created("orders/{id}", name="charge", retry=False)(sometimes)
    for n in range(10):  # a calm first half hour
        app.db.document(f"orders/calm{n}").set({"n": n})
    app.drain()
    clock.advance(2400)
    for n in range(25):  # then every order fails, each with its own error
        failing.add(f"storm{n}")
        app.db.document(f"orders/storm{n}").set({"n": n})
    app.drain()
    assert runtime(app) == {("retry-storm", "charge"), ("dead-letter-growth", "charge")}
    calmer = Thresholds(storm_attempts=30, dead_letter_growth=30)
    assert app.audit(since=3600, is_static=False, thresholds=calmer).findings == ()


def test_unrouted_events_are_found_with_their_collections_and_topics(
    make_app: Callable[..., App],
) -> None:
    retired = make_app()
    retired.on_document_created("orders/{id}", name="charge")(ok)
    assert retired.functions.get("charge")  # stored
    app = make_app()
    app.on_document_created("notes/{id}", name="healthy")(ok)
    app.functions.forget("charge")  # orders: a function used to take them
    app.keep_unrouted("nobody-listens")  # an operator expects a function for it
    app.db.document("notes/n1").set({"n": 1})
    app.db.document("orders/o1").set({"n": 1})
    app.db.document("orders/o2").set({"n": 2})
    app.publish("nobody-listens", {"n": 3})
    app.db.document("logs/l1").set({"n": 4})  # no function ever took logs: kept, no warning
    app.drain()
    assert app.unrouted_count() == 4
    [finding] = app.audit(since=3600, is_static=False).findings
    assert (finding.rule, finding.function, str(finding.severity)) == (
        "unrouted-events",
        "-",
        "warning",
    )
    assert finding.message == (
        "3 events matched no function, from collection orders (2), topic nobody-listens (1): "
        "a function used to take them, or keep_unrouted names them"
    )
    app.on_document_created("orders/{id}", name="late")(ok)  # takes the orders' events
    app.on_message("nobody-listens", name="listener")(ok)
    app.drain()
    assert app.unrouted_count() == 1  # logs/l1, kept for a function to come
    assert runtime(app) == set()


def test_a_chain_of_function_writes_near_the_loop_limit_is_a_looping_event(
    make_app: Callable[..., App], clock: TestClock
) -> None:
    app = make_app()

    @app.on_document_written("counters/{id}", name="bounce")
    def bounce(event: Event) -> None:  # writes what triggers it: stopped at depth 16
        n = event.data.after.to_dict()["n"]
        app.db.document(f"counters/{event.params['id']}").set({"n": n + 1})

    app.db.document("counters/c1").set({"n": 0})
    for _ in range(20):
        app.drain()
    findings = [f for f in app.audit(since=3600, is_static=False).findings]
    chains = [f for f in findings if f.rule == "looping-event" and "chain" in f.message]
    assert [f.function for f in chains] == ["bounce"]
    assert "reached depth 16" in chains[0].message, chains[0].message
    assert "stopped at 16" in chains[0].message


def test_a_short_chain_of_function_writes_is_no_finding(app: App) -> None:
    @app.on_document_created("a/{id}", name="once")
    def once(event: Event) -> None:
        app.db.document(f"b/{event.params['id']}").set({"n": 1})

    app.db.document("a/x").set({"n": 0})
    app.drain()
    assert not [f for f in app.audit(since=3600, is_static=False).findings if "chain" in f.message]
