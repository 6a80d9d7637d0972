"""RESULTS.md, section 1: throughput of oncefire and its peers, and commits per event."""

from __future__ import annotations

from typing import Any

from report_page import (
    DASH,
    LABEL,
    PEER_LABEL,
    SHORT,
    Page,
    drain_of,
    fig,
    med,
    ratio,
    redis_is_volatile,
    runs_mark,
    short_mark,
)

# The order of the table: by where the queue is kept.
ROWS = (
    ("sqlite", "defaults"),
    ("sqlite", "per_event"),
    ("peer", "huey"),
    ("postgres", "defaults"),
    ("postgres", "per_event"),
    ("peer", "procrastinate"),
    ("peer", "celery"),
    ("peer", "celery-threads"),
    ("peer", "dramatiq"),
    ("peer", "rq"),
)


def throughput(page: Page) -> None:
    facts = page.r["facts"]
    settings = facts.get("settings") or {}
    sizes = facts["sizes"]
    window = sizes.get("window")
    page.add("## 1. Throughput", "")
    if window is None:  # a sitting from before the fixed window
        page.add("N no-op events drained by 2 worker processes, timed to the last.", "")
    else:
        page.add(
            "No-op events drained from a backlog written first, with no worker running. The "
            "workers start; once 2.5 % of the backlog has run (start-up excluded), the events "
            f"completed within a fixed window of **{window:g} s** are counted, for every "
            "system alike. Each backlog is sized to outlast the window (sizes below), so the "
            "window is steady state throughout and holds what a long drain pays for: oncefire's "
            f"lease renewals (every {settings.get('renew_every', '?')} s) and sweeps (every "
            f"{settings.get('sweep_every', '?')} s), SQLite's WAL checkpoints, PostgreSQL's "
            f"autovacuum. {SHORT} marks a run whose backlog ran out first: its rate is over the "
            "time it lasted. Every system is watched alike: its backlog is counted every 20 ms "
            "until the window starts and once at its end (each count stamped at the middle "
            "of its query), and within the window it is only asked, every 100 ms, whether "
            "work is left, from the first entry of an index, so that watching costs little "
            "however large the backlog (oncefire: its partial indexes on pending and running "
            "deliveries; Procrastinate: its partial index on todo and doing jobs, its tables "
            "analysed once the backlog is in, as oncefire's are; Huey: its "
            "(queue, priority, id) index; Redis: list and hash lengths).",
            "",
            "Every system has 16 execution slots. oncefire's *defaults* are 2 processes x "
            f"{settings.get('concurrency', '?')} threads that claim and record in batches of "
            f"up to {settings.get('batch_size', '?')} deliveries (read from "
            "`oncefire.settings` in this sitting); *per-event acknowledgement* is 16 "
            "processes x 1 thread with `batch_size=1`: each attempt's record is committed "
            "on its own (with the claim of the next one). Celery runs both ways: one "
            "prefork worker with 16 child processes, and 2 worker processes with 8 threads.",
            "",
            "*Commits per event*: the durable commits a system's workers made from their "
            "start to their stop, per event done by then (their start-up and shutdown "
            "included). PostgreSQL: `pg_stat_database.xact_commit` of the system's database "
            "(every transaction, read-only ones too; the benchmark's own counting queries "
            "taken off); oncefire on SQLite: the change counter of the WAL index (the "
            "-shm file), which SQLite increments once a committed transaction, so the "
            "workers run untouched; Huey: a trace callback on every connection of its "
            "worker (a COMMIT, or a write outside a transaction). Redis: "
            + redis_persistence(facts)
            + ".",
            "",
        )
    sq, pg = drain_of(page, "sqlite"), drain_of(page, "postgres")
    rows = [row(page, kind, name, sq, pg) for kind, name in ROWS]
    page.table(
        [
            "system",
            "store / broker",
            "set-up",
            "drain-only events/s",
            "commits per event",
            "÷ oncefire SQLite",
            "÷ oncefire PostgreSQL",
        ],
        [r for r in rows if r],
    )
    end_to_end(page)
    crashes(page, settings)


