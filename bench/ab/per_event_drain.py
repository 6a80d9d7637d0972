"""oncefire's per-event drain on its own (16 processes x 1 thread, batch_size 1), as the
throughput scenario measures it, without the defaults' drain beside it: for a sitting of
per-event figures (bench/ab/per_event_floor.py, the Procrastinate peer) alternated.

    python bench/ab/per_event_drain.py --store postgres --n 30000 --window 10
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from drain import PER_EVENT, drain_only
from harness import target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--n", type=int, default=30_000)
    parser.add_argument("--window", type=float, default=10.0)
    args = parser.parse_args()
    result = drain_only(
        target(args.store), "noop", args.n, 600.0, window=args.window, setup=PER_EVENT
    )
    print(
        f"oncefire per-event on {args.store}: {result['rate']:,.0f} events/s, "
        f"{result['commits_per_event']:.3f} commits an event"
        + (" (backlog ran out)" if result.get("short") else "")
    )


if __name__ == "__main__":
    main()
