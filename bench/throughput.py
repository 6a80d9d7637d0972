"""Scenario 1, throughput: document writes, each triggering one no-op function.

drain-only: a backlog of N events is written (untimed) with no worker running; then the
worker processes start, and once the first 2.5 % have run (start-up excluded) the events
run within a fixed window (--window seconds) are counted: the backlog outlasts the window,
so the lease renewals, sweeps, checkpoints and autovacuum that fall in it are paid. Two
set-ups, the same 16 slots: oncefire's defaults (2 processes x 8 threads, batches of up to
512), and per-event acknowledgement (16 processes x 1 thread, batch_size 1: each attempt's
record committed on its own). Commits per event are counted for both.
end to end: the 2 worker processes are running and warm; one producer writes the N
documents one transaction each; timed from the first write to the last function run.

    python bench/throughput.py --store sqlite --n 400000 --window 10 --runs 3 --json out.json
"""

from __future__ import annotations

from typing import Any

from benchlib import common_args, log, summarize, write_json
from drain import DEFAULTS, PER_EVENT, describe_run, drain_only, end_to_end
from oncefire_harness import target


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--n", type=int, default=20_000, help="events in the drained backlog")
    parser.add_argument("--window", type=float, default=10.0, help="seconds a drain is timed")
    parser.add_argument("--writes", type=int, default=20_000, help="end-to-end writes")
    parser.add_argument("--skip-e2e", action="store_true", help="measure drain-only alone")
    parser.add_argument("--skip-per-event", action="store_true", help="the defaults alone")
    args = parser.parse_args()
    t = target(args.store)
    setups = [DEFAULTS] if args.skip_per_event else [DEFAULTS, PER_EVENT]
    drains: dict[str, list[dict[str, Any]]] = {s.name: [] for s in setups}
    e2es: list[dict[str, Any]] = []
    for run in range(args.runs):
        log(f"throughput on {t.label}, run {run + 1}/{args.runs}: {args.n:,} events")
        for setup in setups:
            drains[setup.name].append(
                drain_only(t, "noop", args.n, args.max_seconds, window=args.window, setup=setup)
            )
            describe_run(f"drain-only, {setup.name}", drains[setup.name][-1])
        if not args.skip_e2e:
            e2es.append(end_to_end(t, "noop", args.writes, args.max_seconds))
            describe_run("end to end", e2es[-1])
    result: dict[str, Any] = {
        "scenario": "throughput",
        "store": args.store,
        "n": args.n,
        "window": args.window,
        "workers": DEFAULTS.label,
        "drain_only": summarize([d["rate"] for d in drains["defaults"]]),
        "commits_per_event": summarize([d["commits_per_event"] for d in drains["defaults"]]),
        "drain_runs": drains["defaults"],
        "capped": any(d["capped"] for d in drains["defaults"] + e2es),
        "setups": {
            s.name: {
                "label": s.label,
                "slots": s.slots,
                "drain_only": summarize([d["rate"] for d in drains[s.name]]),
                "commits_per_event": summarize([d["commits_per_event"] for d in drains[s.name]]),
                "runs": drains[s.name],
            }
            for s in setups
        },
    }
    if e2es:
        result["writes"] = args.writes
        result["end_to_end"] = summarize([e["rate"] for e in e2es])
        result["producer_write_rate"] = summarize([e["write_rate"] for e in e2es])
        result["e2e_runs"] = e2es
    write_json(args.json, result)


if __name__ == "__main__":
    main()
