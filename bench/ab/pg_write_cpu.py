"""A PostgreSQL document write from the client's side: wall time and the client's CPU per
write, oncefire's `doc.set` (one trigger registered, its one-statement write) against the same
rows by plain SQL (bench/plain_sql.py: one statement of three INSERTs, autocommit), N writes
each, alternated for --rounds rounds in one process. The server's side of the same writes,
without Python: bench/pg_server_write.sh.

    python bench/ab/pg_write_cpu.py --n 3000 --rounds 3
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import workload
from harness import DOC, reset, target
from plain_sql import PlainSqlWriter


def cpu() -> float:
    """This process's CPU seconds so far."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    t = target("postgres")
    reset(t)
    app = workload.build(t.url, "noop")
    documents = app.db.collection("bench")
    plain = PlainSqlWriter(t)
    for i in range(200):  # untimed: connections opened, statements prepared
        documents.document(f"warm{i}").set(DOC)
    plain.write(200, "warm")
    per = 1e6 / args.n
    for r in range(args.rounds):
        cpu0, wall0 = cpu(), time.perf_counter()
        for i in range(args.n):
            documents.document(f"r{r}-{i}").set(DOC)
        cpu1, wall1 = cpu(), time.perf_counter()
        plain.write(args.n, f"r{r}-")
        cpu2, wall2 = cpu(), time.perf_counter()
        print(
            f"oncefire: wall {(wall1 - wall0) * per:.0f} µs a write, client CPU "
            f"{(cpu1 - cpu0) * per:.0f} | plain SQL: wall {(wall2 - wall1) * per:.0f}, client "
            f"CPU {(cpu2 - cpu1) * per:.0f}"
        )
    plain.close()
    app.close()


if __name__ == "__main__":
    main()
