"""The JSON form of document data and event payloads: strict, sized, datetime-aware."""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from oncefire.errors import DocumentTooLargeError, InvalidDocumentError, StoreError

MAX_DOCUMENT_BYTES = 1024 * 1024
TOO_DEEP = "The data is nested too deeply to store: flatten it (a few hundred levels at most)."
_TIME_TAG = "$time"
_GEO_TAG = "$geo"
_TAGS = (_TIME_TAG, _GEO_TAG)  # a map whose only key is one of these holds a value kind
_TIME_TAG_BYTES, _GEO_TAG_BYTES = _TIME_TAG.encode(), _GEO_TAG.encode()


@dataclass(frozen=True, slots=True)
class GeoPoint:
    """A point on Earth, as Firestore's GeoPoint: latitude and longitude in degrees."""

    latitude: float
    longitude: float

    def __post_init__(self) -> None:
        for name, value, bound in (
            ("latitude", self.latitude, 90),
            ("longitude", self.longitude, 180),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidDocumentError(f"GeoPoint {name} {value!r} is not a number.")
            if not -bound <= value <= bound:
                raise InvalidDocumentError(
                    f"GeoPoint {name} {value!r} is out of range: use -{bound} to {bound} degrees."
                )
            object.__setattr__(self, name, float(value))  # stored as a double, as in Firestore


_AS_IS = frozenset({str, int, bool})  # exact types JSON holds as they are (a float: if finite)


def _encode_value(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidDocumentError(
                f"Field {where or '<root>'} is {value}: NaN and infinity are not JSON; "
                "store null or a finite number."
            )
        return value + 0.0  # -0.0 is stored as 0.0 on every store: jsonb has no -0.0
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidDocumentError(
                f"Field {where} is a naive datetime: give it a timezone (UTC)."
            )
        return {_TIME_TAG: value.astimezone(UTC).isoformat()}
    if isinstance(value, GeoPoint):
        return {_GEO_TAG: [float(value.latitude), float(value.longitude)]}
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in _TAGS:
            raise InvalidDocumentError(
                f"Field {where or '<root>'} is a map whose only key is {next(iter(value))!r}, "
                "which oncefire reserves for datetimes and GeoPoints: rename that key."
            )
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidDocumentError(
                    f"Field {where or '<root>'} has key {key!r}: field names must be strings."
                )
            # Most fields are text, whole numbers, booleans or null: kept without a call.
            is_plain = item is None or type(item) in _AS_IS
            out[key] = item if is_plain else _encode_value(item, f"{where}.{key}" if where else key)
        return out
    if isinstance(value, list | tuple):
        return [_encode_value(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise InvalidDocumentError(
        f"Field {where or '<root>'} holds a {type(value).__name__}, which is not JSON: "
        "use dicts, lists, strings, numbers, booleans, None, aware datetimes or GeoPoints."
    )


def _decode_hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        if _TIME_TAG in obj:
            return datetime.fromisoformat(obj[_TIME_TAG])
        if _GEO_TAG in obj:
            return GeoPoint(*obj[_GEO_TAG])
    return obj


# json.dumps with these options would make its encoder again on every call.
_ENCODERS = {
    sort_keys: json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
    for sort_keys in (False, True)
}


def _json(value: Any, *, sort_keys: bool) -> str:
    """json.dumps of checked data; what JSON or UTF-8 cannot hold is an InvalidDocumentError."""
    try:
        encoded = _encode_value(value, "")
        text = _ENCODERS[sort_keys].encode(encoded)
        # A float of 1e16 or more is written with an exponent ("1e+16"), which PostgreSQL's
        # jsonb reads as a whole number: such floats are written out in full instead.
        return text if "e+" not in text else _in_full(encoded, sort_keys)
    except InvalidDocumentError:
        raise
    except RecursionError:
        raise InvalidDocumentError(TOO_DEEP) from None
    except ValueError:  # Python converts at most 4,300 digits of an integer to text
        raise InvalidDocumentError(
            "The data holds an integer of over 4,300 digits: store it as a string."
        ) from None


def _in_full(value: Any, sort_keys: bool) -> str:
    """The JSON of encoded data, as the encoder writes it, but for each float of 1e16 or more
    written without an exponent ("10000000000000000.0"): every store gives it back as the
    same float."""
    if isinstance(value, float) and abs(value) >= 1e16:
        return format(Decimal(repr(value)), "f") + ".0"
    if isinstance(value, dict):
        items = sorted(value.items()) if sort_keys else value.items()
        encode = _ENCODERS[sort_keys].encode
        return "{" + ",".join(f"{encode(k)}:{_in_full(v, sort_keys)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_in_full(item, sort_keys) for item in value) + "]"
    return _ENCODERS[sort_keys].encode(value)


def dumps(value: Any) -> str:
    """Strict compact JSON of a value (NaN, sets, bytes and naive datetimes are refused)."""
    return _json(value, sort_keys=False)


def canonical(value: Any) -> str:
    """JSON with sorted keys: the same text for the same data, whatever its key order."""
    return _json(value, sort_keys=True)


def utf8(text: str) -> bytes:
    """The UTF-8 bytes of JSON text; a lone surrogate (not Unicode text) is refused."""
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidDocumentError(
            f"The data holds a lone surrogate ({text[exc.start]!r}), which is not valid Unicode"
            " text: pair it, or send the bytes as base64."
        ) from None


def loads(text: str | bytes) -> Any:
    """Decode what dumps wrote (datetimes come back as aware datetimes)."""
    # A text without a tag holds no datetime or GeoPoint (dumps never escapes '$'): the
    # decoder needs no hook then, which halves its time.
    if isinstance(text, str):
        has_tag = _TIME_TAG in text or _GEO_TAG in text
    else:
        has_tag = _TIME_TAG_BYTES in text or _GEO_TAG_BYTES in text
    if not has_tag:
        return json.loads(text)
    return json.loads(text, object_hook=_decode_hook)


class _KeyTwice(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyTwice(key)
            seen.add(key)
    return out


def parse(text: str | bytes, what: str) -> Any:
    """JSON a person gave (a command's argument, a request's body), or InvalidDocumentError
    saying why not: not JSON, a key twice in one object (JSON would keep the last without a
    word), an integer past 4,300 digits, or nesting too deep."""
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except json.JSONDecodeError as exc:
        raise InvalidDocumentError(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from None
    except UnicodeDecodeError:
        raise InvalidDocumentError(f"{what} is not UTF-8 text.") from None
    except _KeyTwice as exc:
        raise InvalidDocumentError(
            f"{what} gives the key {exc.key!r} twice in one object, and JSON would keep only "
            "the last: give it once."
        ) from None
    except ValueError:  # an integer past Python's 4,300-digit conversion limit
        raise InvalidDocumentError(
            f"{what} holds an integer of over 4,300 digits: store it as a string."
        ) from None
    except RecursionError:
        raise InvalidDocumentError(
            f"{what} is nested too deeply: flatten it (a few hundred levels at most)."
        ) from None


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A stored value oncefire cannot decode (written around it, or damaged), in place of
    the value, so one bad row fails its own delivery and never a whole lease."""

    error: str


def decoded(value: Any) -> Any:
    """value, unless it is an Undecodable: then a StoreError that says why."""
    if isinstance(value, Undecodable):
        raise StoreError(f"A stored value cannot be decoded: {value.error}.")
    return value


def loads_or_undecodable(text: str | bytes) -> Any:
    """loads(text), or an Undecodable that says why not."""
    try:
        return loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        return Undecodable(f"{type(exc).__name__}: {exc}")


def is_jsonb_exact(text: str) -> bool:
    """Whether PostgreSQL's jsonb gives this JSON back as written, once encoded again: jsonb
    has no -0.0, and writes a float of 1e16 or more without its exponent (so it is read back
    as an integer). dumps writes neither (0.0, and such floats in full), so what this finds
    is older text, or a string (or a number such as -0.05) that looks like one, which costs
    only the one-statement write."""
    return "e+" not in text and "-0.0" not in text


def encode_document(data: Any, *, is_fields: bool = True) -> str:
    """JSON of a document's fields, checked for type, NUL characters (no store keeps them
    alike), empty field names (unless is_fields is False: a message's data may have them)
    and the 1 MiB limit."""
    if not isinstance(data, dict):
        raise InvalidDocumentError(
            f"Document data must be a dict of fields; got {type(data).__name__}."
        )
    text = dumps(data)
    refuse_nul(text)
    try:
        if is_fields and '"":' in text:  # an empty key (or text that looks like one)
            _refuse_empty_name(loads(text), "")
    except RecursionError:
        raise InvalidDocumentError(TOO_DEEP) from None
    size = len(utf8(text))
    if size > MAX_DOCUMENT_BYTES:
        raise DocumentTooLargeError(
            f"The document is {size:,} bytes of JSON; the limit is "
            f"{MAX_DOCUMENT_BYTES:,}: split it or store large blobs elsewhere."
        )
    return text


def refuse_nul(text: str, what: str = "") -> None:
    """Refuse JSON text (as dumps wrote it) whose data holds NUL, which no store keeps alike:
    an InvalidDocumentError naming the field, after `what` if given."""
    if "\\u0000" not in text:  # how the encoder writes NUL (or a backslash before "u0000")
        return
    try:
        _refuse_nul(loads(text), "")
    except RecursionError:
        raise InvalidDocumentError(TOO_DEEP) from None
    except InvalidDocumentError as exc:
        raise InvalidDocumentError(f"{what}: {exc}" if what else str(exc)) from None


def _refuse_nul(value: Any, where: str) -> None:
    """Raise InvalidDocumentError naming the first field or field name that holds NUL."""
    if isinstance(value, str) and "\x00" in value:
        raise InvalidDocumentError(
            f"Field {where or '<root>'} holds the character U+0000 (NUL), which no store keeps "
            "alike: remove it, or encode such values (base64)."
        )
    if isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key:
                raise InvalidDocumentError(
                    f"The field name {key!r} holds the character U+0000 (NUL), which no store "
                    "keeps alike: rename it."
                )
            _refuse_nul(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_nul(item, f"{where}[{i}]")


def _refuse_empty_name(value: Any, where: str) -> None:
    """Raise InvalidDocumentError naming the first map that has an empty field name."""
    if isinstance(value, dict):
        if "" in value:
            raise InvalidDocumentError(
                f"Field {where or '<root>'} has an empty field name (''): field names are "
                "non-empty strings; rename it."
            )
        for key, item in value.items():
            _refuse_empty_name(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_empty_name(item, f"{where}[{i}]")


def document_event(before: str | None, data_json: str, create_time: float, now: float) -> str:
    """The JSON of a document write's event, {'before', 'after'}, as dumps would write it,
    around the JSON already made of the document before the write (None: it did not exist)
    and of its new data (data_json), so neither is encoded again."""
    return (
        f'{{"before":{"null" if before is None else before},'
        f'"after":{{"data":{data_json},"create_time":{_number(create_time)},'
        f'"update_time":{_number(now)}}}}}'
    )


def _number(value: float) -> str:
    """A time as json.dumps writes it (a finite float: its repr, without the encoder)."""
    return repr(value) if type(value) is float and math.isfinite(value) else json.dumps(value)


_id_lock = threading.Lock()
_last_ms = 0
_last_rand = 0


def _uuid7(ms: int, rand: int) -> str:
    rand &= (1 << 74) - 1
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    text = f"{value:032x}"  # as str(uuid.UUID(int=value)) writes it, without the object
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def stable_id(at: float, seed: int) -> str:
    """A UUIDv7 string fixed by a time and a seed (the same inputs give the same id)."""
    return _uuid7(int(at * 1000), seed)


def new_id(now: float | None = None) -> str:
    """A UUIDv7 string: unique, and sorted by creation time within a process."""
    global _last_ms, _last_rand
    ms = int((time.time() if now is None else now) * 1000)
    with _id_lock:
        if ms <= _last_ms:
            ms = _last_ms
            _last_rand += 1
            rand = _last_rand
        else:
            rand = int.from_bytes(os.urandom(9), "big") >> 2  # 70 bits, room to count up
        _last_ms, _last_rand = ms, rand
    return _uuid7(ms, rand)
