"""What bench/run_all measures: each scenario's script, its arguments and its sizes.

A scenario is measured per store (`throughput-sqlite`, `soak-postgres`) or per peer
(`peer-celery`); each measurement is one process that writes its result as JSON. The default
scenarios make the page; the extra ones (soak, dashboard, tables, recovery, http) run only when
named (`--with` or `--only`), because they are long or measure one feature.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from benchlib import BENCH

DEFAULT: tuple[str, ...] = ("throughput", "write_path", "latency", "growth", "poison")
DEFAULT += ("idempotency", "many_writers", "flowing", "peers")
EXTRA = ("soak", "dashboard", "tables", "recovery", "http")
PEERS = ("procrastinate", "celery", "celery-threads", "dramatiq", "huey", "rq")
# The smoke run measures PostgreSQL on the scenarios whose code paths differ most by store
# (workers, wake-ups, retries), to stay short.
QUICK_POSTGRES = {"throughput", "latency", "poison"}
TIMEOUT = 1200.0  # seconds: no scenario process outlives this, unless its own bound says more
GROWTH_TIMEOUT = 4 * 3600.0  # the growth history (10 M deliveries) is built the first time

SIZES: dict[str, dict[str, float]] = {
    # Each drain is timed over a fixed window of steady state; its backlog is sized to
    # outlast it (rate x window, plus the 2.5 % warm-up, with room to spare): a run whose
    # backlog ran out first is marked on the page.
    "full": {
        "window": 10.0,
        "backlog_sqlite": 500_000,
        "backlog_postgres": 400_000,
        "backlog_procrastinate": 15_000,
        "backlog_celery": 20_000,
        "backlog_celery_threads": 20_000,
        "backlog_dramatiq": 60_000,
        "backlog_huey": 40_000,
        "backlog_rq": 1500,
        "e2e_writes": 20_000,
        # The growth drains last a few seconds each: long enough that the workers' start
        # does not count in the ratio of the large history to the empty store.
        "n": 100_000,
        "writes": 3000,
        "latency_writes": 500,
        "history": 10_000_000,
        "dead": 1_000_000,
        "queried": 1_000_000,
        "expiring": 1_000_000,
        "growth_writes": 1000,
        "poison": 10_000,
        "idempotency": 2000,
        "count_drains": 5,
        "max_seconds": 10.0,
        "poison_seconds": 75.0,
        "btree_samples": 50,
        "commit_pages": 1500,
        "many_writers": 8,
        "many_writers_window": 10.0,
        "flowing_producers": 2,
        "flowing_window": 10.0,
        "soak_minutes": 60.0,
        "soak_rate": 1000,
        "soak_sample_every": 60.0,
        "soak_window": 60.0,
        "dashboard_history": 1_000_000,
        "dashboard_dead": 100_000,
        "dashboard_repeat": 11,
        "tables_rows": 1000,
        "tables_bulk": 100_000,
        "http_window": 10.0,
    },
    "quick": {
        "window": 2.0,
        "backlog_sqlite": 300,
        "backlog_postgres": 300,
        "backlog_procrastinate": 300,
        "backlog_celery": 300,
        "backlog_celery_threads": 300,
        "backlog_dramatiq": 300,
        "backlog_huey": 300,
        "backlog_rq": 100,
        "e2e_writes": 300,
        "n": 300,
        "writes": 200,
        "latency_writes": 30,
        "history": 2000,
        "dead": 200,
        "queried": 2000,
        "expiring": 2000,
        "growth_writes": 100,
        "poison": 50,
        "idempotency": 50,
        "count_drains": 1,
        "max_seconds": 5.0,
        "poison_seconds": 15.0,
        "btree_samples": 10,
        "commit_pages": 100,
        "many_writers": 2,
        "many_writers_window": 0.5,
        "flowing_producers": 2,
        "flowing_window": 1.0,
        "soak_minutes": 1.0,
        "soak_rate": 100,
        "soak_sample_every": 10.0,
        "soak_window": 20.0,
        "dashboard_history": 2000,
        "dashboard_dead": 200,
        "dashboard_repeat": 3,
        "tables_rows": 100,
        "tables_bulk": 2000,
        "http_window": 1.0,
    },
}


class Step(NamedTuple):
    """One measurement: its name, the interpreter, the script and its arguments."""

    name: str
    python: str
    script: Path
    args: list[str]
    timeout: float = TIMEOUT


def _arg(name: str, value: float) -> list[str]:
    return [f"--{name}", str(value)]


def oncefire_steps(
    store: str, only: set[str], sizes: dict[str, float], runs: int, quick: bool, python: str
) -> list[Step]:
    """The measurements of oncefire on one store, in the order they run."""
    if quick and store != "sqlite":
        only = {name for name in only if name in QUICK_POSTGRES or name in EXTRA}
    common = ["--store", store, *_arg("runs", runs)]
    cap = _arg("max-seconds", sizes["max_seconds"])
    plan: list[Step] = []

    def add(name: str, script: str, args: list[str], timeout: float = TIMEOUT) -> None:
        if name in only:
            plan.append(Step(f"{name}-{store}", python, BENCH / script, args, timeout))

    add(
        "throughput",
        "throughput.py",
        [
            *common,
            *cap,
            *_arg("n", sizes[f"backlog_{store}"]),
            *_arg("window", sizes["window"]),
            *_arg("writes", sizes["e2e_writes"]),
            # The smoke run starts the 16 processes of per-event acknowledgement on SQLite only.
            *(["--skip-per-event"] if quick and store != "sqlite" else []),
        ],
    )
    add(
        "write_path",
        "write_path.py",
        [
            *common,
            *_arg("writes", sizes["writes"]),
            *_arg("btree-samples", sizes["btree_samples"]),
            *_arg("commit-pages", sizes["commit_pages"]),
        ],
    )
    add("latency", "latency.py", [*common, *_arg("writes", sizes["latency_writes"])])
    growth = [*common, *cap, *_arg("n", sizes["n"]), *_arg("history", sizes["history"])]
    growth += [*_arg("dead", sizes["dead"]), *_arg("queried", sizes["queried"])]
    growth += [*_arg("expiring", sizes["expiring"]), *_arg("writes", sizes["growth_writes"])]
    add("growth", "growth.py", growth, GROWTH_TIMEOUT)
    poison = [*_arg("max-seconds", sizes["poison_seconds"]), *_arg("n", sizes["poison"])]
    add("poison", "poison.py", [*common, *poison])
    idempotency = [*_arg("n", sizes["idempotency"]), *_arg("count-drains", sizes["count_drains"])]
    add("idempotency", "idempotency_overhead.py", [*common, *cap, *idempotency])
    writers = [*_arg("producers", sizes["many_writers"]), "--floor"]
    add(
        "many_writers",
        "many_writers.py",
        [*common, *writers, *_arg("window", sizes["many_writers_window"])],
    )
    flowing = [
        *_arg("producers", sizes["flowing_producers"]),
        *_arg("window", sizes["flowing_window"]),
    ]
    add("flowing", "flowing.py", [*common, *flowing])
    minutes = sizes["soak_minutes"]
    soak = [*_arg("minutes", minutes), *_arg("rate", sizes["soak_rate"])]
    soak += [
        *_arg("sample-every", sizes["soak_sample_every"]),
        *_arg("window", sizes["soak_window"]),
    ]
    add("soak", "soak.py", ["--store", store, *soak], minutes * 60 + TIMEOUT)
    dashboard = [
        *_arg("history", sizes["dashboard_history"]),
        *_arg("dead", sizes["dashboard_dead"]),
    ]
    dashboard += _arg("repeat", sizes["dashboard_repeat"])
    add("dashboard", "dashboard_pages.py", ["--store", store, *dashboard], GROWTH_TIMEOUT)
    tables = [*_arg("rows", sizes["tables_rows"]), *_arg("bulk", sizes["tables_bulk"])]
    add("tables", "tables.py", [*common, *tables])
    add("http", "http_requests.py", [*common, *_arg("window", sizes["http_window"])])
    if store == "sqlite":  # the workers' recovery is the same code on both stores
        add("recovery", "recovery.py", ["--quick"] if quick else ["--default"])
    return plan


def peer_steps(python: str, sizes: dict[str, float], runs: int, e2e: bool) -> list[Step]:
    """The measurements of the peers, each in the peers' own environment."""
    return [
        Step(
            f"peer-{peer}",
            python,
            BENCH / "peers" / "run_peer.py",
            [
                "--peer",
                peer,
                *_arg("runs", runs),
                *_arg("max-seconds", sizes["max_seconds"]),
                *_arg("n", sizes[f"backlog_{peer.replace('-', '_')}"]),
                *_arg("window", sizes["window"]),
                *_arg("latency-writes", sizes["latency_writes"]),
                *([] if e2e else ["--skip-e2e"]),
            ],
        )
        for peer in PEERS
    ]
