"""The dashboard's store calls, run in threads of its own: never on the event loop it may share
with the app's HTTP functions, and never more than STORE_THREADS at once, so a burst of slow
dashboard requests cannot take every connection of the store's pool from those functions."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter
from anyio.lowlevel import RunVar
from starlette.requests import Request
from starlette.responses import Response

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R", bound=Response)
STORE_THREADS = 4  # dashboard requests reading the store at once; the others wait their turn

_limiter: RunVar[CapacityLimiter] = RunVar("oncefire_dashboard_threads")


def limiter() -> CapacityLimiter:
    """The dashboard's threads on the running event loop (one limiter a loop, as anyio's own)."""
    try:
        return _limiter.get()
    except LookupError:
        made = CapacityLimiter(STORE_THREADS)
        _limiter.set(made)
        return made


async def in_thread(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """fn(*args, **kwargs) in one of the dashboard's threads."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=limiter())


def off_loop(endpoint: Callable[[Request], R]) -> Callable[[Request], Awaitable[R]]:
    """A plain endpoint as an async one that runs it in one of the dashboard's threads."""

    @functools.wraps(endpoint)
    async def run(request: Request) -> R:
        return await in_thread(endpoint, request)

    return run
