"""The @idempotent record's state machine, as a model-based test (SQLite)."""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from oncefire import App, Increment, PayloadMismatchError, RecordHeldError
from oncefire.clock import to_datetime
from oncefire.events import Event
from oncefire.idempotency import (
    TAKE_OVER_AFTER,
    IdempotencySpec,
    _acquire,
    _finish,
    _Hold,
    _release,
)
from oncefire.testing import TestClock
from tests.contract.records.idempotency_support import record_of

pytestmark = pytest.mark.slow  # a stateful search over many steps

# -- the state machine, as a model-based test (SQLite) ----------------------------------

KEYS = ("k1", "k2")  # few keys, so deliveries meet often
MODEL_LEASE, MODEL_TTL = 10.0, 100_000.0


class Crash(Exception):
    """The process died inside a transaction."""


@dataclass(frozen=True)
class InProgress:
    holder: int
    token: str
    variant: int
    lease_until: float


@dataclass(frozen=True)
class Done:
    variant: int
    token: str
    result: str


@dataclass(frozen=True)
class Holder:
    key: str
    claim: _Hold


class IdempotencyMachine(RuleBasedStateMachine):
    """Claims, completions, failures, crashes, lease expiry and duplicates in any order.

    The model predicts what each claim must return; the store's records must match it, and
    no key may have two side effects. A side effect is made by `complete`, by the holder
    that owns the key. A holder that lost its key (taken over after its lease ran out) can
    only write late (`late_write`): the runtime's lease >= timeout rule means its run is
    over, and its late completion or release must change nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.clock = TestClock()
        self.app = App(f"sqlite:///{self.directory.name}/machine.db", clock=self.clock)
        self.spec = IdempotencySpec(MODEL_LEASE, MODEL_TTL, lambda e: e.id, "charge", "charge")
        self.records: dict[str, InProgress | Done] = {}
        self.holders: dict[int, Holder] = {}
        self.effects = Counter[str]()  # completions the store accepted, by key
        self.completed_tokens: set[str] = set()
        self.touched: set[str] = set()
        self.committed: set[str] = set()
        self.next_holder = 0

    def event(self, key: str, variant: int) -> Event:
        return Event(
            id=key,
            type="message.published",
            source="payments",
            time=to_datetime(self.clock.now()),
            data=None,
            params={},
            attempt=1,
            size=0,
            function="charge",
            raw={"data": {"amount": 500 + variant}, "attributes": {}},
        )

    def expected(self, key: str, variant: int) -> str:
        record = self.records.get(key)
        if record is None:
            return "claimed"
        if record.variant != variant:
            return "mismatch"
        if isinstance(record, Done):
            return "done"
        if record.lease_until + TAKE_OVER_AFTER > self.clock.now():
            return "held"  # its holder may still be completing it
        return "claimed"  # taken over

    def count_effect(self, key: str) -> None:
        """Count a side effect when the store accepted a completion that it did not hold
        before: the system under test, not the model, says whether the run took effect."""
        stored = record_of(self.app, key)
        token = None if stored is None or stored.status != "completed" else stored.token
        if token is not None and token not in self.completed_tokens:
            self.completed_tokens.add(token)
            self.effects[key] += 1

    def owns(self, holder: int) -> bool:
        record = self.records.get(self.holders[holder].key)
        return isinstance(record, InProgress) and record.holder == holder

    @rule(key=st.sampled_from(KEYS))
    def deliver(self, key: str) -> None:
        """A delivery of the key's event reaches its claim (a duplicate, or a first)."""
        self.claim(key, 0)

    @rule(key=st.sampled_from(KEYS))
    def deliver_another_payload(self, key: str) -> None:
        """Another event that uses the same key reaches its claim."""
        self.claim(key, 1)

    def claim(self, key: str, variant: int) -> None:
        self.touched.add(key)
        want = self.expected(key, variant)
        try:
            claim = _acquire(self.app.runtime, self.spec, self.event(key, variant))
        except RecordHeldError:
            got = "held"
        except PayloadMismatchError:
            got = "mismatch"
        else:
            got = "done" if claim.is_done else "claimed"
        assert got == want
        if got == "done":
            record = self.records[key]
            assert isinstance(record, Done) and claim.result == record.result
        elif got == "claimed":
            holder, self.next_holder = self.next_holder, self.next_holder + 1
            self.holders[holder] = Holder(key, claim)
            self.records[key] = InProgress(
                holder, claim.token, variant, self.clock.now() + MODEL_LEASE
            )

    @precondition(lambda self: any(self.owns(h) for h in self.holders))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        """The owner makes its side effect and records its result."""
        holder = data.draw(st.sampled_from(sorted(h for h in self.holders if self.owns(h))))
        owner = self.holders.pop(holder)
        result = f"r{holder}"
        _finish(self.app.runtime, self.spec, owner.claim, result)
        self.count_effect(owner.key)
        record = self.records[owner.key]
        self.records[owner.key] = Done(record.variant, owner.claim.token, result)

    @precondition(lambda self: any(self.owns(h) for h in self.holders))
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        """The owner's run raised: its claim is released."""
        holder = data.draw(st.sampled_from(sorted(h for h in self.holders if self.owns(h))))
        owner = self.holders.pop(holder)
        _release(self.app.runtime, owner.claim)
        del self.records[owner.key]

    @precondition(lambda self: self.holders)
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """A holder's process dies: nothing is written, its lease runs out in time."""
        del self.holders[data.draw(st.sampled_from(sorted(self.holders)))]

    @precondition(lambda self: any(not self.owns(h) for h in self.holders))
    @rule(data=st.data(), is_completion=st.booleans())
    def late_write(self, data: st.DataObject, is_completion: bool) -> None:
        """A holder that lost its key writes late: nothing changes."""
        holder = data.draw(st.sampled_from(sorted(h for h in self.holders if not self.owns(h))))
        stale = self.holders.pop(holder)
        before = record_of(self.app, stale.key)
        if is_completion:
            _finish(self.app.runtime, self.spec, stale.claim, "stale")
            self.count_effect(stale.key)
        else:
            _release(self.app.runtime, stale.claim)
        assert record_of(self.app, stale.key) == before

    @rule(seconds=st.sampled_from((4.0, 11.0)))
    def advance(self, seconds: float) -> None:
        """Time passes; leases run out."""
        self.clock.advance(seconds)

    @precondition(
        lambda self: any(
            isinstance(r, InProgress) and r.lease_until + TAKE_OVER_AFTER > self.clock.now()
            for r in self.records.values()
        )
    )
    @rule(data=st.data())
    def lease_runs_out(self, data: st.DataObject) -> None:
        """Time reaches the exact moment a held key can be taken over: its lease's end plus the
        time its holder has to complete it."""
        ends = sorted(
            r.lease_until + TAKE_OVER_AFTER
            for r in self.records.values()
            if isinstance(r, InProgress) and r.lease_until + TAKE_OVER_AFTER > self.clock.now()
        )
        self.clock.advance(data.draw(st.sampled_from(ends)) - self.clock.now())

    @precondition(lambda self: any(self.owns(h) for h in self.holders))
    @rule(data=st.data())
    def take_over(self, data: st.DataObject) -> None:
        """A holder stalls past its lease and a duplicate takes its key over."""
        holder = data.draw(st.sampled_from(sorted(h for h in self.holders if self.owns(h))))
        record = self.records[self.holders[holder].key]
        assert isinstance(record, InProgress)
        self.clock.advance(max(0.0, record.lease_until + TAKE_OVER_AFTER - self.clock.now()))
        self.claim(self.holders[holder].key, record.variant)
        assert not self.owns(holder)

    @rule(key=st.sampled_from(("c1", "c2")), is_crash=st.booleans())
    def tx_claim(self, key: str, is_crash: bool) -> None:
        """A store side effect under tx.claim; a crash before commit rolls both back."""
        db = self.app.db
        is_new = False
        try:
            with db.transaction() as tx:
                is_new = tx.claim(key, ttl=MODEL_TTL)
                assert is_new == (key not in self.committed)
                if is_new:
                    tx.set(db.document(f"counters/{key}"), {"n": Increment(1)}, merge=True)
                if is_crash:
                    raise Crash
        except Crash:
            return
        if is_new:
            self.committed.add(key)

    @invariant()
    def one_side_effect_per_key(self) -> None:
        assert all(n <= 1 for n in self.effects.values()), self.effects
        for key in ("c1", "c2"):
            stored = self.app.db.document(f"counters/{key}").get().get("n")
            assert stored == (1 if key in self.committed else None)

    @invariant()
    def records_match_the_model(self) -> None:
        assert self.clock.now() < 1_800_000_000.0 + MODEL_TTL  # records never expire here
        for key in KEYS:
            stored = record_of(self.app, key, helper=self.spec.helper)
            model = self.records.get(key)
            if model is None:
                assert stored is None
            elif isinstance(model, InProgress):
                assert stored is not None and stored.status == "in_progress"
                assert (stored.token, stored.lease_until) == (model.token, model.lease_until)
            else:
                assert stored is not None and stored.status == "completed"
                assert stored.token == model.token and stored.result_json == f'"{model.result}"'

    def teardown(self) -> None:
        try:
            # Liveness: once every lease has run out, each key's work is finished exactly once.
            self.holders.clear()
            self.clock.advance(MODEL_LEASE + TAKE_OVER_AFTER)
            for key in self.touched:
                record = self.records.get(key)
                variant = record.variant if record is not None else 0
                claim = _acquire(self.app.runtime, self.spec, self.event(key, variant))
                if not claim.is_done:
                    self.effects[key] += 1
                    _finish(self.app.runtime, self.spec, claim, "last")
            assert all(self.effects[key] == 1 for key in self.touched), self.effects
        finally:
            self.app.close()
            self.directory.cleanup()


TestIdempotencyStateMachine = IdempotencyMachine.TestCase
TestIdempotencyStateMachine.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
