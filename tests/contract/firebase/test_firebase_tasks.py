"""Firebase task queues on oncefire's deliveries: tasks_fn.on_task_dispatched and
functions.task_queue(name).enqueue, on both stores, with the app's TestClock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import flask
import pytest

from oncefire import App, ConfigError
from oncefire.firebase import exceptions, functions, options, tasks_fn
from oncefire.firebase.functions import TaskOptions
from oncefire.firebase.registration import queue_options
from oncefire.firebase.registration.apps import set_default_app
from oncefire.testing import TestClock


@pytest.fixture
def default_app(store_url: str, clock: TestClock) -> Iterator[App]:
    """The default App a Firebase module registers on, on the test's store and clock."""
    app = App(store_url, clock=clock)
    previous = set_default_app(app)
    yield app
    set_default_app(previous)
    app.close()


def test_a_delayed_task_runs_at_its_time_and_not_before(default_app: App, clock: TestClock) -> None:
    seen: list[Any] = []

    @tasks_fn.on_task_dispatched()
    def later(req: tasks_fn.CallableRequest[Any]) -> None:
        seen.append((req.data, clock.now()))

    start = clock.now()
    functions.task_queue("later").enqueue(
        {"data": {"n": 1}}, TaskOptions(schedule_delay_seconds=30)
    )
    at = datetime.fromtimestamp(start + 90, UTC)
    functions.task_queue("later").enqueue({"data": {"n": 2}}, TaskOptions(schedule_time=at))
    default_app.drain()
    clock.advance(29.9)
    default_app.drain()
    assert seen == []
    clock.advance(0.1)
    default_app.drain()
    assert seen == [({"n": 1}, start + 30)]
    clock.advance(59.9)
    default_app.drain()
    assert len(seen) == 1
    clock.advance(0.1)
    default_app.drain()
    assert seen[1] == ({"n": 2}, start + 90)


def test_a_failing_task_is_retried_on_cloud_tasks_waits_then_dead_lettered(
    default_app: App, clock: TestClock
) -> None:
    attempts: list[float] = []
    config = options.RetryConfig(
        max_attempts=6, min_backoff_seconds=10, max_backoff_seconds=70, max_doublings=1
    )

    @tasks_fn.on_task_dispatched(retry_config=config)
    def flaky(req: tasks_fn.CallableRequest[Any]) -> None:
        attempts.append(clock.now())
        raise RuntimeError("down")

    start = clock.now()
    functions.task_queue("flaky").enqueue({"data": {"n": 1}})
    # Cloud Tasks: 10, 20 (one doubling), then by 20 s steps: 40, 60, 80 -> capped at 70
    # (doubling all along would wait 80 -> 70 after the fourth attempt, not 60).
    waits = [10, 20, 40, 60, 70]
    default_app.drain()
    for wait in waits:
        clock.advance(wait - 0.5)
        default_app.drain()
        clock.advance(0.5)
        default_app.drain()
    expected = [start]
    for wait in waits:
        expected.append(expected[-1] + wait)
    assert attempts == expected
    [letter] = default_app.dead_letters.list(function="flaky")
    assert letter.attempts == 6 and "down" in (letter.error or "")


def test_max_retry_seconds_keeps_retrying_until_both_limits_are_passed() -> None:
    config = options.RetryConfig(
        max_attempts=2, max_retry_seconds=100, min_backoff_seconds=10, max_backoff_seconds=30
    )
    policy = queue_options.retry_policy(config)
    # Attempts at 0, 10, 30, 60, 90, 120: the first past 100 s after the first is the last.
    assert policy.max_attempts == 6
    assert queue_options.retry_policy(options.RetryConfig()) == queue_options.retry_policy(None)
    assert queue_options.retry_policy(None).max_attempts == 3
    unset = options.RetryConfig(max_attempts=0)  # as Cloud Tasks reads 0
    assert queue_options.retry_policy(unset).max_attempts == 3


