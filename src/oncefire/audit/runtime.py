"""The runtime rules: read the store's recorded history over a window for storms and loops."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oncefire.audit.findings import Finding
from oncefire.audit.source import scope_of
from oncefire.errors import ConfigError
from oncefire.operations import unrouted
from oncefire.operations.functions import UNSERVED_AFTER
from oncefire.operations.history import History as Backlogs
from oncefire.tables import changed_tables

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime
    from oncefire.operations.unrouted import UnroutedReport


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When history counts as a problem; the defaults suit the default retry policy."""

    looping_attempts: int = 10  # more attempts of one event than this: looping-event
    looping_deliveries: int = 3  # more deliveries of one event to one function than this
    looping_depth: int = 12  # a chain of function writes this deep (the loop limit is 16)
    poison_events: int = 5  # at least this many events failing with one error: poison-group
    storm_ratio: float = 2.0  # late-half attempts at least this many times the early half
    storm_attempts: int = 20  # ... and at least this many late-half attempts
    storm_failure_rate: float = 0.75  # ... with at least this late-half failure rate
    dead_letter_growth: int = 10  # late-half dead letters at least this, and over the early
    # A registered function whose oldest due delivery has waited this long (seconds), and that
    # no worker has said it serves for as long (or ever): orphan-function.
    unserved_after: float = UNSERVED_AFTER

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) <= 0:
                raise ConfigError(f"Audit threshold {name} must be positive.")


def runtime_findings(rt: Runtime, since: float, limits: Thresholds) -> list[Finding]:
    """The findings of every runtime rule over the last `since` seconds of history."""
    now = rt.clock.now()
    start, middle = now - since, now - since / 2
    history = rt.store.reads

    def finding(rule: str, function: str, message: str) -> Finding:
        trigger = rt.triggers.get(function)
        scope = scope_of(trigger.fn) if trigger is not None else None
        if scope is None:
            return Finding(rule, function, message)
        return Finding(rule, function, message, scope.shown_file, scope.node.lineno)

    found: list[Finding] = []
    for loop in history.looping_events(start, limits.looping_attempts, limits.looping_deliveries):
        found.append(
            finding(
                "looping-event",
                loop.function,
                f"event {loop.event_id} ran {loop.attempts} times over {loop.deliveries} "
                "deliveries",
            )
        )
    for chain in history.deep_lineages(start, limits.looping_depth):
        found.append(
            finding(
                "looping-event",
                chain.function,
                f"a chain of function writes from event {chain.root_id} reached depth "
                f"{chain.depth} ({chain.events} of its events at depth {limits.looping_depth} or "
                f"more; chains are stopped at {rt.settings.max_event_depth})",
            )
        )
    for group in history.failure_groups(start, limits.poison_events):
        found.append(
            finding(
                "poison-group",
                group.function,
                f"{group.events} events failed with {group.error[:120]!r} "
                f"({group.attempts} attempts)",
            )
        )
    for half in history.attempt_halves(start, middle):
        late_rate = half.late_failures / half.late if half.late else 0.0
        early_rate = half.early_failures / half.early if half.early else 0.0
        if (
            half.late >= limits.storm_attempts
            and half.late >= limits.storm_ratio * half.early
            and late_rate >= limits.storm_failure_rate
            and late_rate > early_rate
        ):
            per_minute = half.late / (since / 2 / 60)
            found.append(
                finding(
                    "retry-storm",
                    half.function,
                    f"{half.late} attempts in the last half of the window (was {half.early}), "
                    f"{per_minute:.2f} a minute, {late_rate:.0%} failing (was {early_rate:.0%})",
                )
            )
    for half in history.dead_letter_halves(start, middle):
        if half.late >= limits.dead_letter_growth and half.late > half.early:
            found.append(
                finding(
                    "dead-letter-growth",
                    half.function,
                    f"{half.late} new dead letters in the last half of the window "
                    f"(was {half.early})",
                )
            )
    for name, message in orphans(rt, now, limits.unserved_after):
        found.append(finding("orphan-function", name, message))
    for table, sentence in changed_tables(rt.store):  # the table stands in for a function
        found.append(Finding("watched-table-changed", table, sentence))
    waiting = unrouted.report(rt.store)
    if waiting.awaited:
        found.append(Finding("unrouted-events", "-", unrouted_message(waiting)))
    return found


def orphans(rt: Runtime, now: float, unserved_after: float) -> list[tuple[str, str]]:
    """(function, why) for each stored function no worker serves: one this app does not
    register, or one it registers whose oldest due delivery has waited more than
    `unserved_after` seconds while no worker has said it serves it (the last-seen time workers
    keep) for as long, or ever."""
    backlog = Backlogs(rt).backlog()
    out = []
    for row in rt.store.function_rows():
        if row.name not in rt.triggers:
            out.append(
                (
                    row.name,
                    "the store knows this function but the app does not register it: its "
                    "events wait for no one",
                )
            )
            continue
        waiting = backlog.get(row.name)
        if waiting is None or waiting.oldest_age is None or waiting.oldest_age <= unserved_after:
            continue
        if row.last_seen is not None and now - row.last_seen <= unserved_after:
            continue
        served = (
            "no worker has served it yet"
            if row.last_seen is None
            else f"no worker has served it for {now - row.last_seen:.0f} s"
        )
        out.append(
            (
                row.name,
                f"{served}: its {waiting.pending} pending deliveries wait, the oldest due "
                f"for {waiting.oldest_age:.0f} s",
            )
        )
    return out


def unrouted_message(report: UnroutedReport, shown: int = 5) -> str:
    """How many events of an awaited source no function took, and where they came from."""
    parts = [f"{origin} ({n})" for origin, n in report.origins[:shown]]
    more = f", and {len(report.origins) - shown} more" if len(report.origins) > shown else ""
    return (
        f"{report.awaited} events matched no function, from {', '.join(parts)}{more}: a "
        "function used to take them, or keep_unrouted names them"
    )
