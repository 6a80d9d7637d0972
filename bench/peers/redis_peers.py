"""The peers on the Redis broker: Celery (prefork, and threads), Dramatiq and RQ."""

from __future__ import annotations

import sys

from benchlib import REDIS_URL
from peer import PROCESSES, SLOTS, THREADS, Peer


class RedisPeer(Peer):
    broker = "Redis"

    def __init__(self) -> None:
        import redis

        self.redis = redis.Redis.from_url(REDIS_URL)

    def reset(self) -> None:
        self.redis.flushdb()  # db 13: the benchmarks' own

    def close(self) -> None:
        self.redis.close()


class CeleryPeer(RedisPeer):
    name = "celery"
    label = "Celery (prefork)"
    setup = f"1 worker, prefork pool of {SLOTS} processes"
    packages = ("celery", "kombu", "redis")
    config = (
        f"Redis broker, task_acks_late=True, prefork pool --concurrency {SLOTS} "
        f"({SLOTS} child processes), default prefetch"
    )
    crash = (
        "a job acknowledged after it ran (acks_late): a worker's crash runs its unacknowledged "
        "jobs again, prefetched ones included, once Redis's visibility timeout (1 hour) has "
        "passed"
    )

    def __init__(self) -> None:
        super().__init__()
        import celery_app

        self.app = celery_app

    def worker_commands(self) -> list[list[str]]:
        return [self._worker("prefork", SLOTS)]

    def _worker(self, pool: str, concurrency: int, node: str = "bench") -> list[str]:
        return [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "celery_app",
            "worker",
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
            "--hostname",
            f"{node}@%h",
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


class CeleryThreadsPeer(CeleryPeer):
    name = "celery-threads"
    label = "Celery (threads)"
    setup = f"{PROCESSES} workers x threads pool of {THREADS}"
    config = (
        f"Redis broker, task_acks_late=True, {PROCESSES} worker processes x threads pool "
        f"--concurrency {THREADS}, default prefetch"
    )

    def worker_commands(self) -> list[list[str]]:
        return [self._worker("threads", THREADS, f"bench{i}") for i in range(PROCESSES)]


class DramatiqPeer(RedisPeer):
    name = "dramatiq"
    label = "Dramatiq"
    setup = f"{PROCESSES} processes x {THREADS} threads"
    packages = ("dramatiq", "redis")
    config = f"Redis broker, {PROCESSES} processes x {THREADS} threads, default middleware"
    crash = (
        "a message acknowledged after its job ran: a worker's crash runs its unacknowledged "
        "messages again (prefetched ones included) once another worker requeues them"
    )

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


class RqPeer(RedisPeer):
    name = "rq"
    label = "RQ"
    setup = f"worker pool of {SLOTS} processes, a fork per job"
    packages = ("rq", "redis")
    config = (
        f"Redis, `rq worker-pool -n {SLOTS}` ({SLOTS} worker processes, one job at a time "
        "each, a forked work horse per job: the default worker class)"
    )
    crash = (
        "a job moves to the started registry when taken: a worker's crash leaves it there "
        "until it is cleaned up as failed (not run again unless retried)"
    )

    def __init__(self) -> None:
        super().__init__()
        import rq_app

        self.app = rq_app

    def worker_commands(self) -> list[list[str]]:
        return [
            [
                sys.executable,
                "-m",
                "rq.cli",
                "worker-pool",
                "--url",
                REDIS_URL,
                "-n",
                str(SLOTS),
                "default",
            ]
        ]

    def enqueue_noop(self, count: int, *, bulk: bool) -> None:
        queue, noop = self.app.queue(self.redis), self.app.noop
        for _ in range(count):
            queue.enqueue(noop)

    def enqueue_latency(self, key: str) -> None:
        self.app.queue(self.redis).enqueue(self.app.latency, key)

    def backlog(self) -> int:
        # Queued, taken by a worker (the intermediate list, then the started registry).
        pipe = self.redis.pipeline()
        pipe.llen("rq:queue:default")
        pipe.llen("rq:queue:default:intermediate")
        pipe.zcard("rq:wip:default")
        return sum(int(n) for n in pipe.execute())
