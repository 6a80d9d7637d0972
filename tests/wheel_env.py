"""oncefire's wheel, built from a copy of the checkout and installed with its dependencies into
a fresh virtualenv that sees nothing of the interpreter running the tests.

Made once per test run: the first pytest process (xdist worker) to ask builds it under a file
lock in the run's shared temporary folder; the others find it there. The dependencies come from
the package index pip is configured with (and pip's cache).
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class WheelEnv:
    """The built wheel and the virtualenv it is installed in."""

    wheel: Path
    env: Path

    @property
    def python(self) -> Path:
        return self.env / "bin" / "python"

    @property
    def oncefire(self) -> Path:
        return self.env / "bin" / "oncefire"


def _run(*argv: str | Path) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed:\n{done.stdout}\n{done.stderr}")


def _build(folder: Path) -> WheelEnv:
    # A copy of what the build reads, so that no earlier build's leftovers (build/, an
    # egg-info) in the checkout can put into the wheel a file the package data leaves out.
    tree = folder / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    ignored = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "src", tree / "src", ignore=ignored)
    wheels = folder / "wheels"
    pip = (sys.executable, "-m", "pip")
    _run(*pip, "wheel", tree, "--no-deps", "--no-build-isolation", "-q", "-w", wheels)
    [wheel] = wheels.glob("oncefire-*.whl")
    env = folder / "env"
    _run(sys.executable, "-m", "venv", "--without-pip", env)  # no system site-packages
    _run(*pip, "--python", env / "bin" / "python", "install", "-q", wheel)
    return WheelEnv(wheel, env)


def installed_wheel(shared: Path) -> WheelEnv:
    """The run's wheel and virtualenv, under `shared` (a folder every process of the run sees)."""
    folder = shared / "oncefire-wheel"
    with open(shared / "oncefire-wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = folder / "ready"
        if ready.exists():
            return WheelEnv(Path(ready.read_text()), folder / "env")
        if folder.exists():
            shutil.rmtree(folder)  # an earlier attempt that failed halfway
        folder.mkdir()
        made = _build(folder)
        ready.write_text(str(made.wheel))
        return made
