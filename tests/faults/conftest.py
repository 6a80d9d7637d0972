"""The fault-point sweep's count, printed after the run."""

from __future__ import annotations

from collections import Counter

import pytest

COUNTS = pytest.StashKey[Counter[str]]()


@pytest.fixture
def fault_points(request: pytest.FixtureRequest) -> Counter[str]:
    """Fault points covered per "path [store]", for the summary."""
    return request.config.stash.setdefault(COUNTS, Counter())


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Print the number of fault points covered, per path and in all."""
    counts = config.stash.get(COUNTS, None)
    if not counts:
        return
    terminalreporter.section("fault-point sweep")
    for name, n in sorted(counts.items()):
        terminalreporter.write_line(f"{name}: {n} fault points")
    terminalreporter.write_line(f"fault points covered: {sum(counts.values())}")
