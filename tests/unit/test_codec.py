"""The JSON codec: strict encoding, datetimes, the size limit, and ids."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from oncefire.errors import DocumentTooLargeError, InvalidDocumentError
from oncefire.model import codec


def test_values_round_trip_with_aware_datetimes() -> None:
    at = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    value = {"s": "é", "i": 1, "f": 1.5, "b": True, "n": None, "l": [1, {"t": at}], "t": at}
    assert codec.loads(codec.dumps(value)) == value


@pytest.mark.parametrize("as_bytes", [False, True])
def test_text_with_or_without_the_time_tag_decodes_alike_as_str_or_bytes(as_bytes: bool) -> None:
    at = datetime(2030, 1, 2, tzinfo=UTC)
    for value in ({"a": [1, {"b": "x"}]}, {"a": "$time", "t": at}, {"l": [{"t": at}]}):
        text = codec.dumps(value)
        assert codec.loads(text.encode() if as_bytes else text) == value


def test_datetimes_in_other_zones_are_stored_as_utc() -> None:
    at = datetime(2030, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    back = codec.loads(codec.dumps({"t": at}))["t"]
    assert back == at
    assert back.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ({"x": math.nan}, "NaN"),
        ({"x": math.inf}, "infinity"),
        ({"x": {1, 2}}, "set"),
        ({"x": b"bytes"}, "bytes"),
        ({"x": [object()]}, "object"),
        ({"x": datetime(2030, 1, 1)}, "naive datetime"),
        ({1: "a"}, "field names must be strings"),
    ],
)
def test_values_that_are_not_json_are_refused(value: object, hint: str) -> None:
    with pytest.raises(InvalidDocumentError, match=hint):
        codec.dumps(value)


def test_the_error_names_the_field() -> None:
    with pytest.raises(InvalidDocumentError, match=r"a\.b\[1\]"):
        codec.dumps({"a": {"b": [1, math.nan]}})


def test_the_reserved_time_tag_cannot_be_stored_as_a_field() -> None:
    # {"$time": "..."} would come back as a datetime, not as the dict that was stored.
    with pytest.raises(InvalidDocumentError, match=r"\$time"):
        codec.dumps({"x": {"$time": "2030-01-01T00:00:00+00:00"}})


@pytest.mark.parametrize("as_bytes", [False, True])
def test_geopoints_round_trip_and_their_tag_is_reserved(as_bytes: bool) -> None:
    value = {"at": codec.GeoPoint(51.5, -0.1), "list": [codec.GeoPoint(0, 0)]}
    text = codec.dumps(value)
    assert codec.loads(text.encode() if as_bytes else text) == value
    assert codec.loads(text)["list"][0].latitude == 0.0  # a float, as Firestore keeps it
    with pytest.raises(InvalidDocumentError, match=r"\$geo"):
        codec.dumps({"x": {"$geo": [1, 2]}})
    for bad in ((91, 0), (0, -181), ("1", 0), (True, 0)):
        with pytest.raises(InvalidDocumentError, match="GeoPoint"):
            codec.GeoPoint(*bad)


def test_documents_must_be_dicts() -> None:
    with pytest.raises(InvalidDocumentError, match="dict"):
        codec.encode_document([1, 2])


def test_a_document_of_exactly_one_mib_is_accepted_and_one_byte_more_is_not() -> None:
    overhead = len(codec.dumps({"x": ""}))
    fits = {"x": "a" * (codec.MAX_DOCUMENT_BYTES - overhead)}
    assert len(codec.encode_document(fits).encode()) == codec.MAX_DOCUMENT_BYTES
    too_big = {"x": "a" * (codec.MAX_DOCUMENT_BYTES - overhead + 1)}
    with pytest.raises(DocumentTooLargeError, match="limit"):
        codec.encode_document(too_big)


def test_the_size_limit_counts_utf8_bytes() -> None:
    with pytest.raises(DocumentTooLargeError):
        codec.encode_document({"x": "é" * (codec.MAX_DOCUMENT_BYTES // 2)})


def test_new_ids_are_unique_and_sorted_by_time() -> None:
    ids = [codec.new_id(1_800_000_000.0) for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert ids == sorted(ids)
    later = codec.new_id(1_800_000_001.0)
    assert later > ids[-1]


def test_stable_ids_depend_only_on_their_inputs() -> None:
    assert codec.stable_id(1_800_000_000.0, 42) == codec.stable_id(1_800_000_000.0, 42)
    assert codec.stable_id(1_800_000_000.0, 42) != codec.stable_id(1_800_000_000.0, 43)


def test_negative_zero_is_written_as_zero_and_large_floats_in_full() -> None:
    # As PostgreSQL's jsonb keeps them, so every store gives back the same float.
    assert codec.dumps({"z": -0.0, "l": [-0.0]}) == '{"z":0.0,"l":[0.0]}'
    assert codec.dumps([1e16, -2.5e22, 1e15]) == (
        "[10000000000000000.0,-25000000000000000000000.0,1000000000000000.0]"
    )
    for x in (1e16, 2.5e22, 1.2345678901234567e20, 1.7976931348623157e308, -1e300):
        assert codec.loads(codec.dumps(x)) == x
        assert "e+" not in codec.dumps(x)


def test_large_floats_in_full_keep_the_encoders_order_and_text_around_them() -> None:
    value = {"b": [1e16, "e+ in text", {"y": 2, "x": 1e17}], "a": "é\n", "c": None}
    assert codec.dumps(value) == (
        '{"b":[10000000000000000.0,"e+ in text",{"y":2,"x":100000000000000000.0}],'
        '"a":"é\\n","c":null}'
    )
    assert codec.canonical(value) == (
        '{"a":"é\\n","b":[10000000000000000.0,"e+ in text",{"x":100000000000000000.0,"y":2}],'
        '"c":null}'
    )


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"s": "a\x00"}, "Field s holds the character U+0000"),
        ({"l": [{"s": "\x00"}]}, "Field l[0].s"),
        ({"k\x00": 1}, "field name 'k\\x00'"),
        ({"": 1}, "Field <root> has an empty field name"),
        ({"m": [{"": 1}]}, "Field m[0] has an empty field name"),
    ],
)
def test_a_document_with_nul_or_an_empty_field_name_is_refused(
    data: dict[str, object], words: str
) -> None:
    with pytest.raises(InvalidDocumentError, match=re.escape(words)):
        codec.encode_document(data)


def test_text_that_only_looks_like_nul_or_an_empty_name_is_taken() -> None:
    for data in ({"s": "\\u0000"}, {"s": '"":'}, {"a": ""}, {"l": ["", ""]}):
        assert codec.loads(codec.encode_document(data)) == data
    assert codec.encode_document({"": 1}, is_fields=False) == '{"":1}'  # a message's data


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"a": 1, "a": 2}', "gives the key 'a' twice"),
        ('[{"b": {"c": 1, "c": 1}}]', "gives the key 'c' twice"),
        ("{", "is not valid JSON"),
        ("1" * 5000, "4,300 digits"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (b"\xff", "not UTF-8"),
    ],
)
def test_parse_refuses_what_json_would_take_wrongly_or_not_at_all(
    text: str | bytes, words: str
) -> None:
    with pytest.raises(InvalidDocumentError, match=words):
        codec.parse(text, "DATA")
    assert codec.parse('{"a": {"a": 1}, "b": [{"a": 2}]}', "DATA") == {
        "a": {"a": 1},
        "b": [{"a": 2}],
    }
