"""oncefire.firebase.firestore transactions: @transactional reads then writes atomically,
refuses a read after a write, and runs again on contention as the Python client does."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from oncefire import App
from oncefire.firebase import firestore
from oncefire.firebase.firestore import FieldFilter, ReadAfterWriteError, Transaction
from oncefire.testing import fail_store_calls


@pytest.fixture
def db(app: App) -> firestore.Client:
    return firestore.client(app)


def counter(db: firestore.Client, runs: list[int]) -> Callable[[Transaction], int]:
    """A transactional function adding 1 to counters/c's n; each run appends to runs."""
    ref = db.document("counters/c")

    @firestore.transactional
    def bump(transaction: Transaction) -> int:
        runs.append(1)
        snapshot = next(transaction.get(ref))
        transaction.update(ref, {"n": snapshot.get("n") + 1})
        return int(snapshot.get("n")) + 1

    return bump


def test_a_transactional_function_reads_then_writes_atomically(db: firestore.Client) -> None:
    ref = db.document("accounts/a")
    ref.set({"balance": 10})

    @firestore.transactional
    def withdraw(transaction: Transaction, account: Any, amount: int) -> int:
        balance = account.get(transaction=transaction).get("balance")
        if balance < amount:
            raise ValueError("insufficient funds")
        transaction.update(account, {"balance": balance - amount})
        transaction.set(db.document("log/l1"), {"amount": amount})
        return int(balance - amount)

    assert withdraw(db.transaction(), ref, 4) == 6
    with pytest.raises(ValueError, match="insufficient"):
        withdraw(db.transaction(), ref, 100)  # the function's own error: not run again
    assert ref.get().get("balance") == 6
    assert db.document("log/l1").get().to_dict() == {"amount": 4}


def test_writes_wait_for_the_commit_and_reads_must_come_first(db: firestore.Client) -> None:
    ref = db.document("docs/d")

    @firestore.transactional
    def write_then_read(transaction: Transaction) -> None:
        transaction.set(ref, {"n": 1})
        assert not ref.get().exists  # not written before the commit
        ref.get(transaction=transaction)

    with pytest.raises(ReadAfterWriteError, match="read after write"):
        write_then_read(db.transaction())
    assert not ref.get().exists


def test_a_transaction_reads_queries_and_many_documents(db: firestore.Client) -> None:
    for n in range(3):
        db.document(f"stock/s{n}").set({"n": n})

    @firestore.transactional
    def total(transaction: Transaction) -> int:
        query = db.collection("stock").where(filter=FieldFilter("n", ">=", 1))
        found = [s.get("n") for s in transaction.get(query)]
        many = transaction.get_all([db.document("stock/s0"), db.document("stock/none")])
        transaction.set(db.document("totals/t"), {"sum": sum(found)})
        return len(list(many))

    assert total(db.transaction()) == 2
    assert db.document("totals/t").get().to_dict() == {"sum": 3}
    read_only = db.transaction(read_only=True)
    with pytest.raises(ValueError, match="read-only"):
        firestore.transactional(lambda t: t.set(db.document("x/y"), {}))(read_only)


def test_contention_runs_the_function_again(app: App, db: firestore.Client) -> None:
    db.document("counters/c").set({"n": 0})
    runs: list[int] = []
    with fail_store_calls(app, "write", times=2):  # two commits meet contention
        assert counter(db, runs)(db.transaction()) == 1
    assert len(runs) == 3
    assert db.document("counters/c").get().get("n") == 1


def test_contention_on_every_attempt_gives_up_writing_nothing(
    app: App, db: firestore.Client
) -> None:
    db.document("counters/c").set({"n": 0})
    runs: list[int] = []
    with (
        fail_store_calls(app, "write", times=5),
        pytest.raises(ValueError, match="Failed to commit transaction in 5 attempts"),
    ):
        counter(db, runs)(db.transaction())
    assert len(runs) == 5
    with (
        fail_store_calls(app, "write", times=2),
        pytest.raises(ValueError, match="in 2 attempts"),
    ):
        counter(db, runs)(db.transaction(max_attempts=2))
    assert db.document("counters/c").get().get("n") == 0


@pytest.mark.postgres
def test_two_transactions_that_deadlock_both_commit(postgres_store_url: str) -> None:
    # Each locks one document, then reads the other's: PostgreSQL ends one of them (a
    # deadlock), and @transactional runs it again once the other has committed.
    app = App(postgres_store_url)
    try:
        db = firestore.client(app)
        for name in "ab":
            db.document(f"pair/{name}").set({"n": 0})
        meet = threading.Barrier(2, timeout=30)
        runs = {"ab": 0, "ba": 0}
        errors: list[BaseException] = []

        @firestore.transactional
        def both(transaction: Transaction, order: str) -> None:
            runs[order] += 1
            first, second = (db.document(f"pair/{name}") for name in order)
            one = first.get(transaction=transaction)
            if runs[order] == 1:
                meet.wait()  # both hold their first document before reading the second
            two = second.get(transaction=transaction)
            transaction.update(first, {"n": one.get("n") + 1})
            transaction.update(second, {"n": two.get("n") + 1})

        def run(order: str) -> None:
            try:
                both(db.transaction(), order)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(order,)) for order in runs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert sorted(runs.values()) == [1, 2]  # one ran again after the deadlock
        assert [db.document(f"pair/{n}").get().get("n") for n in "ab"] == [2, 2]
    finally:
        app.close()
