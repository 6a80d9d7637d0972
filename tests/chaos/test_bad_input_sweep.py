"""The classes of bad input issue 44's sweep found, as tables: each input, at the Python API,
the command line or the dashboard, is refused with one clear error (an OncefireError naming
the value; one `Error:` line and a non-zero exit; a 4xx page or JSON body), never a
traceback, never accepted in silence, and the store is left as it was (no loss, nothing
half-written).

Each row failed on the tree before the issue: a traceback (OverflowError, AttributeError,
TypeError), or a silent acceptance.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from oncefire import App, Increment, RetryPolicy
from oncefire.cli import main
from oncefire.engine.worker import Worker
from oncefire.errors import ConfigError, InvalidDocumentError, InvalidPathError, OncefireError
from oncefire.events import Event
from oncefire.testing import TestClock, deliver, make_event
from oncefire.web.dashboard import create_app
from tests.chaos.harness import rows
from tests.dashboard_shop import SECRET, TOKEN, Shop, build

TABLES = ("documents", "events", "deliveries", "functions", "claims", "index_fields", "audit")


def snapshot(url: str) -> dict[str, Any]:
    """What a refused input must leave as it was: every document, and how many rows the
    other tables hold."""
    found: dict[str, Any] = {
        table: rows(url, f"SELECT count(*) FROM oncefire_{table}")[0][0] for table in TABLES
    }
    found["data"] = rows(url, "SELECT path, data FROM oncefire_documents ORDER BY path")
    return found


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/sweep.db"


@pytest.fixture
def app(url: str) -> Iterator[App]:
    """An app with a document function, a message function and a document, on a file."""
    app = App(url, clock=TestClock())

    @app.on_document_written("things/{id}")
    def watch(event: Event) -> None:
        """Gives every write an event to count."""

    @app.on_message("t")
    def take(event: Event) -> None:
        """Takes the topic's messages."""

    app.db.document("things/t1").set({"n": 1, "m": {"k": "v"}})
    yield app
    app.close()


@dataclass(frozen=True)
class Case:
    """One bad input at the API: what to call, the error, and words its message holds."""

    name: str
    call: Callable[[App], object]
    error: type[OncefireError]
    words: str


def _on_message(app: App, **options: Any) -> None:
    app.on_message("t", **options)(lambda event: None)


def _claim(app: App, key: Any, ttl: Any) -> None:
    with app.db.transaction() as tx:
        tx.claim(key, ttl=ttl)


def _doc(path: str = "things/t1") -> Callable[[App], Any]:
    return lambda app: app.db.document(path)


