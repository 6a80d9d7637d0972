"""`oncefire audit`, run as a subprocess: findings as lines and as JSON, the exit status CI
gates on, history read from a real store, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oncefire.loader import load_app
from oncefire.testing import TestClock

# The command beside this interpreter first, so the checkout under test is the one run.
BESIDE = Path(sys.executable).parent / "oncefire"
ONCEFIRE = str(BESIDE) if BESIDE.is_file() else shutil.which("oncefire") or "oncefire"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOOP_APP = """\
from oncefire import App, RetryPolicy

app = App()
EVERY_SECOND = RetryPolicy(max_attempts=12, first_delay=1, multiplier=1, max_delay=1)


@app.on_document_created(
    "loops/{id}", retry_policy=EVERY_SECOND, max_instances=1, permanent_errors=[KeyError]
)
def looper(event):
    raise RuntimeError("still broken")
"""


def audit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `oncefire audit ARGS` with a store in tmp_path unless --store is given."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    environment["ONCEFIRE_STORE"] = f"sqlite:///{tmp_path}/audit.db"
    return subprocess.run(
        [ONCEFIRE, "audit", *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        timeout=120,
    )


def test_the_planted_app_prints_one_line_a_finding_and_exits_1(tmp_path: Path) -> None:
    result = audit(tmp_path, str(EXAMPLES / "audit" / "planted.py"))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 7  # six findings and the summary
    assert lines[-1].startswith("3 error(s), 3 warning(s) in 6 function(s)")
    assert lines[0].startswith("retry-without-guard [error] welcome_signup ")
    assert "planted.py:18: " in lines[0] and "(fix: " in lines[0]
    assert any(
        line.startswith("external-call-without-key") and "mailer.py:15" in line for line in lines
    )


def test_json_output_holds_findings_and_a_summary(tmp_path: Path) -> None:
    result = audit(tmp_path, str(EXAMPLES / "audit" / "planted.py"), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert {tuple(sorted(f)) for f in report["findings"]} == {
        ("file", "function", "hint", "line", "message", "rule", "severity")
    }
    assert report["summary"]["errors"] == 3 and report["summary"]["warnings"] == 3
    assert {f["rule"]: f["severity"] for f in report["findings"]}["self-trigger"] == "error"


def test_the_clean_app_exits_0_even_failing_on_warnings(tmp_path: Path) -> None:
    result = audit(tmp_path, str(EXAMPLES / "audit" / "clean.py"), "--fail-on", "warning")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "0 error(s), 0 warning(s) in 6 function(s) and 24h of history"


def test_fail_on_sets_the_severity_that_fails(tmp_path: Path) -> None:
    orders = str(EXAMPLES / "orders.py")  # one warning: no max_instances
    assert audit(tmp_path, orders).returncode == 0
    assert audit(tmp_path, orders, "--fail-on", "warning").returncode == 1


def test_an_event_that_keeps_coming_back_is_found_in_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "loop_app.py"
    path.write_text(LOOP_APP)
    store = f"sqlite:///{tmp_path}/loops.db"
    monkeypatch.setenv("ONCEFIRE_STORE", store)
    app = load_app(str(path))
    clock = app.clock = TestClock(time.time() - 600)  # history of ten minutes ago
    app.db.document("loops/l1").set({"n": 1})
    for _ in range(12):
        app.drain()
        clock.advance(1)
    app.close()
    result = audit(tmp_path, str(path), "--store", store, "--since", "1h", "--json")
    assert result.returncode == 1, result.stderr
    [finding] = json.loads(result.stdout)["findings"]
    assert (finding["rule"], finding["function"], finding["line"]) == (
        "looping-event",
        "looper",
        10,
    )
    assert "ran 12 times" in finding["message"]
    assert audit(tmp_path, str(path), "--store", store, "--since", "1m").returncode == 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("missing.py",), ("No such file",)),
        ((str(EXAMPLES / "audit" / "clean.py"), "--since", "soon"), ("Bad duration",)),
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(
    tmp_path: Path, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    result = audit(tmp_path, *args)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert all(word in lines[0] for word in words)


def test_an_unknown_severity_is_refused(tmp_path: Path) -> None:
    result = audit(tmp_path, str(EXAMPLES / "audit" / "clean.py"), "--fail-on", "info")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "'info' is not one of 'warning', 'error'" in result.stderr
