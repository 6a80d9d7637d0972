"""How much of the time SQLite's write lock is held while a command runs, and by whom: runs the
command with every Python process it starts noting its write transactions (lock_probe/
sitecustomize.py), then reports, over the middle 60 % of the transactions (the steady state):
transactions a second, the share of the time the lock was held, how long a holder held it, the
gap from one release to the next hold, how long a writer waited, and how often one process
took the lock twice in a row.

    python bench/ab/lock_share.py -- python bench/ab/per_event_drain.py --store sqlite
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

PROBE = Path(__file__).resolve().parent / "lock_probe"


def quantile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[int(share * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    command = [word for word in parser.parse_args().command if word != "--"]
    with tempfile.TemporaryDirectory() as folder:
        paths = [str(PROBE), os.environ.get("PYTHONPATH", "")]
        env = {
            **os.environ,
            "LOCK_PROBE_DIR": folder,
            "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        }
        subprocess.run(command, env=env, check=True)
        held = []  # (got, released, asked, process)
        for path in Path(folder).glob("*.txt"):
            for line in path.read_text().splitlines():
                asked, got, released = map(float, line.split())
                held.append((got, released, asked, path.stem))
    held.sort()
    steady = held[len(held) // 5 : len(held) * 4 // 5]
    span = steady[-1][1] - steady[0][0]
    holds = [released - got for got, released, _, _ in steady]
    gaps = [steady[i + 1][0] - steady[i][1] for i in range(len(steady) - 1)]
    waits = [got - asked for got, _, asked, _ in steady]
    twice = sum(steady[i][3] == steady[i + 1][3] for i in range(len(steady) - 1))
    print(
        f"{len(steady):,} write transactions in {span:.2f} s ({len(steady) / span:,.0f} a second), "
        f"the lock held {100 * sum(holds) / span:.0f} % of the time"
    )
    for name, values, unit in (
        ("held", holds, 1e6),
        ("from a release to the next hold", gaps, 1e6),
        ("waited for the lock", waits, 1e6),
    ):
        print(
            f"{name}: mean {unit * sum(values) / len(values):,.0f} µs, p50 "
            f"{unit * quantile(values, 0.5):,.0f}, p90 {unit * quantile(values, 0.9):,.0f}, "
            f"p99 {unit * quantile(values, 0.99):,.0f}"
        )
    print(f"the same process twice in a row: {100 * twice / max(1, len(steady) - 1):.0f} %")


if __name__ == "__main__":
    main()
