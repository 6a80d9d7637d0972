"""The fault-point sweep's count, printed after the run (by tests/conftest.py, which the
process that reports sees: under xdist the tests run in other processes)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest


@pytest.fixture
def fault_points(request: pytest.FixtureRequest) -> Iterator[Counter[str]]:
    """Fault points covered per "path [store]", for the summary."""
    counts: Counter[str] = Counter()
    yield counts
    request.node.user_properties.append(("fault_points", dict(counts)))
