"""The growth benchmark's loaded/empty ratio: a run whose drain was not timed (a smoke run's
few hundred events can drain between two counts) gives no ratio, not a division by zero."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

GROWTH = Path(__file__).resolve().parents[2] / "bench" / "growth.py"


def growth() -> Any:
    """bench/growth.py, loaded with bench/'s own modules (tests have a `harness` of their
    own, which may be imported already); sys.modules is left as it was."""
    names = {path.stem for path in GROWTH.parent.glob("*.py")}
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    sys.path.insert(0, str(GROWTH.parent))
    try:
        spec = importlib.util.spec_from_file_location("bench_growth", GROWTH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(GROWTH.parent))
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


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
