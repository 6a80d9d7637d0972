"""ordering_key=callable across three real `oncefire worker` processes, on both stores: each
customer's orders (100 documents, 5 customers) run one at a time in order, and a failure
holds back its customer only. The workers compute the keys: the test's writer has no
callable."""

from __future__ import annotations

import pytest

from tests.e2e.test_ordering_and_rates import SLOTS, Workers, ledger_count, workers

pytestmark = pytest.mark.e2e
__all__ = ["workers"]  # the fixture, shared with the document ordering test


@pytest.mark.slow
def test_three_processes_keep_the_order_of_each_computed_key(workers: object) -> None:
    w: Workers = workers(3, batch_size=SLOTS)  # type: ignore[operator]
    # One commit; each process leases no more than its two slots and each customer's first
    # order holds its slot half a second: the five customers spread over the processes.
    with w.app.db.transaction() as tx:
        for n in range(20):
            for c in range(5):
                tx.set(w.app.db.document(f"orders/o{n}-{c}"), {"customer": f"c{c}", "n": n})
    w.wait_for("100 orders run", lambda: ledger_count(w, "kdone ") == 100)
    lines = [line for line in w.lines() if line[0].startswith("k")]
    pids = set()
    for c in range(5):
        mine = [line[:3] for line in lines if line[1] == f"c{c}"]
        expected = []
        for n in range(20):
            if c == 0 and n == 3:
                expected += [["kbegin", "c0", "3"], ["kfail", "c0", "3"]]
            expected += [["kbegin", f"c{c}", str(n)], ["kdone", f"c{c}", str(n)]]
        assert mine == expected
        pids |= {line[3] for line in lines if line[0] == "kbegin" and line[1] == f"c{c}"}
    assert len(pids) > 1, "the orders ran in one process only: nothing was tested"
    failed = lines.index(["kfail", "c0", "3"])
    retried = next(
        i for i, line in enumerate(lines) if line[:3] == ["kbegin", "c0", "3"] and i > failed
    )
    between = lines[failed + 1 : retried]
    assert any(line[0] == "kbegin" and line[1] != "c0" for line in between)
    assert not any(line[1] == "c0" for line in between)
