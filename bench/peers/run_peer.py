"""Drive one peer through the same measurements as oncefire.

Runs in bench/.venv-peers (which bench/run_all makes), never in oncefire's environment:

    bench/.venv-peers/bin/python bench/peers/run_peer.py --peer celery --n 30000 --runs 3

drain-only: N no-op jobs are enqueued with no worker running, the workers start (16
execution slots, as oncefire's), and once 2.5 % of the jobs have run the jobs done within a
fixed window (--window seconds) are counted, as for oncefire; the commits the workers made
from their start to their stop are counted per job done.
end to end: warm workers, one producer enqueues N jobs one by one, timed until all ran.
latency: enqueue acknowledged -> job start, one job at a time on an idle worker.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, cast

PEERS = Path(__file__).resolve().parent
sys.path.insert(0, str(PEERS.parent))
sys.path.insert(0, str(PEERS))

from benchlib import (  # noqa: E402
    LatencyProbe,
    common_args,
    log,
    measure_latency,
    phase,
    summarize,
    time_drain,
    time_window,
    wait_until,
    write_json,
)
from commits import per_event  # noqa: E402
from peer import SLOTS, Peer  # noqa: E402
from redis_peers import CeleryPeer, CeleryThreadsPeer, DramatiqPeer, RqPeer  # noqa: E402
from sql_peers import HueyPeer, ProcrastinatePeer  # noqa: E402

PEER_TYPES: dict[str, type[Peer]] = {
    p.name: p
    for p in (ProcrastinatePeer, CeleryPeer, CeleryThreadsPeer, DramatiqPeer, HueyPeer, RqPeer)
}


def fill(peer: Peer, n: int) -> None:
    """The peer's queue holding n no-op jobs and nothing else."""
    if isinstance(peer, HueyPeer):
        peer.fill(n)
    else:
        peer.reset()
        peer.enqueue_noop(n, bulk=True)
    wait_until(lambda: peer.backlog() >= n, 30, "the enqueued jobs to show")


def drain_only(peer: Peer, n: int, max_seconds: float, window: float) -> dict[str, Any]:
    with phase(f"reset and enqueue {n:,} jobs"):
        fill(peer, n)
        peer.prepare()
    counter = peer.commits()
    peer.quiesce()
    before = counter.settled() if counter else 0
    with (
        phase("start workers, drain, stop workers"),
        peer.workers(
            "drain",
            counter.env if counter else None,
            counter.path if counter else "",
        ),
    ):
        result = time_window(peer.backlog, peer.has_work, n, warmup=max(1, n // 40), window=window)
    if counter:
        own = peer.own_transactions()
        peer.quiesce()
        after = counter.settled()
        result["commits_per_event"] = per_event(before, after, own, n - peer.backlog())
    done = n - peer.backlog()
    result["events_done_by_stop"] = done
    return result


def end_to_end(peer: Peer, n: int, max_seconds: float, warmup: int = 200) -> dict[str, Any]:
    peer.reset()
    with peer.workers("e2e"):
        peer.enqueue_noop(warmup, bulk=True)
        wait_until(lambda: peer.backlog() == 0, 120, "the warm-up jobs to drain")
        time.sleep(0.3)
        t0 = time.monotonic()
        peer.enqueue_noop(n, bulk=False)
        write_seconds = time.monotonic() - t0
        result = time_drain(peer.backlog, n, warmup=0, max_seconds=max_seconds, started=t0)
    result["write_rate"] = n / write_seconds
    return result


def latency(peer: Peer, count: int, warmup: int) -> dict[str, Any]:
    peer.reset()
    probe = LatencyProbe()
    try:
        with phase("latency, workers started and stopped"), peer.workers("latency", probe.env):
            # Workers are up once a first job has run.
            peer.enqueue_latency("ready")
            if probe.wait_for("ready", timeout=60) is None:
                raise TimeoutError(f"{peer.name} workers did not start within 60 s")
            time.sleep(0.5)
            return measure_latency(
                peer.enqueue_latency, probe, count=count, warmup=warmup, prefix=peer.name
            )
    finally:
        probe.close()


def main() -> None:
    parser = common_args(__doc__ or "")
    parser.add_argument("--peer", choices=sorted(PEER_TYPES), required=True)
    parser.add_argument("--n", type=int, default=20_000, help="jobs in the drained backlog")
    parser.add_argument("--window", type=float, default=10.0, help="seconds a drain is timed")
    parser.add_argument("--latency-writes", type=int, default=500)
    parser.add_argument("--skip-e2e", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    peer = PEER_TYPES[args.peer]()
    drains: list[dict[str, Any]] = []
    e2es: list[dict[str, Any]] = []
    lats: list[dict[str, Any]] = []
    try:
        for run in range(args.runs):
            log(f"{peer.name}, run {run + 1}/{args.runs}: {args.n:,} jobs")
            drains.append(drain_only(peer, args.n, args.max_seconds, args.window))
            commits = drains[-1].get("commits_per_event")
            log(
                f"  drain-only: {drains[-1]['rate'] or 0:,.0f}/s"
                + (f", {commits:.2f} commits/job" if commits is not None else "")
            )
            if not args.skip_e2e:
                e2es.append(end_to_end(peer, args.n, args.max_seconds))
                log(f"  end to end: {e2es[-1]['rate'] or 0:,.0f}/s")
            if not args.skip_latency:
                lats.append(latency(peer, args.latency_writes, warmup=20))
                log(f"  latency p50 {lats[-1]['p50_ms']:.2f} ms, p99 {lats[-1]['p99_ms']:.2f} ms")
    finally:
        peer.close()
    result: dict[str, Any] = {
        "scenario": "peer",
        "peer": peer.name,
        "label": peer.label,
        "broker": peer.broker,
        "config": peer.config,
        "setup": peer.setup,
        "crash": peer.crash,
        "slots": SLOTS,
        "versions": versions(peer.packages),
        "n": args.n,
        "window": args.window,
        "drain_only": summarize([d["rate"] for d in drains]),
        "drain_runs": drains,
        "capped": any(d.get("capped") for d in drains + e2es),
    }
    if any("commits_per_event" in d for d in drains):
        result["commits_per_event"] = summarize(
            [cast(float, d.get("commits_per_event")) for d in drains]
        )
    if e2es:
        result["end_to_end"] = summarize([e["rate"] for e in e2es])
        result["e2e_runs"] = e2es
    if lats:
        result["latency_p50_ms"] = summarize([r["p50_ms"] for r in lats])
        result["latency_p99_ms"] = summarize([r["p99_ms"] for r in lats])
        result["latency_runs"] = lats
    write_json(args.json, result)


def versions(packages: tuple[str, ...]) -> dict[str, str]:
    """The installed versions of these packages."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in packages:
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "?"
    return out


if __name__ == "__main__":
    main()