def test_a_task_id_is_used_once_until_an_hour_after_its_task_ended(
    default_app: App, clock: TestClock
) -> None:
    seen: list[Any] = []

    @tasks_fn.on_task_dispatched()
    def once(req: tasks_fn.CallableRequest[Any]) -> None:
        seen.append(req.data)

    queue = functions.task_queue("once")
    assert queue.enqueue({"data": 1}, TaskOptions(task_id="job-1")) == "job-1"
    with pytest.raises(exceptions.AlreadyExistsError) as refused:
        queue.enqueue({"data": 2}, TaskOptions(task_id="job-1"))
    assert refused.value.code == "ALREADY_EXISTS"
    default_app.drain()
    assert seen == [1]
    clock.advance(1800)
    with pytest.raises(exceptions.AlreadyExistsError):
        queue.enqueue({"data": 3}, TaskOptions(task_id="job-1"))  # ran within the hour
    queue.enqueue({"data": 4}, TaskOptions(task_id="job-2"))  # another id is another task
    clock.advance(1801)
    assert queue.enqueue({"data": 5}, TaskOptions(task_id="job-1")) == "job-1"
    default_app.drain()
    assert seen == [1, 4, 5]


def test_a_task_whose_body_is_not_the_callable_protocols_is_a_dead_letter_at_once(
    default_app: App,
) -> None:
    runs: list[Any] = []

    @tasks_fn.on_task_dispatched(retry_config=options.RetryConfig(max_attempts=5))
    def strict(req: tasks_fn.CallableRequest[Any]) -> None:
        runs.append(req.data)

    functions.task_queue("strict").enqueue({"n": 1})  # firebase_admin sends this as the body
    functions.task_queue("strict").enqueue({"data": 1, "extra": 2})
    default_app.drain()
    assert runs == []
    letters = default_app.dead_letters.list(function="strict")
    assert [(d.attempts, "Bad Request" in (d.error or "")) for d in letters] == [(1, True)] * 2


def test_a_task_enqueued_in_a_rolled_back_transaction_does_not_exist(
    default_app: App,
) -> None:
    seen: list[Any] = []

    @tasks_fn.on_task_dispatched()
    def job(req: tasks_fn.CallableRequest[Any]) -> None:
        seen.append(req.data)

    with pytest.raises(RuntimeError), default_app.db.transaction():
        functions.task_queue("job").enqueue({"data": 1}, TaskOptions(task_id="t1"))
        raise RuntimeError("roll back")
    functions.task_queue("job").enqueue(
        {"data": 2}, TaskOptions(task_id="t1")
    )  # the id was not used
    default_app.drain()
    assert seen == [2]


def test_the_function_gets_cloud_tasks_headers_and_the_retry_count(
    default_app: App, clock: TestClock
) -> None:
    seen: list[dict[str, str]] = []

    @tasks_fn.on_task_dispatched(retry_config=options.RetryConfig(min_backoff_seconds=5))
    def headers(req: tasks_fn.CallableRequest[Any]) -> None:
        raw = req.raw_request
        seen.append({k: v for k, v in raw.headers.items() if k.lower().startswith("x-")})
        assert raw.get_json() == {"data": [1]} and req.data == [1]
        assert flask.request.headers["X-CloudTasks-TaskName"] == "h1"  # in a request context
        if len(seen) == 1:
            raise RuntimeError("again")

    opts = TaskOptions(task_id="h1", headers={"X-Trace": "abc"}, schedule_delay_seconds=2)
    functions.task_queue("locations/us-central1/functions/headers").enqueue({"data": [1]}, opts)
    clock.advance(2)
    default_app.drain()
    clock.advance(5)
    default_app.drain()
    eta = f"{clock.now() - 5:.6f}"
    first = {
        "X-Trace": "abc",
        "X-Cloudtasks-Queuename": "headers",
        "X-Cloudtasks-Taskname": "h1",
        "X-Cloudtasks-Taskretrycount": "0",
        "X-Cloudtasks-Taskexecutioncount": "0",
        "X-Cloudtasks-Tasketa": eta,
    }
    assert seen == [
        first,
        {**first, "X-Cloudtasks-Taskretrycount": "1", "X-Cloudtasks-Taskexecutioncount": "1"},
    ]


