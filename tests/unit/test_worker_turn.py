"""turn.plan decides what a worker's turn does; TurnState keeps the queue, its marks and the
attempts not confirmed yet."""

from __future__ import annotations

from typing import Any

import pytest

from oncefire.engine import turn
from oncefire.engine.attempts import RunningAttempt
from oncefire.engine.turn import Marks, TurnState, marks_for
from oncefire.events import StoredEvent
from oncefire.model.trigger_kind import TriggerKind
from oncefire.stores.base import Lease, Leased
from oncefire.triggers import Options, Trigger


def leased(delivery_id: int, *, is_solo: bool = False) -> Leased:
    event = StoredEvent(f"e{delivery_id}", "message.published", "t", 0.0, {}, 2)
    return Leased(Lease(delivery_id, "token"), "f", 1, 0.0, event, is_solo=is_solo)


def queued(*ids: int, marked: dict[int, bool] | None = None) -> TurnState:
    state = TurnState()
    state.queue.extend(leased(i) for i in ids)
    state.marks.update(marked or {})
    return state


def decide(state: TurnState, **given: Any) -> turn.Plan:
    args: dict[str, Any] = {
        "free": 4,
        "running": 0,
        "concurrency": 4,
        "waiting": 0,
        "may_lease": True,
        "ended": 0,
        "ended_for": 0.0,
        "batch_size": 512,
    }
    args.update(given)
    return turn.plan(state=state, **args)


def test_an_idle_worker_with_free_slots_leases_and_nothing_else() -> None:
    plan = decide(TurnState())
    assert (plan.is_leasing, plan.is_marking, plan.is_writing) == (True, False, False)
    assert plan and plan.free == 4


@pytest.mark.parametrize(
    ("state", "given"),
    [
        (queued(1, marked={1: False}), {}),  # something is queued
        (TurnState(is_solo_held=True), {}),  # a solo delivery runs alone
        (TurnState(), {"may_lease": False}),  # stopping, or an attempt is stuck
        (TurnState(), {"free": 0, "running": 4}),  # no slot free, nothing moved
    ],
)
def test_no_lease(state: TurnState, given: dict[str, Any]) -> None:
    assert not decide(state, **given).is_leasing


def test_with_no_slot_free_a_lease_waits_for_attempts_to_move_and_room_to_wait() -> None:
    moved = TurnState(has_moved=True)
    assert decide(moved, free=0, running=4, waiting=8).is_leasing
    assert not decide(moved, free=0, running=12, waiting=8).is_leasing


def test_marking_when_a_delivery_the_free_slots_take_is_not_marked() -> None:
    assert decide(queued(1, 2, marked={1: False}), free=2).is_marking
    assert not decide(queued(1, 2, marked={1: False}), free=1).is_marking
    assert not decide(queued(1, 2), free=0, running=4).is_marking


@pytest.mark.parametrize(
    ("state", "given", "is_writing"),
    [
        (queued(1, marked={1: False}), {"ended": 1}, False),  # waits for company
        (queued(1, marked={1: False}), {"ended": 1, "ended_for": turn.WRITE_WITHIN}, True),
        (queued(1, marked={1: False}), {"ended": 512}, True),  # a full batch
        (queued(1), {"ended": 1}, True),  # the turn commits to mark anyway
        (TurnState(), {"ended": 1}, True),  # the turn commits to lease anyway
        (TurnState(), {"ended": 0}, False),  # nothing ended
    ],
)
def test_writing(state: TurnState, given: dict[str, Any], is_writing: bool) -> None:
    assert decide(state, **given).is_writing is is_writing


def test_a_busy_worker_with_nothing_to_do_has_an_empty_plan() -> None:
    assert not decide(queued(1, marked={1: False}), free=0, running=4)


def test_marks_for_a_head_that_starts_alone_is_started_the_rest_ahead() -> None:
    queue = [leased(1), leased(2), leased(3)]
    marks = marks_for(queue, free=1, ahead=2, marked=set())
    assert marks == Marks([queue[0]], [queue[1], queue[2]])
    assert marks.ids() == {1, 2, 3}


def test_marks_for_many_starting_at_once_marks_all_ahead_once() -> None:
    queue = [leased(1), leased(2), leased(3)]
    marks = marks_for(queue, free=2, ahead=1, marked={2})
    assert marks == Marks([], [queue[0], queue[2]])


def test_a_lease_marks_its_head_started_when_it_starts_alone() -> None:
    state = TurnState()
    state.add([leased(1, is_solo=True), leased(2)], ahead={2})
    assert state.marks == {1: False, 2: True} and state.is_solo_held


def test_a_turn_marks_what_it_marked_again_as_it_now_is() -> None:
    state = queued(1, 2, marked={1: True})
    state.record_marks({1, 2}, ahead={2})
    assert state.marks == {1: False, 2: True}


def test_dropped_and_released_deliveries_leave_their_marks() -> None:
    state = queued(1, 2, 3, marked={1: False, 2: True, 3: True})
    state.drop({2})
    assert [c.lease.delivery_id for c in state.queue] == [1, 3]
    assert state.marks == {1: False, 3: True}
    assert [c.lease.delivery_id for c in state.take_all()] == [1, 3]
    assert not state.queue and not state.marks


def attempt_of(item: Leased) -> RunningAttempt:
    trigger = Trigger("f", print, TriggerKind.MESSAGE, "t", (), Options())
    return RunningAttempt(item, trigger, deadline=0.0, started=0.0)


def test_after_a_commit_unconfirmed_keeps_only_what_still_runs_unconfirmed() -> None:
    state = TurnState()
    confirmed, ended, running = (attempt_of(leased(i)) for i in (1, 2, 3))
    state.unconfirmed = [confirmed, ended, running]
    state.settle_unconfirmed([confirmed], [confirmed, running])
    assert state.unconfirmed == [running]
