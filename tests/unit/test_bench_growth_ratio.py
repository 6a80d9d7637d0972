"""The growth benchmark's loaded/empty ratio: a run whose drain was not timed (a smoke run's
few hundred events can drain between two counts) gives no ratio, not a division by zero."""

from __future__ import annotations

from typing import Any

from tests.bench_modules import load_bench


def growth() -> Any:
    return load_bench("growth")


def test_a_run_not_timed_gives_no_ratio() -> None:
    g = growth()
    assert g.ratio([0.0], [14_000.0]) is None
    assert g.ratio([10_000.0, None], [9_000.0, 9_500.0]) is None
    assert g.said(None) == "not timed"


def test_timed_runs_give_their_ratio_and_spread() -> None:
    r = growth().ratio([10_000.0, 12_000.0], [9_000.0, 11_000.0])
    assert r is not None
    assert (round(r["ratio"], 3), round(r["low"], 2), round(r["high"], 2)) == (0.909, 0.75, 1.1)
    assert r["reads"] == "no measurable change"
