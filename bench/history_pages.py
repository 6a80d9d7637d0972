"""Where new deliveries land in a PostgreSQL store with a history oncefire itself wrote: N
events written and drained through oncefire, the deliveries' table vacuumed, then --new more
written. Prints the history's pages, those with room for a pending delivery beyond the
fillfactor's reserve, and the pages the new pending deliveries lie on (the growth
benchmark's cloned history is checked against this: bench/growth_seed.py).

    BENCH_PG_PORT=55432 python bench/history_pages.py --n 300000 --new 5000
"""

from __future__ import annotations

import workload
from benchlib import common_args, log
from growth import backlog_pages
from harness import prefill, reset, target

from oncefire.worker import Worker

ROUND = 50_000  # events written, then drained, at a time


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--n", type=int, default=300_000)
    parser.add_argument("--new", type=int, default=5_000)
    args = parser.parse_args()
    t = target("postgres", "oncefire_history_pages")
    reset(t)
    app = workload.build(t.url, "noop")
    try:
        for k in range(0, args.n, ROUND):
            prefill(app, min(ROUND, args.n - k), prefix=f"h{k}-")
            Worker(app.runtime).drain()
        import psycopg

        with psycopg.connect(t.url, autocommit=True) as conn:
            conn.execute("VACUUM oncefire_deliveries")
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_freespacemap")
            pages, roomy = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE avail >= 1024)"
                " FROM pg_freespace('oncefire_deliveries')"
            ).fetchone() or (0, 0)
        prefill(app, args.new, prefix="new-")
        log(
            f"{args.n:,} deliveries written and drained lie on {pages:,} pages, {roomy:,} of"
            f" them with 1 KiB free or more; {args.new:,} new pending deliveries lie on"
            f" {backlog_pages(t):,} pages"
        )
    finally:
        app.close()


if __name__ == "__main__":
    main()
