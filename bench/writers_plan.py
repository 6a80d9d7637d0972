"""bench/run_all's plan for the writers' scenarios: many writers and events flowing, with
their sizes, and the write path's b-tree and commit-cost options."""

from __future__ import annotations

from pathlib import Path

from benchlib import BENCH

WRITER_SCENARIOS = ("many_writers", "flowing")
WRITER_SIZES = {
    "full": {
        "btree_samples": 50,
        "commit_pages": 1500,
        "many_writers": 8,
        "many_writers_window": 10.0,
        "flowing_producers": 2,
        "flowing_window": 10.0,
    },
    "quick": {
        "btree_samples": 10,
        "commit_pages": 100,
        "many_writers": 2,
        "many_writers_window": 1.0,
        "flowing_producers": 2,
        "flowing_window": 1.0,
    },
}


def write_path_extra(sizes: dict[str, float]) -> list[str]:
    """The write path's options for the b-trees a write touches and the commit cost."""
    return [
        "--btree-samples",
        str(sizes["btree_samples"]),
        "--commit-pages",
        str(sizes["commit_pages"]),
    ]


def writer_plan(
    store: str, only: set[str], sizes: dict[str, float], runs: list[str], python: str
) -> list[tuple[str, str, Path, list[str]]]:
    """(name, python, script, arguments) of each writers' scenario asked for, on a store."""
    plan = []
    if "many_writers" in only:
        args = ["--producers", str(sizes["many_writers"]), "--floor"]
        args += ["--window", str(sizes["many_writers_window"])]
        plan.append(
            (
                f"many_writers-{store}",
                python,
                BENCH / "many_writers.py",
                ["--store", store, *runs, *args],
            )
        )
    if "flowing" in only:
        args = ["--producers", str(sizes["flowing_producers"])]
        args += ["--window", str(sizes["flowing_window"])]
        plan.append(
            (f"flowing-{store}", python, BENCH / "flowing.py", ["--store", store, *runs, *args])
        )
    return plan