API = [
    # point 9: tracebacks
    Case("store-not-a-string", lambda app: App(store=123), ConfigError, "store=123"),  # type: ignore[arg-type]
    Case("increment-of-text", lambda app: Increment("a"), InvalidDocumentError, "Increment('a')"),  # type: ignore[arg-type]
    Case("increment-of-bool", lambda app: Increment(True), InvalidDocumentError, "Increment(True)"),
    Case("increment-of-nan", lambda app: Increment(math.nan), InvalidDocumentError, "nan"),
    # the same kind, found beside them
    Case("setting-of-text", lambda app: App(lease="30"), ConfigError, "lease='30'"),
    Case("setting-of-nan", lambda app: App(lease=math.nan), ConfigError, "lease=nan"),
    Case("count-setting-float", lambda app: App(concurrency=1.5), ConfigError, "concurrency=1.5"),
    Case("synchronous-int", lambda app: App(sqlite_synchronous=1), ConfigError, "sqlite_synchr"),
    Case("timeout-past-float", lambda a: _on_message(a, timeout=10**400), ConfigError, "timeout="),
    Case("claim-ttl-text", lambda a: _claim(a, "k", "x"), InvalidDocumentError, "ttl='x'"),
    Case("update-int-path", lambda a: _doc()(a).update({1: 2}), InvalidDocumentError, "path 1"),
    Case("limit-float", lambda a: a.db.collection("things").limit(1.5).get(), OncefireError, "1.5"),  # type: ignore[arg-type]
    Case(
        "function-without-name",
        lambda a: a.on_message("t")(functools.partial(print)),
        ConfigError,
        "name=",
    ),
    Case("stats-window-nan", lambda a: a.stats(window=math.nan), ConfigError, "window=nan"),
    Case("clock-without-now", lambda a: App(clock=123), ConfigError, "clock=123"),  # type: ignore[arg-type]
    Case("settings-not-settings", lambda a: App(settings=123), ConfigError, "settings=123"),  # type: ignore[arg-type]
    Case("audit-since-text", lambda a: a.audit(since="1d"), ConfigError, "since='1d'"),  # type: ignore[arg-type]
    Case("cost-since-text", lambda a: a.cost(since="1d"), ConfigError, "since='1d'"),  # type: ignore[arg-type]
    Case(
        "dead-letters-since-text",
        lambda a: a.dead_letters.list(since="yesterday"),  # type: ignore[arg-type]
        ConfigError,
        "'yesterday'",
    ),
    Case("advance-nan", lambda a: TestClock().advance(math.nan), ConfigError, "advance(nan)"),
    Case("merge-not-bool", lambda a: _doc()(a).set({"n": 2}, merge=0), OncefireError, "merge=0"),
    Case("callback-not-callable", lambda a: a.on_dead_letter(123), ConfigError, "got 123"),  # type: ignore[arg-type]
    Case(
        "deliver-no-times",
        lambda a: deliver(a, "take", make_event("message.published", "t", {}), times=0),
        ConfigError,
        "times=0",
    ),
    # point 10: accepted in silence
    Case("store-query", lambda a: App("sqlite:///x.db?mode=ro"), ConfigError, "'?mode=ro'"),
    Case("payload-negative", lambda a: App(max_payload_bytes=-1), ConfigError, "=-1"),
    Case("payload-zero", lambda a: App(max_payload_bytes=0), ConfigError, "at least 1"),
    Case("empty-field", lambda a: _doc()(a).set({"": 1}), InvalidDocumentError, "empty field"),
    Case("empty-nested", lambda a: _doc()(a).set({"m": {"": 1}}), InvalidDocumentError, "m has"),
    Case(
        "empty-merged",
        lambda a: _doc()(a).set({"": 1}, merge=True),
        InvalidDocumentError,
        "empty field name",
    ),
    Case("empty-updated", lambda a: _doc()(a).update({"m.": 1}), InvalidDocumentError, "'m.'"),
    Case("control-id", lambda a: _doc("things/a\x01b")(a).set({}), InvalidPathError, "'\\x01'"),
    Case(
        "control-collection",
        lambda a: a.db.collection("th\nings"),
        InvalidPathError,
        "'\\n'",
    ),
    Case("control-topic", lambda a: a.publish("t\x07", {}), InvalidPathError, "'\\x07'"),
    Case(
        "control-function-name",
        lambda a: _on_message(a, name="take\t2"),
        InvalidPathError,
        "'\\t'",
    ),
    Case(
        "empty-attribute",
        lambda a: a.publish("t", {}, attributes={"": "x"}),
        OncefireError,
        "Attribute ''",
    ),
    Case(
        "reserved-attribute",
        lambda a: a.publish("t", {}, attributes={"oncefire.source_function": "charge"}),
        OncefireError,
        "'oncefire.'",
    ),
    Case(
        "no-retry-with-policy",
        lambda a: _on_message(a, name="x", retry=False, retry_policy=RetryPolicy(3)),
        ConfigError,
        "retry=False with retry_policy",
    ),
    Case(
        "no-retry-with-attempts",
        lambda a: _on_message(a, name="x", retry=False, max_delivery_attempts=3),
        ConfigError,
        "max_delivery_attempts=3 with retry=False",
    ),
    Case("empty-name", lambda a: _on_message(a, name=""), ConfigError, "name=''"),
    Case(
        "nul-in-fields",
        lambda a: a.on_document_updated("things/{id}", name="u", fields=["s\x00"]),
        ConfigError,
        "fields holds 's\\x00'",
    ),
    Case(
        "ordering-message",
        lambda a: _on_message(a, name="x", ordering="document"),
        ConfigError,
        "message function has no document",
    ),
    Case(
        "ordering-schedule",
        lambda a: a.on_schedule("every 5 minutes", name="s", ordering="document"),
        ConfigError,
        "schedule function has no document",
    ),
    Case("index-empty", lambda a: a.db.collection("things").index(""), OncefireError, "''"),
    Case("index-dots", lambda a: a.db.collection("things").index("a..b"), OncefireError, "a..b"),
    Case(
        "where-empty", lambda a: a.db.collection("things").where("", "==", 1), OncefireError, "''"
    ),
    Case("order-empty", lambda a: a.db.collection("things").order_by(""), OncefireError, "''"),
    Case("ttl-field-empty", lambda a: a.ttl("things", field=""), OncefireError, "TTL field ''"),
    Case("stats-negative", lambda a: a.stats(window=-1), ConfigError, "window=-1"),
    Case("drain-unknown", lambda a: a.drain(functions=["nope"]), ConfigError, "'nope'"),
    Case("drain-a-string", lambda a: a.drain(functions="watch"), ConfigError, "functions='watch'"),
    Case("list-before", lambda a: a.dead_letters.list(before=-5), ConfigError, "before=-5"),
    Case("audit-before", lambda a: a.operators.audit_log(50, -5), ConfigError, "before=-5"),
    # point 15: NUL, refused alike on every store
    Case("nul-value", lambda a: _doc()(a).set({"s": "a\x00"}), InvalidDocumentError, "Field s"),
    Case("nul-key", lambda a: _doc()(a).set({"k\x00": 1}), InvalidDocumentError, "'k\\x00'"),
    Case("nul-id", lambda a: _doc("things/a\x00")(a).set({}), InvalidPathError, "'\\x00'"),
    Case("nul-data", lambda a: a.publish("t", ["\x00"]), InvalidDocumentError, "data[0]"),
    Case(
        "nul-attribute",
        lambda a: a.publish("t", {}, attributes={"a": "\x00"}),
        InvalidDocumentError,
        "attributes.a",
    ),
    Case("nul-claim", lambda a: _claim(a, "k\x00", 60), InvalidDocumentError, "'k\\x00'"),
]


