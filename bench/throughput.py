"""Scenario 1, throughput: N document writes, each triggering one no-op function.

drain-only: the N events are written (untimed) with no worker running; then
`oncefire worker --processes 2` starts, and the drain is timed from the moment the first
2.5 % have run (start-up excluded) to the last.
end to end: the 2 worker processes are running and warm; one producer writes the N
documents one transaction each; timed from the first write to the last function run.

    python bench/throughput.py --store sqlite --n 20000 --runs 3 --json out.json
"""

from __future__ import annotations

from typing import Any

from benchlib import common_args, log, summarize, write_json
from harness import describe_run, drain_only, end_to_end, target


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--skip-e2e", action="store_true", help="measure drain-only alone")
    args = parser.parse_args()
    t = target(args.store)
    drains: list[dict[str, Any]] = []
    e2es: list[dict[str, Any]] = []
    for run in range(args.runs):
        log(f"throughput on {t.label}, run {run + 1}/{args.runs}: {args.n:,} events")
        drains.append(drain_only(t, "noop", args.n, args.max_seconds))
        describe_run("drain-only", drains[-1])
        if not args.skip_e2e:
            e2es.append(end_to_end(t, "noop", args.n, args.max_seconds))
            describe_run("end to end", e2es[-1])
    result = {
        "scenario": "throughput",
        "store": args.store,
        "n": args.n,
        "workers": "2 processes x 8 threads (oncefire defaults)",
        "drain_only": summarize([d["rate"] for d in drains]),
        "drain_runs": drains,
        "capped": any(d["capped"] for d in drains + e2es),
    }
    if e2es:
        result["end_to_end"] = summarize([e["rate"] for e in e2es])
        result["producer_write_rate"] = summarize([e["write_rate"] for e in e2es])
        result["e2e_runs"] = e2es
    write_json(args.json, result)


if __name__ == "__main__":
    main()
