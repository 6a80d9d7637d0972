"""Drive one peer (Celery, Dramatiq or Procrastinate) through the same measurements as oncefire.

Runs in bench/.venv-peers (which bench/run_all makes), never in oncefire's environment:

    bench/.venv-peers/bin/python bench/peers/run_peer.py --peer celery --n 20000 --runs 3

drain-only: N no-op jobs are enqueued with no worker running, 2 worker processes start, and
the drain is timed from the moment 2.5 % of the jobs have run to the last, as for oncefire.
end to end: warm workers, one producer enqueues N jobs one by one, timed until all ran.
latency: enqueue acknowledged -> job start, one job at a time on an idle worker.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent
sys.path.insert(0, str(PEERS.parent))
sys.path.insert(0, str(PEERS))

from benchlib import (  # noqa: E402
    PROCRASTINATE_PG_DB,
    REDIS_URL,
    WORK,
    LatencyProbe,
    common_args,
    ensure_database,
    log,
    measure_latency,
    pg_url,
    phase,
    running,
    summarize,
    time_drain,
    wait_until,
    write_json,
)

PROCESSES = 2
# Seconds a peer's workers get to stop after SIGTERM before SIGKILL. They are stopped only
# once their measurement is over, and the queue is reset before the next one, so a slow
# graceful shutdown (Celery's warm shutdown with a backlog left took the whole 20 s) only
# wastes time.
STOP_GRACE = 2.0
THREADS = 8  # per process, for the peers that run threads (oncefire's default too)


class Peer:
    """One queue: how to reset it, run its workers, enqueue and count its backlog."""

    name = ""
    config = ""

    def reset(self) -> None:
        raise NotImplementedError

    def worker_commands(self) -> list[list[str]]:
        raise NotImplementedError

    def enqueue_noop(self, count: int, *, bulk: bool) -> None:
        raise NotImplementedError

    def enqueue_latency(self, key: str) -> None:
        raise NotImplementedError

    def backlog(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass

    @contextmanager
    def workers(self, what: str, env: dict[str, str] | None = None) -> Iterator[None]:
        """The peer's worker processes, stopped with SIGTERM on exit."""
        WORK.mkdir(parents=True, exist_ok=True)
        logs = [WORK / f"peer-{self.name}-{what}-{i}.log" for i in range(PROCESSES)]
        commands = self.worker_commands()
        with _all_running(commands, logs, env or {}):
            yield


@contextmanager
def _all_running(
    commands: list[list[str]], logs: list[Path], extra: dict[str, str]
) -> Iterator[None]:
    if not commands:
        yield
        return
    env = {"PYTHONPATH": f"{PEERS}:{PEERS.parent}", **extra}
    with (
        running(commands[0], env=env, log_path=logs[0], grace=STOP_GRACE),
        _all_running(commands[1:], logs[1:], extra),
    ):
        yield


class RedisPeer(Peer):
    def __init__(self) -> None:
        import redis

        self.redis = redis.Redis.from_url(REDIS_URL)

    def reset(self) -> None:
        self.redis.flushdb()  # db 13: the benchmarks' own

    def close(self) -> None:
        self.redis.close()


class CeleryPeer(RedisPeer):
    name = "celery"
    config = (
        "Redis broker, task_acks_late=True, prefork pool --concurrency 2 "
        "(2 worker processes), default prefetch"
    )

    def __init__(self) -> None:
        super().__init__()
        import celery_app

        self.app = celery_app

    def worker_commands(self) -> list[list[str]]:
        return [
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "celery_app",
                "worker",
                "--pool",
                "prefork",
                "--concurrency",
                str(PROCESSES),
            ]
        ]

    def enqueue_noop(self, count: int, *, bulk: bool) -> None:
        task = self.app.noop
        for _ in range(count):
            task.apply_async()

    def enqueue_latency(self, key: str) -> None:
        self.app.latency.apply_async((key,))

    def backlog(self) -> int:
        # Queued messages plus delivered-but-unacknowledged ones (acks_late keeps a running
        # task's message in the unacked hash until it has finished).
        pipe = self.redis.pipeline()
        pipe.llen("celery")
        pipe.hlen("unacked")
        queued, unacked = pipe.execute()
        return int(queued) + int(unacked)


