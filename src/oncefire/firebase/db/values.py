"""Realtime Database paths and values: what a key may hold, how a written value is normalised
(arrays become objects keyed "0", "1", ...; null and empty objects vanish; server values are
resolved), how a read value is shown (an object keyed by most of 0..n is an array again), and
the value at or under a path.

A path is a tuple of keys, () for the root. A key is a non-empty string of at most 768 bytes
without . $ # [ ] / or control characters, as Firebase requires.
"""

from __future__ import annotations

import math
import re
from typing import Any

from oncefire.errors import InvalidDocumentError, InvalidPathError

Path = tuple[str, ...]
MAX_KEY_BYTES = 768
MAX_DEPTH = 32
_BAD_KEY = re.compile(r"[.$#\[\]/\x00-\x1f\x7f]")


def parse(path: Any) -> Path:
    """The keys of a slash-separated path ('/' and '' are the root)."""
    if not isinstance(path, str):
        raise InvalidPathError(f'Invalid path: "{path}". Path must be a string.')
    keys = tuple(key for key in path.split("/") if key)
    for key in keys:
        check_key(key, f'Invalid path: "{path}"')
    if len(keys) > MAX_DEPTH:
        raise InvalidPathError(f'Invalid path: "{path}". A path has at most {MAX_DEPTH} keys.')
    return keys


def check_key(key: Any, where: str) -> str:
    """A valid key, or InvalidPathError (a ValueError) saying why not."""
    if not isinstance(key, str) or not key:
        raise InvalidPathError(f"{where}: a key is a non-empty string; got {key!r}.")
    if _BAD_KEY.search(key):
        raise InvalidPathError(
            f"{where}: the key {key!r} holds one of . $ # [ ] / or a control character, "
            "which Firebase keys cannot hold."
        )
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise InvalidPathError(f"{where}: a key is at most {MAX_KEY_BYTES} bytes of UTF-8.")
    return key


def text(path: Path) -> str:
    """The path as Firebase writes it: '/messages/m1' ('/' for the root)."""
    return "/" + "/".join(path)


def normalised(value: Any, now_ms: int, current: Any = None, where: str = "") -> Any:
    """A written value as it is stored: None (nothing), a leaf (str, int, float, bool) or a
    dict of keys to normalised values, never empty. current is the stored value there (for
    an increment). {".sv": "timestamp"} is the time in milliseconds; {".sv": {"increment": n}}
    adds n to the stored number."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidDocumentError(f"{where or '/'} holds {value}, which is not JSON.")
        return value
    if isinstance(value, list | tuple):
        value = {str(i): item for i, item in enumerate(value)}
    if not isinstance(value, dict):
        raise InvalidDocumentError(
            f"{where or '/'} holds a {type(value).__name__}: a Realtime Database value is "
            "JSON (dicts, lists, strings, numbers, booleans, None)."
        )
    if ".sv" in value:
        return _server_value(value[".sv"], now_ms, current, where)
    out = {}
    for key, item in value.items():
        check_key(key, f"Invalid value at {where or '/'}")
        inner = current.get(key) if isinstance(current, dict) else None
        kept = normalised(item, now_ms, inner, f"{where}/{key}")
        if kept is not None:
            out[key] = kept
    return out or None


def _server_value(spec: Any, now_ms: int, current: Any, where: str) -> Any:
    if spec == "timestamp":
        return now_ms
    if isinstance(spec, dict) and set(spec) == {"increment"}:
        step = spec["increment"]
        if isinstance(step, bool) or not isinstance(step, int | float):
            raise InvalidDocumentError(f"{where or '/'}: increment takes a number.")
        base = current if isinstance(current, int | float) and not isinstance(current, bool) else 0
        return base + step
    raise InvalidDocumentError(
        f"{where or '/'}: unknown server value {spec!r}; use 'timestamp' or {{'increment': n}}."
    )


def shown(value: Any) -> Any:
    """A stored value as a read gives it: an object whose keys are whole numbers covering
    more than half of 0..max is a list (with None in the gaps), as Firebase returns it."""
    if not isinstance(value, dict):
        return value
    items = {key: shown(item) for key, item in value.items()}
    if all(key.isdigit() and (key == "0" or not key.startswith("0")) for key in items):
        top = max(int(key) for key in items)
        if len(items) * 2 > top + 1:
            return [items.get(str(i)) for i in range(top + 1)]
    return items


def value_at(tree: Any, path: Path) -> Any:
    """The stored value at path under tree (None when nothing is there)."""
    for key in path:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(key)
    return tree


def with_value(tree: Any, path: Path, value: Any) -> Any:
    """tree with the value at path replaced (None deletes it), emptied objects removed; a
    leaf on the way becomes an object."""
    if not path:
        return value
    out = dict(tree) if isinstance(tree, dict) else {}
    inner = with_value(out.get(path[0]), path[1:], value)
    if inner is None:
        out.pop(path[0], None)
    else:
        out[path[0]] = inner
    return out or None


def leaves(value: Any, path: Path = ()) -> dict[Path, Any]:
    """The leaves of a stored value by their paths (below path)."""
    if isinstance(value, dict):
        found: dict[Path, Any] = {}
        for key, item in value.items():
            found.update(leaves(item, (*path, key)))
        return found
    return {} if value is None else {path: value}


def from_leaves(found: dict[Path, Any], base: Path) -> Any:
    """The stored value at base made from leaves under it (paths that start with base)."""
    root: dict[str, Any] = {}
    for path, leaf in found.items():
        below = path[len(base) :]
        if not below:
            return leaf  # a leaf at base: nothing lies under a leaf
        node = root
        for key in below[:-1]:
            node = node.setdefault(key, {})
        node[below[-1]] = leaf
    return root or None
