"""Fixtures of the command-line tests: a store, `oncefire` run on it, dead letters in it, and
the installed wheel."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from oncefire import App
from oncefire.events import Event
from oncefire.testing import TestClock
from tests.e2e.cli_support import ONCEFIRE, Run
from tests.wheel_env import WheelEnv, installed_wheel


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/cli.db"


@pytest.fixture
def run(tmp_path: Path, store: str) -> Run:
    """Run `oncefire ARGS --store STORE` (unless with_store=False) in a clean environment."""

    def invoke(
        *args: str,
        with_store: bool = True,
        env: dict[str, str] | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
        environment.update(env or {})
        argv = [ONCEFIRE, *args, *(["--store", store] if with_store else [])]
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=environment,
            cwd=tmp_path,
            timeout=120,
            input=input if input is not None else "",
        )

    return invoke


@pytest.fixture
def dead_letters(store: str) -> list[int]:
    """Two dead letters of `charge` (orders o1, o2) and one of `ship`, written in-process."""
    app = App(store, clock=TestClock())

    @app.on_document_created("orders/{o}", retry=False)
    def charge(event: Event) -> None:
        raise ValueError(f"card declined for {event.params['o']}")

    @app.on_document_created("shipments/{s}", retry=False)
    def ship(event: Event) -> None:
        raise ConnectionError("carrier down")

    for path in ("orders/o1", "orders/o2", "shipments/s1"):
        app.db.document(path).set({"path": path})
    app.drain()
    ids = [d.id for d in app.dead_letters.list()]
    app.close()
    return ids


@pytest.fixture(scope="session")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> WheelEnv:
    """oncefire's wheel installed in a fresh virtualenv, made once per test run."""
    base = tmp_path_factory.getbasetemp()
    # xdist workers each have a folder in the run's: the wheel goes into the run's.
    return installed_wheel(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)
