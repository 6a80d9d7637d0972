"""Serve an app: one worker in this process, or N supervised worker processes."""

from __future__ import annotations

import os

from oncefire.loader import load_app


def serve(target: str, *, store: str | None, processes: int, concurrency: int | None) -> None:
    """Run the app's workers until SIGTERM or SIGINT."""
    if store:
        os.environ["ONCEFIRE_STORE"] = store
    app = load_app(target)
    app.run_worker(concurrency=concurrency)
