"""The static audit rules on the planted and clean example apps, and on small apps that
probe each rule's edges (source files written to a temporary folder, never run)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from oncefire import App, ConfigError
from oncefire.audit import Finding, Report, audit, parse_duration
from oncefire.loader import load_app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "audit"
HEADER = """\
from oncefire import App, Increment, PermanentError, idempotent
import urllib.request

app = App()
"""


def planted_lines() -> set[tuple[str, str, int]]:
    """(rule, file name, line) of every `# planted: RULE` marker in the planted app."""
    marked = set()
    for path in EXAMPLES.glob("*.py"):
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            if "  # planted: " in text:
                marked.add((text.split("  # planted: ")[1].strip(), path.name, number))
    return marked


def static(app: App, **options: object) -> list[tuple[str, str, int | None]]:
    """(rule, function, line) of the static findings, in report order."""
    report = audit(app.runtime, is_runtime=False, **options)  # type: ignore[arg-type]
    return [(f.rule, f.function, f.line) for f in report.findings]


def app_from(tmp_path: Path, name: str, body: str) -> App:
    """An App loaded from a source file holding HEADER and body."""
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    return load_app(str(path))


def line_of(tmp_path: Path, name: str, text: str) -> int:
    """The number of the first line of a written app that contains text."""
    lines = (tmp_path / f"{name}.py").read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if text in line)


def test_the_planted_app_is_flagged_at_each_marked_line_and_nowhere_else() -> None:
    report = audit(load_app(str(EXAMPLES / "planted.py")).runtime, is_runtime=False)
    found = {(f.rule, Path(f.file or "").name, f.line) for f in report.findings}
    assert found == planted_lines()
    assert len(report.findings) == 6
    assert {f.rule for f in report.findings} == {
        "retry-without-guard",
        "increment-in-trigger",
        "no-max-instances",
        "external-call-without-key",
        "broad-except",
        "self-trigger",
    }


def test_the_clean_app_has_no_finding() -> None:
    app = load_app(str(EXAMPLES / "clean.py"))
    report = audit(app.runtime, is_runtime=False)
    assert report.findings == ()
    assert not report.is_failing("warning")
    assert not app.runtime.is_open  # reading the code never opened the store


def test_the_seeds_three_static_checks_are_each_caught() -> None:
    by_function = {
        f.function: f
        for f in audit(load_app(str(EXAMPLES / "planted.py")).runtime, is_runtime=False).findings
    }
    assert by_function["welcome_signup"].rule == "retry-without-guard"  # no duplicate decision
    assert by_function["count_order"].rule == "increment-in-trigger"  # a counter in a trigger
    assert by_function["record_payment"].rule == "no-max-instances"  # no instance cap


def test_a_helper_in_the_same_module_is_followed_a_few_levels_deep(tmp_path: Path) -> None:
    app = app_from(
        tmp_path,
        "helpers_app",
        """
        def outer(event):
            middle(event)

        def middle(event):
            inner()

        def inner():
            urllib.request.urlopen("https://example.invalid/", timeout=5)

        @app.on_message("t", max_instances=1, permanent_errors=[KeyError])
        def relay(event):
            outer(event)
        """,
    )
    line = line_of(tmp_path, "helpers_app", "urlopen(")
    assert static(app) == [("external-call-without-key", "relay", line)]


def test_a_key_from_event_id_or_idempotent_or_no_retry_silences_the_outside_call(
    tmp_path: Path,
) -> None:
    app = app_from(
        tmp_path,
        "keyed_app",
        """
        @app.on_message("a", max_instances=1, permanent_errors=[KeyError])
        def keyed(event):
            urllib.request.urlopen(f"https://example.invalid/?key={event.id}", timeout=5)

        @app.on_message("b", max_instances=1)
        @idempotent(lease=60)
        def guarded(event):
            urllib.request.urlopen("https://example.invalid/", timeout=5)

        @app.on_message("c", max_instances=1, retry=False)
        def once(event):
            urllib.request.urlopen("https://example.invalid/", timeout=5)
        """,
    )
    assert static(app) == []


def test_a_read_modify_write_is_flagged_and_a_claimed_increment_is_not(tmp_path: Path) -> None:
    app = app_from(
        tmp_path,
        "counter_app",
        """
        @app.on_document_created("orders/{o}", max_instances=1)
        @idempotent(lease=60)
        def by_hand(event):
            snap = app.db.document("stats/all").get()
            app.db.document("stats/all").set({"n": snap.get("n") + 1})

        @app.on_document_created("orders/{o}", max_instances=1, name="leased")
        def leased(event):
            with app.db.transaction() as tx:
                if not tx.claim(event.id):
                    return
                tx.update(app.db.document("stats/all"), {"n": Increment(1)})
        """,
    )
    line = line_of(tmp_path, "counter_app", '.set({"n"')
    assert static(app) == [("increment-in-trigger", "by_hand", line)]


def test_self_trigger_sees_the_own_reference_and_new_documents_but_not_other_paths(
    tmp_path: Path,
) -> None:
    app = app_from(
        tmp_path,
        "loop_app",
        """
        @app.on_document_updated("users/{u}", max_instances=1, retry=False)
        def touch(event):
            event.data.after.reference.update({"touched": True})

        @app.on_document_created("jobs/{j}", max_instances=1, retry=False)
        def spawn(event):
            app.db.collection("jobs").add({"parent": event.params["j"]})

        @app.on_message("pings", max_instances=1, retry=False)
        def echo(event):
            app.publish("pings", {"again": True})
            app.publish("pongs", {})

        @app.on_document_created("notes/{n}", max_instances=1, retry=False)
        def mark(event):
            app.db.document(f"notes/{event.params['n']}").set({"seen": True}, merge=True)
            app.db.collection("notes").document("index").collection("x").add({})
        """,
    )
    assert sorted(static(app)) == [
        ("self-trigger", "echo", line_of(tmp_path, "loop_app", 'publish("pings"')),
        ("self-trigger", "spawn", line_of(tmp_path, "loop_app", '.collection("jobs").add')),
        ("self-trigger", "touch", line_of(tmp_path, "loop_app", "reference.update")),
    ]


def test_broad_except_that_classifies_is_not_flagged(tmp_path: Path) -> None:
    app = app_from(
        tmp_path,
        "except_app",
        """
        @app.on_message("a", retry=False)
        def reraises(event):
            try:
                pass
            except Exception:
                raise

        @app.on_message("b", retry=False)
        def classifies(event):
            try:
                pass
            except Exception as exc:
                if isinstance(exc, ValueError):
                    raise PermanentError("bad input") from exc
                raise

        @app.on_message("c", retry=False)
        def narrow(event):
            try:
                pass
            except KeyError:
                pass
        """,
    )
    line = line_of(tmp_path, "except_app", "except Exception:")
    assert static(app) == [("broad-except", "reraises", line)]


def test_the_outside_modules_are_configurable(tmp_path: Path) -> None:
    app = app_from(
        tmp_path,
        "config_app",
        """
        import json

        @app.on_message("a", retry=False)
        def dumps(event):
            json.dumps({})
        """,
    )
    assert static(app) == []
    assert [r for r, _, _ in static(app, outside_modules=("json",))] == ["no-max-instances"]


def test_a_function_whose_source_cannot_be_read_is_skipped() -> None:
    app = App("sqlite://:memory:")
    app.on_message("t")(print)
    assert static(app) == []


def test_findings_print_as_one_line_and_as_json() -> None:
    finding = Finding("broad-except", "fn", "swallows", "app.py", 12)
    assert finding.to_line().startswith("broad-except [warning] fn app.py:12: swallows (fix: ")
    assert set(finding.to_dict()) == {
        "rule",
        "severity",
        "function",
        "file",
        "line",
        "message",
        "hint",
    }
    report = Report((finding,), functions=1, since=60.0)
    assert report.summary()["warnings"] == 1 and report.summary()["errors"] == 0
    assert report.is_failing("warning") and not report.is_failing("error")


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("15m", 900), ("24h", 86400), ("7d", 604800)]
)
def test_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-1h", "0", "3y"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="Bad duration"):
        parse_duration(text)


def test_a_write_the_event_fully_determines_is_a_decision_and_add_is_not(
    tmp_path: Path,
) -> None:
    app = app_from(
        tmp_path,
        "receipts_app",
        """
        @app.on_document_created("orders/{orderId}", max_instances=1)
        def mark_received(event):
            order_id = event.params["orderId"]
            app.db.document(f"receipts/{order_id}").set({"status": "received"})

        @app.on_document_created("orders/{orderId}", max_instances=1, name="log_order")
        def log_order(event):
            app.db.collection("log").add({"order": event.params["orderId"]})
        """,
    )
    line = line_of(tmp_path, "receipts_app", "def log_order")
    assert static(app) == [("retry-without-guard", "log_order", line)]


def test_installed_packages_and_oncefire_itself_are_not_followed(tmp_path: Path) -> None:
    installed = tmp_path / ".venv" / "lib" / "site-packages"
    installed.mkdir(parents=True)
    (installed / "vendored.py").write_text(
        "def swallow():\n    try:\n        pass\n    except Exception:\n        pass\n"
    )
    app = app_from(
        tmp_path,
        "vendor_app",
        f"""
        import sys
        sys.path.insert(0, {str(installed)!r})
        import vendored
        from oncefire.model.paths import check_id

        @app.on_message("t", retry=False)
        def relay(event):
            vendored.swallow()
            check_id("x")
        """,
    )
    assert static(app) == []


def test_a_retried_function_with_no_effect_has_nothing_to_guard(tmp_path: Path) -> None:
    app = app_from(
        tmp_path,
        "quiet_app",
        """
        import logging

        log = logging.getLogger(__name__)

        @app.on_document_created("orders/{o}", max_instances=1)
        def nothing(event):
            pass

        @app.on_document_created("orders/{o}", max_instances=1, name="shout")
        def shout(event):
            print("new order", event.params["o"], event.data.get("amount"))

        @app.on_message("orders", max_instances=1)
        def note(event):
            log.info("order %s", event.id)
            logging.warning("seen %s", event.data)

        @app.on_schedule("every 5 minutes")
        def report(event):
            paid = app.db.collection("orders").where("status", "==", "paid").get()
            print(len(paid), app.db.document("stats/orders").get().to_dict())
        """,
    )
    assert static(app) == []


def test_a_retried_function_that_writes_publishes_or_calls_out_is_flagged(
    tmp_path: Path,
) -> None:
    app = app_from(
        tmp_path,
        "effects_app",
        """
        import httpx
        import requests

        @app.on_document_created("orders/{o}", max_instances=1)
        def write_doc(event):
            app.db.document("latest/order").set({"at": event.time})

        @app.on_document_created("orders/{o}", max_instances=1)
        def announce(event):
            app.publish("orders-seen", {"n": 1})

        @app.on_document_created("orders/{o}", max_instances=1)
        def post_requests(event):
            requests.post("https://example.invalid/", json={}, timeout=5)

        @app.on_document_created("orders/{o}", max_instances=1)
        def post_httpx(event):
            httpx.post("https://example.invalid/", json={}, timeout=5)

        @app.on_document_created("orders/{o}", max_instances=1)
        def open_url(event):
            urllib.request.urlopen("https://example.invalid/", timeout=5)

        @app.on_schedule("every 5 minutes")
        def nightly(event):
            app.db.collection("reports").add({"at": event.time})
        """,
    )
    found = {
        (function, line): rule
        for rule, function, line in static(app)
        if rule == "retry-without-guard"
    }
    expected = {
        name: line_of(tmp_path, "effects_app", f"def {name}(")
        for name in ("write_doc", "announce", "post_requests", "post_httpx", "open_url", "nightly")
    }
    assert found == {(name, line): "retry-without-guard" for name, line in expected.items()}
    report = audit(app.runtime, is_runtime=False)
    (announced,) = [
        f for f in report.findings if f.function == "announce" and f.rule == "retry-without-guard"
    ]
    effect_line = line_of(tmp_path, "effects_app", 'app.publish("orders-seen"')
    assert announced.message.endswith(f"app.publish() (line {effect_line}) runs again")
