"""Bad input, fuzzed with hypothesis: ids, paths, patterns, JSON values, option values, CLI
arguments and store URLs. Each either succeeds or raises an `OncefireError` (a one-line CLI error
with a non-zero exit), never another exception, never a hang (pytest-timeout), and a failed
write leaves the document and the event count as they were.

Generated text takes any code point, lone surrogates included (and drawn often: they are
2,048 code points of 1.1 million). Every input that once failed is kept as an explicit
@example, and each bug of issue 11 point 19 (lone surrogates, huge integers, deep nesting,
wrong option types, huge ids) has a test.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from oncefire import App, RetryPolicy
from oncefire.cli import main
from oncefire.errors import OncefireError
from oncefire.events import Event
from tests.chaos.harness import rows

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
characters = st.characters(exclude_categories=()) | st.characters(categories=["Cs"])


def texts(max_size: int | None = None) -> st.SearchStrategy[str]:
    """Strings of any code points, lone surrogates among them."""
    return st.text(characters, max_size=max_size)


# Values the store must take or refuse cleanly.
scalars = st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | texts()
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts(8), inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    app = App(f"sqlite:///{tmp_path_factory.mktemp('fuzz')}/fuzz.db")

    @app.on_document_written("things/{id}")
    def watch(event: Event) -> None:
        """Gives every write an event to count."""

    yield app
    app.close()


def events(app: App) -> int:
    """The events in the app's store (read on a connection of the test's own)."""
    return int(rows(app.settings.store, "SELECT count(*) FROM oncefire_events")[0][0])


def write_is_clean(app: App, path: str, data: Any) -> None:
    """Succeeds, or raises OncefireError with the document and the events as before."""
    ref = app.db.document("things/t1")
    before, count = ref.get().to_dict(), events(app)
    try:
        app.db.document(path).set(data)
    except OncefireError:
        assert ref.get().to_dict() == before and events(app) == count


@FUZZ
@given(path=texts(40))
@example(path="")
@example(path="things/..")
@example(path="things/" + "x" * 1600)
@example(path="things/a\x00b")
@example(path="things/\udc80")
@example(path="\ud800/x")
def test_any_path_is_taken_or_refused_cleanly(app: App, path: str) -> None:
    write_is_clean(app, path, {"n": 1})


@FUZZ
@given(data=json_values)
@example(data={"n": float("nan")})
@example(data={"\x00": "\x00"})
@example(data={"$time": "no"})
@example(data={"a": float("inf")})
@example(data={"s": "\udc80"})
@example(data={"\ud800": 1})
@example(data=["a\udfffb"])
def test_any_json_value_is_taken_or_refused_cleanly(app: App, data: Any) -> None:
    write_is_clean(app, "things/t1", data)


def test_a_lone_surrogate_is_refused_cleanly(app: App) -> None:
    with pytest.raises(OncefireError):
        app.db.document("things/t1").set({"s": "\udc80"})


def test_an_integer_over_4300_digits_is_refused_cleanly(app: App) -> None:
    write_is_clean(app, "things/t1", {"n": 10**5000})
    with pytest.raises(OncefireError):
        app.db.document("things/t1").set({"n": 10**5000})


def test_json_nested_hundreds_deep_is_refused_cleanly_or_stored(app: App) -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    write_is_clean(app, "things/t1", {"deep": deep})


@FUZZ
@given(pattern=texts(30))
@example(pattern="")
@example(pattern="orders/{")
@example(pattern="orders/{a}/{a}")
@example(pattern="{x}")
@example(pattern="\ud800/{x}")
def test_any_pattern_is_taken_or_refused_cleanly(app: App, pattern: str) -> None:
    with contextlib.suppress(OncefireError):
        app.on_document_created(pattern, name=f"p{abs(hash(pattern))}")(lambda event: None)


numbers = st.floats(allow_nan=True) | st.integers(-(10**6), 10**20) | st.none()


@FUZZ
@given(timeout=numbers, max_instances=numbers, attempts=numbers, delay=numbers)
@example(timeout=math.nan, max_instances=None, attempts=None, delay=None)
@example(timeout=None, max_instances=-1, attempts=0, delay=-1.0)
@example(timeout=None, max_instances=1.5, attempts=2.5, delay=math.inf)
def test_any_option_number_is_taken_or_refused_cleanly(
    app: App, timeout: Any, max_instances: Any, attempts: Any, delay: Any
) -> None:
    options: dict[str, Any] = {"max_instances": max_instances}
    if timeout is not None:
        options["timeout"] = timeout
    try:
        policy = {
            k: v for k, v in (("max_attempts", attempts), ("first_delay", delay)) if v is not None
        }
        options["retry_policy"] = RetryPolicy(**policy)
        app.on_message("fuzz", name=f"o{abs(hash(repr(options)))}", **options)(lambda e: None)
    except OncefireError:
        pass


def test_a_timeout_of_the_wrong_type_is_refused_cleanly(app: App) -> None:
    with pytest.raises(OncefireError):
        app.on_message("fuzz", name="wrong_type", timeout="10")(lambda e: None)


@FUZZ
@given(url=texts(40))
@example(url="sqlite://")
@example(url="postgresql://nobody@127.0.0.1:1/x")
@example(url="mysql://x")
@example(url="sqlite:///nonexistent-dir/x.db")
def test_any_store_url_is_taken_or_refused_cleanly(url: str, tmp_path: Path) -> None:
    try:
        other = App(url if not url.startswith("sqlite:///") else "sqlite:///" + str(tmp_path / "x"))
        other.close()
    except OncefireError:
        pass


def cli(tmp: Path, *args: str) -> None:
    """The command exits 0, or non-zero with one error line (after click's usage) and no
    traceback."""
    result = CliRunner().invoke(main, [*args, "--store", f"sqlite:///{tmp}/cli.db"])
    if result.exit_code != 0:
        assert isinstance(result.exception, SystemExit), result.exception
        assert "Traceback" not in result.output
        errors = [line for line in result.output.splitlines() if line.startswith("Error")]
        assert len(errors) == 1, result.output


@FUZZ
@given(path=texts(20), data=texts(20))
@example(path="orders/o1", data="{")
@example(path="orders/o1", data="[]")
@example(path="", data="{}")
@example(path="orders/o1", data='{"n": NaN}')
def test_any_cli_document_arguments_end_in_one_line(tmp_path: Path, path: str, data: str) -> None:
    cli(tmp_path, "doc", "set", path, data)
    cli(tmp_path, "doc", "get", path)


@FUZZ
@given(ident=texts(12))
@example(ident="-1")
@example(ident="abc")
def test_any_dead_letter_id_ends_in_one_line(tmp_path: Path, ident: str) -> None:
    cli(tmp_path, "dlq", "show", ident)


def test_a_dead_letter_id_past_64_bits_ends_in_one_line(tmp_path: Path) -> None:
    cli(tmp_path, "dlq", "show", "99999999999999999999")