def row(page: Page, kind: str, name: str, sq: float | None, pg: float | None) -> list[str]:
    """One system's row of the drain table, or [] when it was not measured."""
    if kind == "peer":
        p = page.peers.get(name)
        if p is None:
            return []
        label, broker = (
            p.get("label") or PEER_LABEL[name][0],
            p.get("broker") or (PEER_LABEL[name][1]),
        )
        if "error" in p:
            return [label, broker, DASH, f"failed: {p['error']}", DASH, DASH, DASH]
        rate = med(p.get("drain_only"))
        commits = p.get("commits_per_event")
        shown = fig(commits, 2) if commits else ("none (Redis)" if broker == "Redis" else DASH)
        return [
            label,
            broker,
            p.get("setup") or p.get("config", ""),
            fig(p.get("drain_only"))
            + runs_mark(p.get("drain_runs"))
            + short_mark(p.get("drain_runs")),
            shown,
            ratio(rate, sq),
            ratio(rate, pg),
        ]
    test = f"throughput-{kind}"
    why = page.missing(test, kind)
    t = page.get(test)
    setup = (t.get("setups") or {}).get(name)
    if why or (setup is None and name != "defaults"):
        return (
            ["oncefire", LABEL[kind], name.replace("_", "-"), why, DASH, DASH, DASH]
            if why and name == "defaults"
            else []
        )
    if setup is None:  # a sitting from before the set-ups
        setup = {"label": t.get("workers", ""), "drain_only": t.get("drain_only")}
        setup["runs"] = t.get("drain_runs")
    rate = med(setup.get("drain_only"))
    said = "defaults" if name == "defaults" else "per-event acknowledgement"
    return [
        "oncefire",
        LABEL[kind],
        f"{said}: {setup.get('label', '')}",
        fig(setup.get("drain_only")) + runs_mark(setup.get("runs")) + short_mark(setup.get("runs")),
        fig(setup.get("commits_per_event"), 3),
        ratio(rate, sq),
        ratio(rate, pg),
    ]


def end_to_end(page: Page) -> None:
    """oncefire's end-to-end runs: one producer writing while warm workers run."""
    rows = []
    for store in ("sqlite", "postgres"):
        t = page.get(f"throughput-{store}")
        if not t.get("end_to_end"):
            continue
        rows.append(
            [
                LABEL[store],
                f"{t.get('writes', t.get('n', 0)):,}",
                fig(t.get("end_to_end")) + runs_mark(t.get("e2e_runs")),
                fig(t.get("producer_write_rate")),
            ]
        )
    if not rows:
        return
    page.add(
        "*End to end* (oncefire; `--peer-e2e` adds the peers): warm workers (the defaults), "
        "one producer writes the documents one transaction each; events run per second "
        "from the first write to the last function run, bounded by the drain time bound "
        "from the first write (with a slow producer: the rate at which events ran while it "
        "wrote).",
        "",
    )
    page.table(["store", "writes", "end to end events/s", "producer writes/s"], rows)


def crashes(page: Page, settings: dict[str, Any]) -> None:
    """What a worker's crash runs again in each system."""
    batch, lease = settings.get("batch_size", "?"), float(settings.get("lease", 30.0))
    lines = [
        "What a worker's crash runs again:",
        "",
        "- oncefire, defaults: the attempts that ended since the process's last record (up "
        f"to batch_size = {batch}) run again once their leases run out ({lease:g} s), as "
        "do those that were running; effects behind `tx.claim` still happen once.",
        "- oncefire, per-event acknowledgement: at most the one attempt each process was running.",
    ]
    for name in PEER_LABEL:
        p = page.peers.get(name)
        if p and p.get("crash"):
            lines.append(f"- {p.get('label', name)}: {p['crash']}.")
    if redis_is_volatile(page.r["facts"]) and any(
        PEER_LABEL[name][1] == "Redis" for name in page.peers if name in PEER_LABEL
    ):
        lines.append(
            "- And for every peer on Redis: Redis keeps its data in memory only in this "
            "sitting, so a restart of Redis loses every queued job, whatever the workers do."
        )
    page.add(*lines, "")


def redis_persistence(facts: dict[str, Any]) -> str:
    """Redis's persistence settings as read in the sitting."""
    redis = facts.get("redis")
    if not isinstance(redis, dict) or "save" not in redis:
        return "its persistence settings were not read in this sitting"
    save = redis.get("save") or "(none)"
    said = (
        f"`CONFIG GET save` is `{save}` and `appendonly` is `{redis.get('appendonly')}` in "
        "this sitting"
    )
    if redis_is_volatile(facts):
        return f"no commit, nothing is written to disk ({said})"
    return f"not counted ({said}, appendfsync `{redis.get('appendfsync')}`)"
