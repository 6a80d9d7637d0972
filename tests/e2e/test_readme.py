"""The README's quickstart, copied as written into a file and run, works and shows its
failures without any logging set up by the user."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from cli_support import Run

README = Path(__file__).resolve().parents[2] / "README.md"


def quickstart() -> str:
    """The first python code block under '## Quickstart'."""
    text = README.read_text()
    section = text[text.index("## Quickstart") :]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return found.group(1)


def run_script(folder: Path) -> subprocess.CompletedProcess[str]:
    """`python shop.py` in folder, with no ONCEFIRE_* variable set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    return subprocess.run(
        [sys.executable, "shop.py"],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=120,
    )


def test_the_readme_quickstart_runs_as_written(tmp_path: Path, run: Run) -> None:
    (tmp_path / "shop.py").write_text(quickstart())
    result = run_script(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "charged 500" in result.stdout
    # The failed attempt is visible with no logging configured, and so is the summary.
    assert "order has no amount" in result.stderr
    assert "dead letter" in result.stderr
    assert "succeeded" in result.stdout and "permanent" in result.stdout
    listing = run("dlq", "list", with_store=False)  # ./oncefire.db, beside shop.py
    assert listing.returncode == 0, listing.stderr
    assert "order has no amount" in listing.stdout


RETRIED = """
from oncefire import App

app = App()


@app.on_document_created("orders/{o}")
def charge(event):
    raise ValueError("gateway down")


app.db.document("orders/o1").set({"amount": 5})
app.drain()
"""


def test_a_retried_failure_shows_on_stderr_with_no_logging_configured(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(RETRIED)
    result = run_script(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ValueError: gateway down; next attempt in 60.0 s" in result.stderr
