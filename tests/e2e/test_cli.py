"""The `oncefire` command, run as a subprocess: documents, dead letters, stats, user mistakes
(one line on stderr, a non-zero exit, no traceback) and the demo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.cli_support import Run, assert_user_error


@pytest.mark.slow
def test_doc_set_get_and_delete(run: Run) -> None:
    result = run("doc", "set", "orders/o1", '{"amount": 500, "tags": ["a"]}')
    assert result.returncode == 0, result.stderr
    result = run("doc", "get", "orders/o1")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"amount": 500, "tags": ["a"]}
    assert run("doc", "set", "orders/o1", '{"more": 1}', "--merge").returncode == 0
    assert json.loads(run("doc", "get", "orders/o1").stdout) == {
        "amount": 500,
        "tags": ["a"],
        "more": 1,
    }
    assert run("doc", "delete", "orders/o1").returncode == 0
    assert_user_error(run("doc", "get", "orders/o1"), "No document")


def test_the_store_comes_from_oncefire_store(run: Run, store: str) -> None:
    env = {"ONCEFIRE_STORE": store}
    assert run("doc", "set", "orders/o1", '{"a": 1}', with_store=False, env=env).returncode == 0
    assert json.loads(run("doc", "get", "orders/o1").stdout) == {"a": 1}
    result = run("doc", "get", "orders/o1", with_store=False, env=env)
    assert json.loads(result.stdout) == {"a": 1}


@pytest.mark.slow
def test_dlq_list_show_replay_and_dismiss(run: Run, dead_letters: list[int]) -> None:
    newest, middle, oldest = dead_letters
    listing = run("dlq", "list")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.strip().splitlines()
    assert len(lines) == 3
    assert "ship" in lines[0] and "shipments/s1" in lines[0]
    assert "attempts=1" in lines[1] and "card declined" in lines[1]
    as_json = json.loads(run("dlq", "list", "--json", "--function", "charge").stdout)
    assert [d["source"] for d in as_json] == ["orders/o2", "orders/o1"]
    by_error = json.loads(run("dlq", "list", "--json", "--error", "for o1").stdout)
    assert [d["id"] for d in by_error] == [oldest]
    page = json.loads(run("dlq", "list", "--json", "--limit", "1", "--before", str(newest)).stdout)
    assert [d["id"] for d in page] == [middle]

    shown = json.loads(run("dlq", "show", str(oldest)).stdout)
    assert shown["function"] == "charge"
    assert shown["payload"]["after"]["data"] == {"path": "orders/o1"}
    assert shown["error"].startswith("ValueError: card declined for o1")

    assert run("dlq", "replay", str(oldest)).stdout.strip() == f"replayed {oldest}"
    assert run("dlq", "dismiss", str(newest)).stdout.strip() == f"dismissed {newest}"
    remaining = json.loads(run("dlq", "list", "--json").stdout)
    assert [d["id"] for d in remaining] == [middle]
    assert_user_error(run("dlq", "show", str(oldest)), "No dead letter")
    assert (
        run("dlq", "dismiss", "--all", "--yes", "--function", "charge").stdout.strip()
        == "dismissed 1"
    )
    assert run("dlq", "list").stdout.strip() == "no dead letters"


def test_dlq_replay_all_with_filters(run: Run, dead_letters: list[int]) -> None:
    assert (
        run("dlq", "replay", "--all", "--yes", "--error", "carrier").stdout.strip() == "replayed 1"
    )
    assert len(json.loads(run("dlq", "list", "--json").stdout)) == 2


def test_stats_prints_a_table_and_json(run: Run, dead_letters: list[int]) -> None:
    table = run("stats")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split()[:3] == ["function", "ok", "failed"]
    lines = table.stdout.splitlines()[1:]
    rows = {line.split()[0]: line.split() for line in lines if not line.startswith("unrouted:")}
    assert set(rows) == {"charge", "ship"}
    figures = json.loads(run("stats", "--json").stdout)
    assert figures["charge"]["failed"] == 2
    assert figures["charge"]["dead_letters"] == 2
    assert figures["ship"]["succeeded"] == 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("doc", "get", "orders"), ("names a collection",)),
        (("doc", "get", "orders/.."), ("reserved",)),
        (("doc", "set", "orders/o1", "{bad"), ("not valid JSON",)),
        (("doc", "set", "orders/o1", "[1, 2]"), ("dict",)),
        (("doc", "set", "orders/o1", '{"x": NaN}'), ("NaN",)),
        (("dlq", "show", "999"), ("No dead letter 999",)),
        (("dlq", "replay"), ("--all",)),
        (("dlq", "dismiss", "999"), ("No dead letter 999",)),
        (("dlq", "list", "--limit", "0"), ("limit",)),
        (("worker", "app.py", "--processes", "0"), ("--processes",)),
        (("worker", "app.py", "--concurrency", "0"), ("--concurrency",)),
        (("run", "app.py", "--processes", "-1"), ("--processes",)),
    ],
)
def test_user_mistakes_print_one_line_and_exit_non_zero(
    run: Run, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    assert run("migrate").returncode == 0  # the store exists: each case fails on its input
    assert_user_error(run(*args), *words)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("mysql://x", ("Unknown store URL",)),
        ("sqlite:///{tmp}/no/such/dir/x.db", ("no oncefire store at",)),
        ("sqlite:///{tmp}/junk.db", ("not a database",)),
    ],
)
def test_a_bad_store_is_one_line(tmp_path: Path, run: Run, url: str, words: tuple[str]) -> None:
    (tmp_path / "junk.db").write_text("not a database " * 100)
    result = run("dlq", "list", "--store", url.format(tmp=tmp_path), with_store=False)
    assert_user_error(result, *words)


@pytest.mark.slow
@pytest.mark.e2e
def test_demo_tells_the_story_and_exits_zero(run: Run) -> None:
    result = run("demo", with_store=False)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Traceback" not in out + result.stderr
    assert "attempt 1 of event" in out and "next attempt in" in out  # each attempt as it happens
    assert "succeeded" in out
    assert "dead letter" in out
    assert "function" in out and "max att" in out  # the stats table
    assert "charge_on_order" in out
    assert "oncefire dlq replay" in out  # how to replay it
    assert "orders charged: 2" in out
    assert "gateway charges per event: [1, 1]" in out  # retried and redelivered, charged once
    assert "the gateway charged it 1 time(s) in all" in out
    stats_row = next(line for line in out.splitlines() if line.startswith("charge_on_order "))
    assert stats_row.split()[-1] == "2"  # two dedupe hits from the redeliveries


APP_SOURCE = """
from oncefire import App

app = App()
seen = []


@app.on_document_created("orders/{o}")
def charge(event):
    app.db.document(f"charged/{event.params['o']}").set({"by": "charge"})
"""


def test_drain_loads_the_app_from_a_file_and_runs_its_deliveries(run: Run, tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(APP_SOURCE)
    assert run("drain", "shop.py").returncode == 0  # registers the functions in the store
    assert run("doc", "set", "orders/o1", '{"amount": 5}').returncode == 0
    result = run("drain", "shop.py:app")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"attempts": 1, "outcomes": {"succeeded": 1}}
    assert json.loads(run("doc", "get", "charged/o1").stdout) == {"by": "charge"}


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("missing.py", ("No such file",)),
        ("no_such_module_xyz", ("Cannot import",)),
        ("shop.py:seen", ("is not an oncefire App",)),
        ("empty.py", ("holds 0 oncefire Apps",)),
    ],
)
def test_a_bad_app_target_is_one_line(
    run: Run, tmp_path: Path, target: str, words: tuple[str]
) -> None:
    (tmp_path / "shop.py").write_text(APP_SOURCE)
    (tmp_path / "empty.py").write_text("x = 1\n")
    assert_user_error(run("drain", target), *words)
