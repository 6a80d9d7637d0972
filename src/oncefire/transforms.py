"""Field transforms of document writes (SERVER_TIMESTAMP, DELETE_FIELD, Increment, ArrayUnion,
ArrayRemove, Maximum, Minimum), and the merge and update rules that apply them to stored
fields. Each transform works on the stored value as Firestore's does: a field that is not a
number (or not an array) is taken as missing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oncefire.clock import to_datetime
from oncefire.errors import InvalidDocumentError
from oncefire.model import codec
from oncefire.model.index_keys import rank
from oncefire.retry import is_real

TOO_DEEP = codec.TOO_DEEP


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


SERVER_TIMESTAMP: Any = _Sentinel("SERVER_TIMESTAMP")
DELETE_FIELD: Any = _Sentinel("DELETE_FIELD")


@dataclass(frozen=True, slots=True)
class Increment:
    """A field transform: add `amount` to the stored number (a missing field counts as 0)."""

    amount: int | float

    def __post_init__(self) -> None:
        if not is_real(self.amount):
            raise InvalidDocumentError(
                f"Increment({self.amount!r}): the amount must be a finite int or float "
                "(not a bool, a string, NaN or infinity)."
            )


@dataclass(frozen=True, slots=True)
class Maximum:
    """A field transform: keep the larger of the stored number and `value`."""

    value: int | float

    def __post_init__(self) -> None:
        _check_number(self, self.value)


@dataclass(frozen=True, slots=True)
class Minimum:
    """A field transform: keep the smaller of the stored number and `value`."""

    value: int | float

    def __post_init__(self) -> None:
        _check_number(self, self.value)


def _check_number(transform: object, value: Any) -> None:
    if not is_real(value):
        raise InvalidDocumentError(
            f"{type(transform).__name__}({value!r}): the value must be a finite int or float."
        )


class ArrayUnion:
    """A field transform: add each value the stored array lacks, in order (a field that is
    not an array becomes an array of these values)."""

    __slots__ = ("values",)

    def __init__(self, values: list[Any] | tuple[Any, ...]) -> None:
        if not isinstance(values, list | tuple):
            raise InvalidDocumentError(
                f"ArrayUnion({values!r}) takes a list of values, such as ArrayUnion(['a'])."
            )
        self.values = list(values)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ArrayUnion)
            and type(other) is type(self)
            and other.values == self.values
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, codec.canonical(self.values)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.values!r})"


class ArrayRemove(ArrayUnion):
    """A field transform: remove every instance of these values from the stored array (a
    field that is not an array becomes an empty array)."""

    __slots__ = ()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _transform(current: Any, value: Any, now: float) -> Any:
    if value is SERVER_TIMESTAMP:
        return to_datetime(now)
    if isinstance(value, Increment):
        return (current if _is_number(current) else 0) + value.amount
    if isinstance(value, Maximum | Minimum):
        if not _is_number(current):
            return value.value
        pick = max if isinstance(value, Maximum) else min
        return pick(current, value.value, key=lambda number: rank(number))
    if isinstance(value, ArrayRemove):
        gone = {rank(item) for item in _resolve(value.values, now)}
        return [item for item in current if rank(item) not in gone] if type(current) is list else []
    if isinstance(value, ArrayUnion):
        out = list(current) if type(current) is list else []
        seen = {rank(item) for item in out}
        for item in _resolve(value.values, now):
            if rank(item) not in seen:
                seen.add(rank(item))
                out.append(item)
        return out
    if isinstance(value, dict):
        return {k: _resolve(v, now) for k, v in value.items()}
    return value


# Values no transform changes, told by their exact type (a write's fields are mostly these).
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _resolve(value: Any, now: float) -> Any:
    if type(value) in _PLAIN:
        return value
    if value is DELETE_FIELD:
        raise InvalidDocumentError("DELETE_FIELD is allowed only in update() or set(merge=True).")
    if isinstance(value, dict):
        return {k: _resolve(v, now) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, now) for v in value]
    return _transform(None, value, now)


def _merge(current: dict[str, Any], data: dict[str, Any], now: float) -> dict[str, Any]:
    out = dict(current)
    for key, value in data.items():
        if value is DELETE_FIELD:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value, now)
        else:
            out[key] = _transform(out.get(key), value, now)
    return out


def field_names(path: Any, what: str = "field path") -> list[str]:
    """The names of a dotted field path ('customer.email'), or InvalidDocumentError."""
    if not isinstance(path, str) or not all(names := path.split(".")):
        raise InvalidDocumentError(
            f"Bad {what} {path!r}: use a field name, or names joined by dots such as "
            "'customer.email' (non-empty strings)."
        )
    if "\x00" in path:
        raise InvalidDocumentError(
            f"Bad {what} {path!r}: it holds the character U+0000 (NUL), which no store keeps alike."
        )
    return names


def _update(current: dict[str, Any], fields: dict[str, Any], now: float) -> dict[str, Any]:
    out = codec.loads(codec.dumps(current))
    for field_path, value in fields.items():
        parts = field_names(field_path)
        node = out
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        if value is DELETE_FIELD:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = _transform(node.get(parts[-1]), _resolve_nested(value, now), now)
    return dict(out)


def _resolve_nested(value: Any, now: float) -> Any:
    return _resolve(value, now) if isinstance(value, dict | list) else value


def resolve(value: Any, now: float) -> Any:
    """New data with its transforms applied (DELETE_FIELD is refused)."""
    try:
        return _resolve(value, now)
    except RecursionError:
        raise InvalidDocumentError(TOO_DEEP) from None


def merge(current: dict[str, Any], data: dict[str, Any], now: float) -> dict[str, Any]:
    """set(merge=True): data's fields merged into the current ones, transforms applied."""
    try:
        return _merge(current, data, now)
    except RecursionError:
        raise InvalidDocumentError(TOO_DEEP) from None


def apply_update(current: dict[str, Any], fields: dict[str, Any], now: float) -> dict[str, Any]:
    """update(): dotted field paths set, transformed or deleted in the current fields."""
    try:
        return _update(current, fields, now)
    except RecursionError:
        raise InvalidDocumentError(TOO_DEEP) from None
