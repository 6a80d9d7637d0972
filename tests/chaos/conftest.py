"""Fixtures of the chaos suite: the profile, and a store of each kind with a ledger folder."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import FULL, QUICK, Profile

_databases = itertools.count()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is a chaos test; those with a ledger folder start worker processes, and
    take seconds (left out of the quick run)."""
    for item in items:
        if "tests/chaos/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.chaos)
            if "folder" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.e2e)
                item.add_marker(pytest.mark.slow)


@pytest.fixture
def profile(request: pytest.FixtureRequest) -> Profile:
    """Quick by default, long with --full."""
    return FULL if request.config.getoption("--full") else QUICK


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The ledger folder of this test."""
    path = tmp_path / "ledger"
    path.mkdir()
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def chaos_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh SQLite file, or a fresh database on the private PostgreSQL cluster."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/chaos.db"
    cluster: Any = request.getfixturevalue("pg_cluster")
    return str(cluster.create_database(f"chaos_{next(_databases)}"))
