"""`oncefire cost` and the cost section of `oncefire audit`, run as subprocesses over a store
holding a workload with known counts: the table, the JSON shape, and a bad --prices file."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from oncefire.loader import load_app
from oncefire.testing import TestClock
from tests.e2e.cli_support import ONCEFIRE, assert_user_error

WORKLOAD_APP = """\
from oncefire import App, RetryPolicy

app = App(concurrency=1)


@app.on_document_created("orders/{id}", max_instances=1)
def reader(event):
    app.db.document("config/a").get()
    app.db.collection("config").get()
    app.db.document(f"receipts/{event.params['id']}").set({"n": 1})
    app.clock.advance(0.5)


@app.on_document_created(
    "payments/{id}",
    max_instances=1,
    retry_policy=RetryPolicy(max_attempts=6, first_delay=1, multiplier=1, max_delay=1),
)
def flaky(event):
    app.db.document(f"log/{event.params['id']}-{event.attempt}").set({"n": 1})
    app.clock.advance(2)
    if event.attempt < 3:
        raise RuntimeError("gateway timeout")
"""
ROUND_PRICES = """\
[compute]
per_million_invocations = 1000000
per_gb_second = 1.0
memory_gb = 0.5
per_cpu_second = 0
[store]
per_100k_reads = 100000
per_100k_writes = 200000
"""


@pytest.fixture
def workload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """(app file, store URL) of a store where `reader` ran 5 times (3 reads, 1 write, 0.5 s
    each) and `flaky` 6 times over 2 events (1 write, 2 s each; 4 attempts failed)."""
    path = tmp_path / "workload.py"
    path.write_text(WORKLOAD_APP, encoding="utf-8")
    store = f"sqlite:///{tmp_path}/cost.db"
    monkeypatch.setenv("ONCEFIRE_STORE", store)
    app = load_app(str(path))
    clock = app.clock = TestClock(time.time() - 600)  # history of ten minutes ago
    for name in ("a", "b"):
        app.db.document(f"config/{name}").set({"v": name})
    for n in range(5):
        app.db.document(f"orders/o{n}").set({"n": n})
    for n in range(2):
        app.db.document(f"payments/p{n}").set({"n": n})
    for _ in range(4):
        app.drain()
        clock.advance(1)
    app.close()
    (tmp_path / "prices.toml").write_text(ROUND_PRICES, encoding="utf-8")
    return path, store


def oncefire(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `oncefire ARGS` in tmp_path with no ONCEFIRE_ variable set."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFIRE_")}
    return subprocess.run(
        [ONCEFIRE, *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        timeout=120,
    )


def test_cost_json_has_the_known_counts_and_its_shape(
    tmp_path: Path, workload: tuple[Path, str]
) -> None:
    _, store = workload
    args = ("cost", "--store", store, "--since", "1d", "--prices", "prices.toml", "--json")
    result = oncefire(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"since", "currency", "prices", "functions", "total"}
    assert report["since"] == 86400 and report["currency"] == "USD"
    flaky, reader = report["functions"]  # by name
    assert set(reader) == {
        "function",
        "invocations",
        "succeeded",
        "failed_attempts",
        "outcomes",
        "reads",
        "writes",
        "failed_reads",
        "failed_writes",
        "cpu_seconds",
        "seconds",
        "cost",
        "failure_cost",
        "failure_cost_per_day",
    }
    assert set(reader["cost"]) == {"invocations", "compute", "store", "total"}
    assert (reader["function"], reader["invocations"], reader["reads"], reader["writes"]) == (
        "reader",
        5,
        15,  # 1 get + a query of 2 documents, 5 times
        5,
    )
    assert reader["cost"]["total"] == pytest.approx(5 + 2.5 * 0.5 + 15 + 10)
    assert (flaky["invocations"], flaky["failed_attempts"], flaky["writes"]) == (6, 4, 6)
    assert flaky["seconds"] == pytest.approx(12)
    # flaky's failures: 4 invocations + 8 s x 0.5 GB + 4 writes x 2
    assert flaky["failure_cost"] == pytest.approx(16)
    assert flaky["failure_cost_per_day"] == pytest.approx(16)
    assert report["total"]["failed_attempts"] == 4


def test_cost_prints_a_table_and_what_failures_cost_a_day(
    tmp_path: Path, workload: tuple[Path, str]
) -> None:
    path, store = workload
    result = oncefire(tmp_path, "cost", str(path), "--store", store, "--prices", "prices.toml")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].split() == [
        "function",
        "invocations",
        "failed",
        "reads",
        "writes",
        "cpu",
        "s",
        "cost",
    ]
    assert lines[1].split()[:5] == ["flaky", "6", "4", "0", "6"]
    assert lines[2].split()[:5] == ["reader", "5", "0", "15", "5"]
    # 16 over the default window of 7 days
    assert lines[3].startswith(
        f"flaky: its failures cost {16 / 7:.2f} USD a day at the current rate"
    )
    assert lines[4].startswith("total: 55.25 USD, of which failures 16.00 USD")


def test_audit_shows_the_cost_section_and_its_json(
    tmp_path: Path, workload: tuple[Path, str]
) -> None:
    path, store = workload
    args = ("audit", str(path), "--store", store, "--since", "1d", "--prices", "prices.toml")
    result = oncefire(tmp_path, *args)
    assert result.returncode == 0, result.stderr  # both write keyed by the event: no finding
    lines = result.stdout.strip().splitlines()
    section = lines.index("cost over 1d:")
    assert lines[section + 1].split()[0] == "function"
    assert "  flaky: its failures cost 16.00 USD a day at the current rate" in "\n".join(lines)
    # The receipts and logs the functions write start no function: kept as unrouted, and no
    # warning (no function ever took those collections).
    assert not any("unrouted-events" in line for line in lines), lines
    assert lines[-1] == "0 error(s), 0 warning(s) in 2 function(s) and 1d of history"
    report = json.loads(oncefire(tmp_path, *args, "--json").stdout)
    assert report["cost"]["total"]["failure_cost"] == pytest.approx(16)


@pytest.mark.parametrize("command", ["cost", "audit"])
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[compute\n", ("is not valid TOML",)),
        ("[compute]\nmemory_gb = -2\n", ("compute.memory_gb = -2",)),
        ("[compute]\nper_invocation = 1\n", ("unknown key compute.per_invocation",)),
        (None, ("Cannot read the price table", "No such file")),
    ],
)
def test_a_bad_prices_file_is_one_line_and_exit_2(
    tmp_path: Path,
    workload: tuple[Path, str],
    command: str,
    text: str | None,
    words: tuple[str, ...],
) -> None:
    path, store = workload
    if text is not None:
        (tmp_path / "bad.toml").write_text(text, encoding="utf-8")
    result = oncefire(tmp_path, command, str(path), "--store", store, "--prices", "bad.toml")
    assert result.returncode == 2, result.stdout + result.stderr
    assert_user_error(result, "bad.toml", *words)
