"""oncefire's end to end on its own, as the throughput scenario measures it: warm workers at
the defaults, one producer writing documents one by one for a window; the rate events ran and
the producer's write rate. For an A/B of trees of src (PYTHONPATH and BENCH_SRC pick one):

    python bench/ab/end_to_end.py --store sqlite --n 20000 --window 10
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from drain import end_to_end
from harness import target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--window", type=float, default=10.0)
    args = parser.parse_args()
    result = end_to_end(target(args.store), "noop", args.n, args.window)
    print(
        f"oncefire end to end on {args.store}: {result['rate']:,.0f} events/s, the producer "
        f"{result['write_rate']:,.0f} writes/s"
    )


if __name__ == "__main__":
    main()