def test_an_attempt_past_its_dispatch_deadline_counts_as_failed(
    default_app: App, clock: TestClock
) -> None:
    runs: list[int] = []

    @tasks_fn.on_task_dispatched(
        retry_config=options.RetryConfig(max_attempts=2, min_backoff_seconds=1)
    )
    def slow(req: tasks_fn.CallableRequest[Any]) -> None:
        runs.append(1)
        clock.advance(16 if len(runs) == 1 else 14)

    functions.task_queue("slow").enqueue({"data": 1}, TaskOptions(dispatch_deadline_seconds=15))
    default_app.drain()
    clock.advance(1)
    default_app.drain()
    assert len(runs) == 2
    assert default_app.dead_letters.count("slow") == 0
    [failed] = default_app.history.executions("slow", outcome="failed")
    assert "past its dispatch deadline of 15 s" in (failed.error or "")


def test_rate_limits_become_max_instances_and_a_rate_limit(default_app: App) -> None:
    limits = options.RateLimits(max_concurrent_dispatches=3, max_dispatches_per_second=2.5)

    @tasks_fn.on_task_dispatched(rate_limits=limits, timeout_sec=30)
    def limited(req: tasks_fn.CallableRequest[Any]) -> None: ...

    opts = default_app.triggers["limited"].options
    assert (opts.max_instances, opts.rate_limit, opts.timeout, opts.retry) == (3, "2.5/s", 30, True)

    @tasks_fn.on_task_dispatched(rate_limits=limits, max_instances=2)
    def tighter(req: tasks_fn.CallableRequest[Any]) -> None: ...

    assert default_app.triggers["tighter"].options.max_instances == 2


def test_an_unknown_queue_is_not_found_and_nothing_is_enqueued(default_app: App) -> None:
    with pytest.raises(exceptions.NotFoundError, match="'nosuch'"):
        functions.task_queue("nosuch").enqueue({"data": 1})
    assert default_app.unrouted_count() == 0


@pytest.mark.parametrize(
    "opts",
    [
        TaskOptions(schedule_delay_seconds=-1),
        TaskOptions(schedule_delay_seconds=1.5),  # type: ignore[arg-type]
        TaskOptions(schedule_delay_seconds=1, schedule_time=datetime.now(UTC)),
        TaskOptions(schedule_time="tomorrow"),  # type: ignore[arg-type]
        TaskOptions(dispatch_deadline_seconds=14),
        TaskOptions(dispatch_deadline_seconds=1801),
        TaskOptions(task_id="a/b"),
        TaskOptions(task_id="x" * 501),
        TaskOptions(headers={"X-A": 1}),  # type: ignore[dict-item]
    ],
)
def test_bad_task_options_are_refused_as_firebase_admin_does(
    default_app: App, opts: TaskOptions
) -> None:
    @tasks_fn.on_task_dispatched()
    def job(req: tasks_fn.CallableRequest[Any]) -> None: ...

    with pytest.raises(ValueError, match=r"\.$"):
        functions.task_queue("job").enqueue({"data": 1}, opts)
    assert default_app.drain().attempts == 0


@pytest.mark.parametrize(
    "config",
    [
        options.RetryConfig(max_attempts=-1),
        options.RetryConfig(min_backoff_seconds=10, max_backoff_seconds=5),
        options.RetryConfig(max_doublings=-1),
        options.RetryConfig(max_retry_seconds=10**9, max_backoff_seconds=1),
    ],
)
def test_bad_retry_configs_are_refused_at_registration(config: options.RetryConfig) -> None:
    with pytest.raises(ConfigError, match=r"\.$"):
        queue_options.retry_policy(config)
