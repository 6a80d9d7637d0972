"""Document and collection paths, ids, and trigger path patterns with {wildcards}.

A pattern segment is a literal id, a wildcard `{name}` (one segment), or at most one
multi-segment wildcard `{name=**}` (one or more segments; the param is the joined path).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from oncefire.errors import InvalidPathError, InvalidPatternError

MAX_ID_BYTES = 1500
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode's control characters (Cc)
_WILDCARD = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)(=\*\*)?\}$")


def check_id(segment: str, what: str = "id") -> str:
    """Return a valid document or collection id, or raise InvalidPathError."""
    if not isinstance(segment, str) or not segment:
        raise InvalidPathError(f"A {what} must be a non-empty string; got {segment!r}.")
    if "/" in segment:
        raise InvalidPathError(f"The {what} {segment!r} contains '/': ids cannot contain slashes.")
    if segment in (".", ".."):
        raise InvalidPathError(f"The {what} {segment!r} is reserved: choose another id.")
    if not segment.isprintable() and (control := _CONTROL.search(segment)):
        raise InvalidPathError(
            f"The {what} {segment!r} holds the control character {control.group()!r}: ids "
            "are printable text (no NUL, tab, newline or other control characters)."
        )
    try:
        size = len(segment.encode())
    except UnicodeEncodeError:  # a lone surrogate: no store can hold it
        raise InvalidPathError(
            f"The {what} {segment!r} holds a lone surrogate, which is not text UTF-8 can "
            "encode: use valid Unicode."
        ) from None
    if size > MAX_ID_BYTES:
        raise InvalidPathError(f"A {what} must be at most {MAX_ID_BYTES} bytes of UTF-8.")
    return segment


def split(path: str) -> list[str]:
    """The checked segments of a slash-separated path."""
    if not isinstance(path, str) or not path.strip("/"):
        raise InvalidPathError(f"A path must be a non-empty string; got {path!r}.")
    return [check_id(part, "path segment") for part in path.strip("/").split("/")]


def document_path(path: str) -> str:
    """A valid document path (collection/id[/collection/id...]), normalised."""
    parts = split(path)
    if len(parts) % 2:
        raise InvalidPathError(
            f"{path!r} names a collection, not a document: a document path has an even "
            "number of segments, like 'orders/o1'."
        )
    return "/".join(parts)


def collection_path(path: str) -> str:
    """A valid collection path (collection[/id/collection...]), normalised."""
    parts = split(path)
    if len(parts) % 2 == 0:
        raise InvalidPathError(
            f"{path!r} names a document, not a collection: a collection path has an odd "
            "number of segments, like 'orders' or 'orders/o1/items'."
        )
    return "/".join(parts)


def parent_of(doc_path: str) -> str:
    """The collection path that holds a document."""
    return doc_path.rsplit("/", 1)[0]


@dataclass(frozen=True, slots=True)
class Pattern:
    """A document path pattern such as 'orders/{orderId}/items/{itemId}' or 'logs/{rest=**}'."""

    text: str
    segments: tuple[str, ...]
    wildcards: tuple[str | None, ...]
    rest: int | None = None  # the index of the {name=**} segment, if any

    @classmethod
    def parse(cls, text: str, *, depth: str = "document") -> Pattern:
        """Parse a pattern; depth is 'document' (even segments) or 'any'."""
        if not isinstance(text, str) or not text.strip("/"):
            raise InvalidPatternError(f"A path pattern must be a non-empty string; got {text!r}.")
        segments = tuple(text.strip("/").split("/"))
        names: list[str | None] = []
        rest: int | None = None
        for index, segment in enumerate(segments):
            match = _WILDCARD.match(segment)
            if match and match.group(2):
                if rest is not None:
                    raise InvalidPatternError(
                        f"Pattern {text!r} has two multi-segment wildcards: use at most one "
                        "{name=**}."
                    )
                rest = index
                names.append(match.group(1))
            elif match:
                names.append(match.group(1))
            elif "*" in segment:
                raise InvalidPatternError(
                    f"Bad segment {segment!r} in {text!r}: '*' is not a wildcard here; name it, "
                    "like {orderId} for one segment or {path=**} for one or more."
                )
            elif "{" in segment or "}" in segment:
                raise InvalidPatternError(
                    f"Bad wildcard {segment!r} in {text!r}: a wildcard is a whole segment "
                    "like {orderId} (or {path=**}), made of letters, digits and underscores."
                )
            else:
                try:
                    check_id(segment, "pattern segment")
                except InvalidPathError as exc:
                    raise InvalidPatternError(f"Bad pattern {text!r}: {exc}") from exc
                names.append(None)
        bound = [n for n in names if n]
        if len(bound) != len(set(bound)):
            raise InvalidPatternError(f"Pattern {text!r} uses the same wildcard name twice.")
        # A {name=**} segment can stand for any depth, so only a fixed pattern is checked.
        if depth == "document" and rest is None and len(segments) % 2:
            raise InvalidPatternError(
                f"Pattern {text!r} names a collection: a document pattern has an even number "
                "of segments, like 'orders/{orderId}'."
            )
        return cls("/".join(segments), segments, tuple(names), rest)

    def match(self, path: str) -> dict[str, str] | None:
        """The wildcard values if path matches this pattern, else None."""
        parts = path.split("/")
        if self.rest is None:
            return self._match_fixed(parts, self.segments, self.wildcards)
        after = len(self.segments) - self.rest - 1
        if len(parts) < len(self.segments):  # {name=**} takes at least one segment
            return None
        head = self._match_fixed(
            parts[: self.rest], self.segments[: self.rest], self.wildcards[: self.rest]
        )
        tail_parts = parts[len(parts) - after :] if after else []
        tail = self._match_fixed(
            tail_parts, self.segments[self.rest + 1 :], self.wildcards[self.rest + 1 :]
        )
        if head is None or tail is None:
            return None
        name = self.wildcards[self.rest]
        assert name is not None
        return {**head, name: "/".join(parts[self.rest : len(parts) - after]), **tail}

    def regex(self) -> re.Pattern[str]:
        """A regular expression whose fullmatch() takes exactly the paths match() matches: a
        write's source is tested against the functions' patterns with it, not by splitting."""
        one = "[^/]*"
        parts = [
            one if name is not None else re.escape(segment)
            for segment, name in zip(self.segments, self.wildcards, strict=True)
        ]
        if self.rest is not None:
            parts[self.rest] = f"{one}(?:/{one})*"
        return re.compile("/".join(parts))

    @staticmethod
    def _match_fixed(
        parts: list[str], segments: tuple[str, ...], wildcards: tuple[str | None, ...]
    ) -> dict[str, str] | None:
        if len(parts) != len(segments):
            return None
        params: dict[str, str] = {}
        for part, literal, name in zip(parts, segments, wildcards, strict=True):
            if name is not None:
                params[name] = part
            elif part != literal:
                return None
        return params
