"""db.transaction(): commits on exit, rolls back on an exception, with the events it causes."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from oncefire import App, Increment, Transaction, TransactionError
from oncefire.events import Event


def count_calls(app: App, pattern: str = "{coll}/{doc}") -> list[Event]:
    seen: list[Event] = []

    @app.on_document_written(pattern)
    def on_write(event: Event) -> None:
        seen.append(event)

    return seen


def test_a_transaction_commits_every_write_on_exit(app: App) -> None:
    seen = count_calls(app)
    a, b, c = (app.db.document(f"docs/{n}") for n in "abc")
    c.set({"old": True})
    with app.db.transaction() as tx:
        tx.set(a, {"n": 1})
        tx.set(b, {"n": 2})
        tx.update(a, {"n": Increment(10)})
        tx.delete(c)
    assert a.get().to_dict() == {"n": 11}
    assert b.get().to_dict() == {"n": 2}
    assert not c.get().exists
    app.drain()
    assert sorted((e.source, e.type) for e in seen) == [
        ("docs/a", "document.created"),
        ("docs/a", "document.updated"),
        ("docs/b", "document.created"),
        ("docs/c", "document.created"),
        ("docs/c", "document.deleted"),
    ]


def test_a_raising_transaction_writes_nothing_and_emits_no_event(app: App) -> None:
    seen = count_calls(app)
    a, b = app.db.document("docs/a"), app.db.document("docs/b")
    b.set({"n": 1})
    app.drain()
    seen.clear()
    with pytest.raises(RuntimeError, match="boom"), app.db.transaction() as tx:
        tx.set(a, {"n": 1})
        tx.update(b, {"n": 2})
        tx.delete(b)
        raise RuntimeError("boom")
    assert not a.get().exists
    assert b.get().to_dict() == {"n": 1}
    summary = app.drain()
    assert summary.attempts == 0
    assert seen == []
    assert app.stats()["on_write"].pending == 0


def test_a_reference_write_inside_a_transaction_joins_it(app: App) -> None:
    seen = count_calls(app)
    ref = app.db.document("docs/a")
    with pytest.raises(ValueError), app.db.transaction():
        ref.set({"n": 1})
        assert ref.get().to_dict() == {"n": 1}  # reads see the transaction's own writes
        raise ValueError
    assert not ref.get().exists
    assert app.drain().attempts == 0
    assert seen == []


def test_a_transaction_reads_its_own_writes(app: App) -> None:
    ref = app.db.document("docs/a")
    with app.db.transaction() as tx:
        assert not tx.get(ref).exists
        tx.set(ref, {"n": 1})
        assert tx.get(ref).to_dict() == {"n": 1}
        tx.update(ref, {"n": Increment(1)})
        assert tx.get(ref).get("n") == 2


def test_a_nested_transaction_joins_the_outer_one(app: App) -> None:
    a, b = app.db.document("docs/a"), app.db.document("docs/b")
    with pytest.raises(KeyError), app.db.transaction() as outer:
        outer.set(a, {"n": 1})
        with app.db.transaction() as inner:
            inner.set(b, {"n": 2})
        raise KeyError("late")
    assert not a.get().exists
    assert not b.get().exists


def test_a_transaction_cannot_be_used_after_it_ends(app: App) -> None:
    ref = app.db.document("docs/a")
    with app.db.transaction() as tx:
        tx.set(ref, {"n": 1})
    with pytest.raises(TransactionError, match="open a new one"):
        tx.set(ref, {"n": 2})
    with pytest.raises(TransactionError):
        tx.get(ref)
    assert ref.get().to_dict() == {"n": 1}


def test_run_transaction_returns_what_the_body_returns(app: App) -> None:
    ref = app.db.document("docs/a")
    ref.set({"n": 41})

    def bump(tx: Transaction) -> int:
        tx.update(ref, {"n": Increment(1)})
        return 42

    assert app.db.run_transaction(bump) == 42
    assert ref.get().get("n") == 42


def test_claim_is_false_once_committed_and_rolls_back_with_the_transaction(app: App) -> None:
    with pytest.raises(RuntimeError), app.db.transaction() as tx:
        assert tx.claim("key-1")
        raise RuntimeError
    with app.db.transaction() as tx:
        assert tx.claim("key-1")  # the rolled-back claim did not stick
    with app.db.transaction() as tx:
        assert not tx.claim("key-1")


def test_concurrent_read_modify_write_transactions_lose_no_update(app: App) -> None:
    ref = app.db.document("counters/c")
    ref.set({"n": 0})
    errors: list[BaseException] = []

    def bump_many() -> None:
        try:
            for _ in range(15):
                with app.db.transaction() as tx:
                    n = tx.get(ref).get("n")
                    tx.set(ref, {"n": n + 1})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=bump_many) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert ref.get().get("n") == 45


def test_a_second_app_on_the_same_store_sees_commits(make_app: Callable[..., App]) -> None:
    first = make_app()
    second = make_app()
    first.db.document("docs/a").set({"n": 1})
    assert second.db.document("docs/a").get().to_dict() == {"n": 1}
    with first.db.transaction() as tx:
        tx.set(first.db.document("docs/b"), {"n": 2})
        assert not second.db.document("docs/b").get().exists  # not committed yet
    assert second.db.document("docs/b").get().to_dict() == {"n": 2}
