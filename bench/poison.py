"""Scenario 5, poison storm: N events whose function always raises, on a short retry policy
(6 attempts, 0.05 s after the first failure, doubling: about 1.6 s of backoff an event).

2 warm worker processes run; the N documents are written in one transaction, and the clock
runs from its commit until every delivery is a dead letter. Then the store is checked: each
delivery must be dead after exactly 6 attempts, each recorded as a failed attempt.

    python bench/poison.py --store sqlite --n 10000 --runs 3
"""

from __future__ import annotations

import time
from typing import Any

import workload
from benchlib import common_args, log, phase, summarize, wait_until, write_json
from drain import describe_run
from oncefire_harness import Backlog, Target, reset, target, workers

MAX_ATTEMPTS = workload.POISON_POLICY.max_attempts


def one_run(t: Target, n: int, max_seconds: float) -> dict[str, Any]:
    reset(t)
    app = workload.build(t.url, "poison")
    col = app.db.collection("bench")
    backlog = Backlog(t, "poison")
    try:
        with workers(t, "poison"):
            with phase("start workers, a warm-up event to its dead letter"):
                col.document("warmup").set({"warm": True})
                wait_until(lambda: backlog() == 0, 120, "the warm-up poison event to die")
            with phase(f"write {n:,} documents in one transaction"), app.db.transaction() as tx:
                for i in range(n):
                    tx.set(col.document(f"p{i}"), {"n": i})
            t0 = time.monotonic()
            deadline = t0 + max_seconds
            left = n
            while left > 0 and time.monotonic() < deadline:
                time.sleep(0.05)
                left = backlog()
            seconds = time.monotonic() - t0
        dead = backlog.count("SELECT count(*) FROM oncefire_deliveries WHERE state = 'dead'")
        attempts = backlog.count("SELECT count(*) FROM oncefire_attempts")
        wrong_attempt = backlog.count(
            "SELECT count(*) FROM oncefire_deliveries WHERE state = 'dead' AND attempt != ?",
            (MAX_ATTEMPTS,),
        )
        # One grouped pass over the attempts (a correlated count per dead letter would scan
        # them all once per delivery: there is no index on delivery_id alone).
        wrong_rows = backlog.count(
            "SELECT count(*) FROM oncefire_deliveries d LEFT JOIN (SELECT delivery_id,"
            " count(*) AS n FROM oncefire_attempts WHERE outcome = 'failed'"
            " GROUP BY delivery_id) a ON a.delivery_id = d.id"
            " WHERE d.state = 'dead' AND COALESCE(a.n, 0) != ?",
            (MAX_ATTEMPTS,),
        )
        listed = app.dead_letters.count()
    finally:
        backlog.close()
        app.close()
    # The warm-up event is one more dead letter with its own 6 attempts.
    is_exact = (
        left == 0 and dead == n + 1 and attempts == (n + 1) * MAX_ATTEMPTS and wrong_attempt == 0
    )
    return {
        "seconds": seconds,
        "rate": (attempts - MAX_ATTEMPTS) / seconds,
        "attempts": attempts - MAX_ATTEMPTS,
        "attempts_per_event": (attempts - MAX_ATTEMPTS) / n,
        "dead_letters": dead - 1,
        "dead_letters_listed": listed - 1,
        "deliveries_not_at_6": wrong_attempt,
        "deliveries_without_6_failed_attempts": wrong_rows,
        "exactly_6_each": is_exact and wrong_rows == 0,
        # Of the deliveries that are dead letters (all of them unless cut short), how many
        # did not get exactly 6 failed attempts.
        "dead_without_exactly_6": wrong_attempt + wrong_rows,
        "capped": left > 0,
        "left": left,
    }


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--n", type=int, default=10_000)
    args = parser.parse_args()
    t = target(args.store)
    runs: list[dict[str, Any]] = []
    for run in range(args.runs):
        log(f"poison storm on {t.label}, run {run + 1}/{args.runs}: {args.n:,} events")
        runs.append(one_run(t, args.n, args.max_seconds))
        describe_run(
            f"{runs[-1]['attempts']:,} attempts in {runs[-1]['seconds']:.1f} s, "
            f"exactly 6 each: {runs[-1]['exactly_6_each']}; attempts",
            runs[-1],
        )
    write_json(
        args.json,
        {
            "scenario": "poison",
            "store": args.store,
            "n": args.n,
            "policy": "RetryPolicy(max_attempts=6, first_delay=0.05, multiplier=2, max_delay=1)",
            "seconds_to_all_dead": summarize([r["seconds"] for r in runs]),
            "attempts_per_second": summarize([r["rate"] for r in runs]),
            "attempts_per_event": summarize([r["attempts_per_event"] for r in runs]),
            "exactly_6_each": all(r["exactly_6_each"] for r in runs),
            "dead_without_exactly_6": sum(r["dead_without_exactly_6"] for r in runs),
            "capped": any(r["capped"] for r in runs),
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
