"""Which unrouted events are warned about.

Every event no function takes is kept for `unrouted_retention` and delivered to the first
function registered later that takes it. The warnings (the dashboard's banner, the
`oncefire_unrouted_events` gauge, `oncefire stats`, the audit's `unrouted-events`) count only
those of an *awaited* source: a collection, topic or table that some function took (recorded
when it is registered, and again when it is forgotten) or that an operator named
(`app.keep_unrouted(...)`, the `keep_unrouted` setting). Writes to a collection no function
ever took are kept without a word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, assert_never

from oncefire.errors import ConfigError
from oncefire.model.paths import Pattern, check_id
from oncefire.model.trigger_kind import TriggerKind
from oncefire.stores.base import Store
from oncefire.stores.catalogue import awaited as stored
from oncefire.stores.reads import Awaited
from oncefire.tables import parse_source

__all__ = ["Awaited", "UnroutedReport", "await_functions", "ignore", "keep", "report"]

# What the origin of an unrouted event of each kind is called in a warning.
LABELS: dict[str, str] = {
    TriggerKind.DOCUMENT: "collection",
    TriggerKind.MESSAGE: "topic",
    TriggerKind.ROW: "table",
}
_ONE = "[^/]+"


@dataclass(frozen=True, slots=True)
class UnroutedReport:
    """The events no function has taken yet: how many are kept, how many of them the
    warnings count (those of an awaited source), and where those come from."""

    kept: int
    awaited: int
    origins: tuple[tuple[str, int], ...]  # ("collection orders", events) of the awaited, most first

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def document_source(pattern: str) -> str:
    """A document pattern as an awaited source: its wildcards without their names, and a
    literal last segment widened to the whole collection ('orders/{id}' -> 'orders/{}')."""
    p = Pattern.parse(pattern, depth="any")
    parts = [
        "{**}" if i == p.rest else "{}" if name is not None else segment
        for i, (segment, name) in enumerate(zip(p.segments, p.wildcards, strict=True))
    ]
    if p.wildcards[-1] is None:
        parts[-1] = "{}"
    return "/".join(parts)


def trigger_source(kind: str, source: str) -> tuple[str, str] | None:
    """(kind, source) a function of this kind and stored source awaits; None for schedules,
    HTTP functions and Realtime Database values, whose events are not kept unrouted."""
    match TriggerKind(kind):
        case TriggerKind.DOCUMENT:
            return TriggerKind.DOCUMENT, document_source(source)
        case TriggerKind.MESSAGE:
            return TriggerKind.MESSAGE, source
        case TriggerKind.ROW:
            return TriggerKind.ROW, parse_source(source)[0]
        case TriggerKind.SCHEDULE | TriggerKind.HTTP | TriggerKind.DATABASE:
            return None
        case unknown:
            assert_never(unknown)


def named_sources(name: str) -> list[tuple[str, str]]:
    """(kind, source) pairs one name of keep_unrouted stands for: a bare name is a topic, a
    collection and a table; a path or pattern ('users/{u}/orders') a collection's documents."""
    if not isinstance(name, str):
        raise ConfigError(f"keep_unrouted takes topic or collection names; got {name!r}.")
    if "/" not in name.strip("/") and "{" not in name:
        bare = check_id(name, "topic or collection")
        return [
            (TriggerKind.MESSAGE, bare),
            (TriggerKind.DOCUMENT, f"{bare}/{{}}"),
            (TriggerKind.ROW, bare),
        ]
    path = name.strip("/")
    pattern = Pattern.parse(path, depth="any")
    if pattern.rest is None and len(pattern.segments) % 2:
        path += "/{oncefire_id}"  # a collection: its documents
    return [(TriggerKind.DOCUMENT, document_source(path))]


def _regex(source: str) -> re.Pattern[str]:
    parts = [
        _ONE if s == "{}" else f"{_ONE}(?:/{_ONE})*" if s == "{**}" else re.escape(s)
        for s in source.split("/")
    ]
    return re.compile("/".join(parts))


def is_awaited(kind: str, origin: str, awaited: Iterable[Awaited]) -> bool:
    """Whether unrouted events of this kind and origin (a collection, topic or table) come
    from an awaited source."""
    for a in awaited:
        if a.kind != kind:
            continue
        if kind == TriggerKind.DOCUMENT and _regex(a.source).fullmatch(f"{origin}/x"):
            return True
        if kind != TriggerKind.DOCUMENT and a.source == origin:
            return True
    return False


def report(store: Store) -> UnroutedReport:
    """The unrouted events kept now, and those the warnings count."""
    found = store.reads.unrouted_origins()
    awaited = store.reads.awaited_sources()
    origins = tuple(
        (f"{LABELS[kind]} {origin}", n)
        for kind, origin, n in found
        if kind in LABELS and is_awaited(kind, origin, awaited)
    )
    return UnroutedReport(sum(n for *_, n in found), sum(n for _, n in origins), origins)


def await_functions(store: Store, functions: Iterable[tuple[str, str, str]], now: float) -> None:
    """Record the sources these (name, kind, source) functions take as awaited: should no
    function take their events one day, those are warned about."""
    found = []
    for name, kind, source in functions:
        pair = trigger_source(kind, source)
        if pair is not None:
            found.append(Awaited(*pair, "function", name))
    stored.await_sources(store, found, now)


def keep(store: Store, names: Iterable[str], now: float) -> None:
    """Warn about the unrouted events of these topics, collections or tables."""
    pairs = [pair for name in names for pair in named_sources(name)]
    stored.await_sources(store, [Awaited(*p, "kept") for p in pairs], now)


def ignore(store: Store, names: Iterable[str]) -> int:
    """Warn no more about the unrouted events of these sources; how many were awaited."""
    return stored.ignore_sources(store, [p for name in names for p in named_sources(name)])
