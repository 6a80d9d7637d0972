"""Load a module of bench/ in a test, with bench/'s own modules, fresh: a test may have
imported a module of the same name already. sys.modules and sys.path are left as they were."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(name: str) -> Any:
    """bench/<name>.py as a fresh module."""
    names = {path.stem for path in BENCH.glob("*.py")}
    saved = {other: sys.modules.pop(other) for other in names if other in sys.modules}
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))
        for other in names:
            sys.modules.pop(other, None)
        sys.modules.update(saved)
