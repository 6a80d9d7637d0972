"""A worker says how its work goes every few seconds while it runs attempts: attempts done,
their rate, the backlog left; and says nothing while idle."""

from __future__ import annotations

import logging

import pytest

from oncefire import App
from oncefire.engine.progress import INTERVAL, Progress
from oncefire.engine.worker import Worker
from oncefire.events import Event


class Ticks:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def progress_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "oncefire.engine.progress"]


def test_a_line_every_interval_while_attempts_end_and_none_while_idle(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.on_message("orders")
    def take(event: Event) -> None:
        pass

    for n in range(5):
        app.publish("orders", {"n": n})
    ticks = Ticks()
    progress = Progress(app.runtime, "worker w", ["take"], clock=ticks)
    caplog.set_level(logging.INFO, logger="oncefire.engine.progress")
    ticks.now = INTERVAL - 0.1
    progress.tick(2)  # too soon
    ticks.now = 2 * INTERVAL
    progress.tick(2)
    ticks.now = 3 * INTERVAL
    progress.tick(2)  # nothing ran meanwhile: idle, silent
    ticks.now = 4 * INTERVAL
    progress.tick(3)
    assert progress_lines(caplog) == [
        "worker w: 2 attempts done (0.2/s), 5 pending left",
        "worker w: 3 attempts done (0.2/s), 5 pending left",
    ]


def test_a_drain_reports_through_its_maintenance(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.on_message("orders")
    def take(event: Event) -> None:
        pass

    @app.on_message("other")
    def other(event: Event) -> None:
        pass

    for n in range(3):
        app.publish("orders", {"n": n})
    app.publish("other", {})
    worker = Worker(app.runtime, functions=["take"])
    ticks = Ticks()
    worker.progress = Progress(app.runtime, "worker w", worker.functions, clock=ticks)
    caplog.set_level(logging.INFO, logger="oncefire.engine.progress")
    assert worker.drain().attempts == 3
    assert progress_lines(caplog) == []  # no time passed
    ticks.now = INTERVAL
    worker.maintain()
    worker.maintain()  # once an interval
    assert progress_lines(caplog) == ["worker w: 3 attempts done (0.6/s), 0 pending left"]


def test_a_bulk_replay_counts_as_it_goes(
    app: App, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from click.testing import CliRunner

    dlq_cli = importlib.import_module("oncefire.cli.dlq")  # the package's `dlq` is the group

    @app.on_message("orders", retry=False)
    def refuse(event: Event) -> None:
        raise ValueError("refused")

    for n in range(5):
        app.publish("orders", {"n": n})
    app.drain()
    assert app.dead_letters.count() == 5
    monkeypatch.setattr(dlq_cli, "BATCH", 2)
    result = CliRunner().invoke(dlq_cli.dlq, ["replay", "--all", "--yes", "--store", store_url])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "replayed 5"
    assert result.stderr.splitlines()[-3:] == [
        "replayed 2 of 5",
        "replayed 4 of 5",
        "replayed 5 of 5",
    ]
    assert app.dead_letters.count() == 0