class DramatiqPeer(RedisPeer):
    name = "dramatiq"
    config = f"Redis broker, {PROCESSES} processes x {THREADS} threads, default middleware"

    def __init__(self) -> None:
        super().__init__()
        import dramatiq_app

        self.app = dramatiq_app

    def worker_commands(self) -> list[list[str]]:
        return [
            [
                sys.executable,
                "-m",
                "dramatiq",
                "dramatiq_app",
                "--processes",
                str(PROCESSES),
                "--threads",
                str(THREADS),
            ]
        ]

    def enqueue_noop(self, count: int, *, bulk: bool) -> None:
        actor = self.app.noop
        for _ in range(count):
            actor.send()

    def enqueue_latency(self, key: str) -> None:
        self.app.latency.send(key)

    def backlog(self) -> int:
        # A message stays in the queue's .msgs hash until a worker acknowledges it.
        return int(self.redis.hlen("dramatiq:default.msgs"))


class ProcrastinatePeer(Peer):
    name = "procrastinate"
    config = (
        f"PostgreSQL (synchronous_commit on), {PROCESSES} worker processes x concurrency "
        f"{THREADS}, LISTEN/NOTIFY on"
    )

    def __init__(self) -> None:
        import psycopg

        ensure_database(PROCRASTINATE_PG_DB)
        self.url = pg_url(PROCRASTINATE_PG_DB)
        self.conn = psycopg.connect(self.url, autocommit=True)
        import procrastinate_app

        self.module = procrastinate_app
        self.is_open = False

    def _open(self) -> None:
        if not self.is_open:
            self.module.app.open()
            self.is_open = True

    def reset(self) -> None:
        if self.is_open:
            self.module.app.close()
            self.is_open = False
        self.conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        self.conn.execute("CREATE SCHEMA public")
        self._open()
        self.module.app.schema_manager.apply_schema()

    def worker_commands(self) -> list[list[str]]:
        cmd = [
            sys.executable,
            "-m",
            "procrastinate",
            "--app",
            "procrastinate_app.app",
            "worker",
            "--concurrency",
            str(THREADS),
        ]
        return [cmd for _ in range(PROCESSES)]

    def enqueue_noop(self, count: int, *, bulk: bool) -> None:
        self._open()
        task = self.module.noop
        if bulk:
            for start in range(0, count, 1000):
                task.batch_defer(*({} for _ in range(min(1000, count - start))))
        else:
            for _ in range(count):
                task.defer()

    def enqueue_latency(self, key: str) -> None:
        self._open()
        self.module.latency.defer(key=key)

    def backlog(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        if self.is_open:
            self.module.app.close()
        self.conn.close()


PEER_TYPES: dict[str, type[Peer]] = {
    "celery": CeleryPeer,
    "dramatiq": DramatiqPeer,
    "procrastinate": ProcrastinatePeer,
}


def drain_only(peer: Peer, n: int, max_seconds: float) -> dict[str, Any]:
    with phase(f"reset and enqueue {n:,} jobs"):
        peer.reset()
        peer.enqueue_noop(n, bulk=True)
        wait_until(lambda: peer.backlog() >= n, 30, "the enqueued jobs to show")
    with phase("start workers, drain, stop workers"), peer.workers("drain"):
        return time_drain(peer.backlog, n, warmup=max(1, n // 40), max_seconds=max_seconds)


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
    parser.add_argument("--n", type=int, default=20_000)
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
            drains.append(drain_only(peer, args.n, args.max_seconds))
            log(f"  drain-only: {drains[-1]['rate'] or 0:,.0f}/s")
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
        "config": peer.config,
        "versions": versions(peer.name),
        "n": args.n,
        "drain_only": summarize([d["rate"] for d in drains]),
        "drain_runs": drains,
        "capped": any(d.get("capped") for d in drains + e2es),
    }
    if e2es:
        result["end_to_end"] = summarize([e["rate"] for e in e2es])
        result["e2e_runs"] = e2es
    if lats:
        result["latency_p50_ms"] = summarize([r["p50_ms"] for r in lats])
        result["latency_p99_ms"] = summarize([r["p99_ms"] for r in lats])
        result["latency_runs"] = lats
    write_json(args.json, result)


def versions(name: str) -> dict[str, str]:
    """The versions of the peer and its client libraries."""
    from importlib.metadata import PackageNotFoundError, version

    wanted = {
        "celery": ["celery", "kombu", "redis"],
        "dramatiq": ["dramatiq", "redis"],
        "procrastinate": ["procrastinate", "psycopg"],
    }[name]
    out = {}
    for package in wanted:
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "?"
    return out


if __name__ == "__main__":
    main()