@pytest.mark.parametrize("case", API, ids=[case.name for case in API])
def test_a_bad_input_at_the_api_is_one_clear_error_and_changes_nothing(
    app: App, url: str, case: Case
) -> None:
    before = snapshot(url)
    with pytest.raises(case.error) as raised:
        case.call(app)
    message = str(raised.value)
    assert case.words in message, message
    assert "\n" not in message.strip()
    assert snapshot(url) == before


def test_a_worker_of_no_concurrency_is_refused_before_it_starts(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    def started(self: Any) -> None:
        raise AssertionError("the worker started (and would have served forever)")

    monkeypatch.setattr(Worker, "run", started)
    with pytest.raises(ConfigError, match="concurrency=0"):
        app.run_worker(concurrency=0)


# -- the command line: one `Error:` line, a non-zero exit, no traceback -------------------


@dataclass(frozen=True)
class Command:
    """One bad command line ({tmp}: the test's folder; {store}: its store's URL)."""

    name: str
    args: tuple[str, ...]
    words: str


CLI = [
    Command("dashboard-port", ("dashboard", "--port", "99999", "--store", "{store}"), "99999"),
    Command("demo-port", ("demo", "--port", "99999", "--no-dashboard"), "99999"),
    Command("store-memory", ("doc", "set", "a/b", "{{}}", "--store", "sqlite://"), "in memory"),
    Command(
        "store-memory-path",
        ("doc", "set", "a/b", "{{}}", "--store", "sqlite:///:memory:"),
        "in memory",
    ),
    Command("store-memory-read", ("stats", "--store", "sqlite://:memory:"), "in memory"),
    Command("drain-in-memory", ("drain", "{tmp}/good.py", "--store", "sqlite://"), "in memory"),
    Command(
        "store-query",
        ("doc", "set", "a/b", "{{}}", "--store", "sqlite:///{tmp}/x.db?mode=ro"),
        "'?mode=ro'",
    ),
    Command("delete-missing", ("doc", "delete", "things/nope", "--store", "{store}"), "No doc"),
    Command(
        "delete-in-no-store",
        ("doc", "delete", "things/t1", "--store", "sqlite:///{tmp}/none.db"),
        "no oncefire store",
    ),
    Command(
        "duplicate-key",
        ("doc", "set", "things/t1", '{{"a": 1, "a": 2}}', "--store", "{store}"),
        "key 'a' twice",
    ),
    Command(
        "duplicate-nested-key",
        ("doc", "set", "things/t1", '{{"m": {{"k": 1, "k": 2}}}}', "--store", "{store}"),
        "key 'k' twice",
    ),
    Command("empty-field", ("doc", "set", "things/t1", '{{"": 1}}', "--store", "{store}"), "''"),
    Command("control-id", ("doc", "set", "things/a\x01", "{{}}", "--store", "{store}"), "\\x01"),
    Command("control-topic", ("publish", "t\x1b", "{{}}", "--store", "{store}"), "\\x1b"),
    Command("empty-attribute", ("publish", "t", "{{}}", "-a", "=x", "--store", "{store}"), "''"),
    Command(
        "reserved-attribute",
        ("publish", "t", "{{}}", "-a", "oncefire.source_event=e1", "--store", "{store}"),
        "oncefire.",
    ),
    Command(
        "attribute-twice",
        ("publish", "t", "{{}}", "-a", "a=1", "-a", "a=2", "--store", "{store}"),
        "twice",
    ),
    Command("dlq-before", ("dlq", "list", "--before", "-5", "--store", "{store}"), "before=-5"),
    Command("audit-before", ("audit-log", "--before", "-5", "--store", "{store}"), "before=-5"),
    Command(
        "dlq-before-past-64-bits",
        ("dlq", "list", "--before", "9" * 20, "--store", "{store}"),
        "from 1 to 9223372036854775807",
    ),
    Command(
        "audit-before-past-64-bits",
        ("audit-log", "--before", str(2**63), "--store", "{store}"),
        "from 1 to 9223372036854775807",
    ),
    Command("demo-in-memory", ("demo", "--store", "sqlite://", "--no-dashboard"), "in memory"),
    Command("stats-window", ("stats", "--window", "-1", "--store", "{store}"), "window=-1"),
    Command("stats-window-nan", ("stats", "--window", "nan", "--store", "{store}"), "window=nan"),
    Command("app-exits", ("drain", "{tmp}/exits.py", "--store", "{store}"), "status 3"),
    Command(
        "nul-value", ("doc", "set", "things/t1", '{{"s": "\\u0000"}}', "--store", "{store}"), "NUL"
    ),
]


@pytest.mark.parametrize("command", CLI, ids=[command.name for command in CLI])
def test_a_bad_command_line_is_one_error_line_and_changes_nothing(
    app: App, url: str, tmp_path: Path, command: Command
) -> None:
    (tmp_path / "exits.py").write_text("import sys\n\nsys.exit(3)\n")
    (tmp_path / "good.py").write_text("from oncefire import App\n\napp = App()\n")
    args = [arg.format(tmp=tmp_path, store=url) for arg in command.args]
    before = snapshot(url)
    result = CliRunner().invoke(main, args, catch_exceptions=True)
    assert result.exit_code not in (0, None), result.output
    assert isinstance(result.exception, SystemExit), result.exception  # not a traceback
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.output
    assert command.words in errors[0], errors[0]
    assert snapshot(url) == before
    assert not (tmp_path / "x.db?mode=ro").exists() and not (tmp_path / "none.db").exists()


# -- the dashboard: a page and the API refuse the same paging alike -----------------------


@pytest.fixture
def shop(url: str) -> Iterator[Shop]:
    shop = build(url, TestClock())
    shop.fail(2)
    yield shop
    shop.app.close()


@pytest.fixture
def web(shop: Shop) -> TestClient:
    return TestClient(create_app(shop.app, token=TOKEN, allowed_hosts=["testserver"]))


BEARER = {"Authorization": f"Bearer {SECRET}"}
PAGING = [
    (
        "/functions/charge?tab=dead-letters&before=-1",
        "/api/functions/charge/dead-letters?before=-1",
    ),
    ("/functions/charge?tab=dead-letters&limit=0", "/api/functions/charge/dead-letters?limit=0"),
    ("/functions/charge?tab=executions&limit=0", "/api/functions/charge/executions?limit=0"),
    ("/audit?before=-1", "/api/audit?before=-1"),
    ("/audit?limit=0", "/api/audit?limit=0"),
]


@pytest.mark.parametrize(("page", "api"), PAGING)
def test_a_page_refuses_the_paging_its_api_refuses(web: TestClient, page: str, api: str) -> None:
    shown = web.get(page, headers=BEARER)
    answered = web.get(api, headers=BEARER)
    assert answered.status_code == 400, answered.text
    assert shown.status_code == 400, shown.text
    error = answered.json()["error"]
    assert error in shown.text


def test_a_page_refuses_a_tab_it_does_not_have(web: TestClient) -> None:
    shown = web.get("/functions/charge?tab=sideways", headers=BEARER)
    assert shown.status_code == 400 and "tab=&#39;sideways&#39;" in shown.text


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"payload": {"data": {"n": 1, "n": 2}}}', "key 'n' twice"),
        (b'{"payload": {"data": ' + b"1" * 5000 + b"}}", "4,300 digits"),
        (b'{"payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ],
)
def test_an_edited_payload_json_cannot_hold_is_a_400(
    web: TestClient, shop: Shop, url: str, body: bytes, words: str
) -> None:
    letter_id = shop.app.dead_letters.list()[0].id
    before = snapshot(url)
    answered = web.post(
        f"/api/dead-letters/{letter_id}/replay-edited",
        content=body,
        headers={**BEARER, "Content-Type": "application/json"},
    )
    assert answered.status_code == 400, answered.text
    assert words in answered.json()["error"]
    assert snapshot(url) == before
