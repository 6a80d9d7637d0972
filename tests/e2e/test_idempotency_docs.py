"""docs/idempotency.md's tests of duplicates, copied as written into a test file and run by
pytest in a process of their own (the oncefire_app fixture comes from the installed plugin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_trigger_docs import blocks

PAGE = Path(__file__).resolve().parents[2] / "docs" / "idempotency.md"
CLAIM = '            if not tx.claim(f"count_order:{event.id}"):\n                return\n'

pytestmark = pytest.mark.e2e


def run_tests(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """pytest run on code written as a test file."""
    (tmp_path / "test_duplicates.py").write_text(code)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_duplicates.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def page_tests() -> str:
    """The Python block under the page's "Testing for duplicates"."""
    (code,) = [code for heading, code in blocks(PAGE) if heading == "Testing for duplicates"]
    return code


def test_the_pages_tests_of_duplicates_pass_as_written(tmp_path: Path) -> None:
    done = run_tests(tmp_path, page_tests())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_without_its_claim_the_pages_counting_test_finds_the_duplicate(tmp_path: Path) -> None:
    code = page_tests()
    assert CLAIM in code
    done = run_tests(tmp_path, code.replace(CLAIM, ""))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "assert {'count': 2} == {'count': 1}" in done.stdout
