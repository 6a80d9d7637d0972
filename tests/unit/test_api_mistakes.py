"""Wrong types at the API are an OncefireError with a sentence, never a raw TypeError."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from oncefire import App
from oncefire.errors import ConfigError, InvalidDocumentError, OncefireError


@pytest.fixture
def app() -> Iterator[App]:
    built = App("sqlite://:memory:")
    yield built
    built.close()


def test_firebase_document_keyword_is_the_pattern_and_one_is_required(app: App) -> None:
    app.on_document_created(document="orders/{o}")(lambda event: None)
    assert app.triggers["<lambda>"].source == "orders/{o}"
    with pytest.raises(ConfigError, match="document="):
        app.on_document_updated("orders/{o}", document="orders/{o}")
    with pytest.raises(ConfigError, match="pattern"):
        app.on_document_written()


def test_a_non_callable_function_is_refused(app: App) -> None:
    with pytest.raises(ConfigError, match="callable"):
        app.on_message("payments")(42)  # type: ignore[type-var]
    with pytest.raises(ConfigError, match="callable"):
        app.on_document_created("orders/{o}")("charge")  # type: ignore[type-var]


def test_permanent_errors_must_be_a_tuple_of_exception_classes(app: App) -> None:
    with pytest.raises(ConfigError, match=r"permanent_errors=\(ValueError,\)"):
        app.on_message("payments", permanent_errors=ValueError)
    with pytest.raises(ConfigError, match="exception classes"):
        app.on_message("payments", permanent_errors=("nope",))


@pytest.mark.parametrize("attributes", [["a"], {"a": 1}, {1: "a"}, "a=b"])
def test_attributes_must_be_a_dict_of_strings(app: App, attributes: Any) -> None:
    with pytest.raises(OncefireError, match="attribute"):
        app.publish("payments", {}, attributes=attributes)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"n": 10**5000}, "4,300 digits"),
        ({"s": "\ud800"}, "surrogate"),
    ],
)
def test_data_json_cannot_hold_is_an_invalid_document_error(
    app: App, data: dict[str, Any], words: str
) -> None:
    with pytest.raises(InvalidDocumentError, match=words):
        app.db.document("orders/o1").set(data)
    with pytest.raises(InvalidDocumentError, match=words):
        app.publish("payments", data)


def test_deeply_nested_data_is_an_invalid_document_error(app: App) -> None:
    nested: Any = 1
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(InvalidDocumentError, match="nested too deeply"):
        app.db.document("orders/o1").set({"a": nested})
