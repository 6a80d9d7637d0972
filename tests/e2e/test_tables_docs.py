"""docs/tables.md's two examples, copied as written into files and run, print what the page
says they print."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.cli_support import Run

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tables.md"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)


def run(folder: Path, code: str) -> str:
    (folder / "app.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    result = subprocess.run(
        [sys.executable, "app.py"], capture_output=True, text=True, cwd=folder, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_sqlalchemy_example_emails_once(tmp_path: Path) -> None:
    assert run(tmp_path, examples()[0]).splitlines() == [
        "email to ada@example.com: order 1 has shipped"
    ]


def test_the_plain_sql_example_skips_the_rolled_back_insert(tmp_path: Path) -> None:
    # The two functions run side by side: their lines come in either order, and one's line
    # may end (print writes the newline apart) after the other's text.
    text = run(tmp_path, examples()[1]).replace("\n", "")
    inserted, deleted = "payment payments/1: 12.5 from ada", "payment 1 deleted; it was 12.5"
    assert text in (inserted + deleted, deleted + inserted), text


@pytest.mark.e2e
def test_the_demo_tells_the_table_story(run: Run) -> None:
    result = run("demo", "--tables", with_store=False)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "order 3's insert was rolled back" in out
    assert out.count("-> email to") == 2
    assert "emails sent: ['ada@example.com', 'bob@example.com']" in out
