"""An in-process drain of N no-op events on PostgreSQL by one worker at the defaults: wall and
CPU time per event, for a quick A/B of two trees of src (PYTHONPATH picks the one measured).

    PYTHONPATH=<tree>/src python bench/ab/pg_drain.py --n 20000 --runs 1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import workload
from harness import prefill, reset, target

import oncefire
from oncefire.worker import Worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    t = target("postgres")
    tree = str(Path(oncefire.__file__).parent.parent.parent)
    for _ in range(args.runs):
        reset(t)
        app = workload.build(t.url, "noop")
        prefill(app, args.n)
        worker = Worker(app.runtime)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        summary = worker.drain()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        worker.shutdown()
        app.close()
        assert summary.attempts == args.n, summary
        per = 1e6 / args.n
        print(f"{tree}: wall {wall * per:.1f} µs/event, CPU {cpu * per:.1f} µs/event")


if __name__ == "__main__":
    main()
