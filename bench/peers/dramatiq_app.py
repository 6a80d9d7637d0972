"""Dramatiq on its Redis broker: the no-op and latency actors."""

from __future__ import annotations

import sys
from pathlib import Path

import dramatiq
from dramatiq.brokers.redis import RedisBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import REDIS_URL, report_start

broker = RedisBroker(url=REDIS_URL)
dramatiq.set_broker(broker)


@dramatiq.actor(actor_name="noop")  # type: ignore[untyped-decorator]  # dramatiq: a peer library, absent when type-checking
def noop() -> None:
    """Does nothing."""


@dramatiq.actor(actor_name="latency")  # type: ignore[untyped-decorator]  # dramatiq: a peer library, absent when type-checking
def latency(key: str) -> None:
    """Reports its start to the latency probe."""
    report_start(key)
