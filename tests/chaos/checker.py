"""The checker of the chaos suite: the ledger's promises against what the store holds at the end.

It reports, per (function, key):
- lost: acknowledged, yet neither ran to success nor became a dead letter, and not pending;
- unexpected: an attempt ran for a key no write acknowledged;
- duplicate deliveries: more than one attempt started (allowed: delivery is at-least-once);
- duplicate committed effects: more than one effect written through `tx.claim` (must be none);
- orphan effects: an effect committed for a key whose write the store does not hold (a failover
  that lost the write must lose its effect too: fencing, oncefire/model/fencing.py);
- unexplained duplicate outside effects: an `@idempotent` effect repeated although its earlier
  attempt neither failed nor was killed between the effect and the start of the repeat;
- dead (with the attempts charged), expired, unfinished (still pending or running);
- the most attempts of one function running at once, a killed process's run ending at its kill.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from tests.chaos.ledger import Entry

Key = tuple[str, str]  # (function, key)


@dataclass(frozen=True, slots=True)
class Delivery:
    """What the store says of one delivery at the end."""

    state: str
    attempts: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class StoreFacts:
    """The store's end state: deliveries by (function, key), committed effects by key."""

    deliveries: dict[Key, Delivery]
    committed: dict[str, int] = field(default_factory=dict)


@dataclass
class Report:
    """What the checker found."""

    acknowledged: int = 0
    lost: list[Key] = field(default_factory=list)
    unexpected: list[Key] = field(default_factory=list)
    duplicate_deliveries: int = 0
    duplicate_committed: list[str] = field(default_factory=list)
    orphan_effects: list[str] = field(default_factory=list)
    duplicate_outside: list[Key] = field(default_factory=list)
    explained_outside: int = 0
    dead: dict[Key, int] = field(default_factory=dict)
    expired: list[Key] = field(default_factory=list)
    unfinished: list[Key] = field(default_factory=list)
    starts: Counter[Key] = field(default_factory=Counter)
    most_at_once: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No loss, nothing unexpected, no effect twice, nothing left unfinished."""
        return not (
            self.lost
            or self.unexpected
            or self.duplicate_committed
            or self.orphan_effects
            or self.duplicate_outside
            or self.unfinished
        )

    def summary(self) -> str:
        """One paragraph for a failure message or a log."""
        return (
            f"{self.acknowledged} acknowledged; lost {self.lost[:10]} ({len(self.lost)}); "
            f"unexpected {self.unexpected[:10]} ({len(self.unexpected)}); "
            f"duplicate deliveries {self.duplicate_deliveries}; duplicate committed effects "
            f"{self.duplicate_committed[:10]}; orphan effects {self.orphan_effects[:10]}; "
            f"unexplained duplicate outside effects "
            f"{self.duplicate_outside[:10]} (explained {self.explained_outside}); dead "
            f"{len(self.dead)}; expired {len(self.expired)}; unfinished "
            f"{self.unfinished[:10]} ({len(self.unfinished)}); most at once {self.most_at_once}"
        )


def check(entries: list[Entry], facts: StoreFacts) -> Report:
    """Hold the ledger's entries (in time order) against the store's end state."""
    report = Report()
    acked = {(e.get("function"), e.key) for e in entries if e.kind == "ack"}
    report.acknowledged = len(acked)
    succeeded = {(e.get("function"), e.key) for e in entries if e.kind == "end" and e.get("ok")}
    for e in entries:
        if e.kind == "start":
            report.starts[(e.get("function"), e.key)] += 1
    report.duplicate_deliveries = sum(1 for n in report.starts.values() if n > 1)
    report.unexpected = sorted(k for k in report.starts if k not in acked)
    for k in sorted(acked):
        delivery = facts.deliveries.get(k)
        if delivery is not None and delivery.state == "dead":
            report.dead[k] = delivery.attempts
            if "expired" in (delivery.error or "") or "too old" in (delivery.error or ""):
                report.expired.append(k)
        elif delivery is not None and delivery.state in ("pending", "running"):
            report.unfinished.append(k)
        elif delivery is None or delivery.state != "succeeded" or k not in succeeded:
            report.lost.append(k)
    report.duplicate_committed = sorted(k for k, n in facts.committed.items() if n > 1)
    written = {key for _, key in facts.deliveries}
    report.orphan_effects = sorted(k for k in facts.committed if k not in written)
    _outside_effects(entries, report)
    report.most_at_once = _most_at_once(entries)
    return report


def _outside_effects(entries: list[Entry], report: Report) -> None:
    """Every outside effect but a key's last must be explained: its attempt failed, or its
    process was killed after it and before the attempt that repeated it started."""
    kills = [(e.get("victim"), e.at) for e in entries if e.kind == "kill"]
    failed = {_attempt(e) for e in entries if e.kind == "end" and not e.get("ok")}
    starts = {_attempt(e): e.at for e in entries if e.kind == "start"}  # an attempt's last
    by_key: dict[Key, list[Entry]] = defaultdict(list)
    for e in entries:
        if e.kind == "effect":
            by_key[(e.get("function"), e.key)].append(e)
    for k, effects in sorted(by_key.items()):
        for earlier, repeat in itertools.pairwise(effects):
            # The kill line is written once its victim is dead, so it follows all the victim
            # did. The bound is the repeat's start, not the earlier attempt's end line: the
            # @idempotent record is completed after the function returns, so a kill just after
            # the end line can still have cut that completion. A kill once the repeat had
            # begun cannot have caused it.
            repeated_at = min(starts.get(_attempt(repeat), repeat.at), repeat.at)
            killed = any(pid == earlier.pid and earlier.at < at < repeated_at for pid, at in kills)
            if killed or _attempt(earlier) in failed:
                report.explained_outside += 1
            else:
                report.duplicate_outside.append(k)
                break


def _attempt(e: Entry) -> tuple[int, str, str, object]:
    """The attempt a line is about: its process, function, key and attempt number."""
    return (e.pid, e.get("function"), e.key, e.get("attempt"))


def _most_at_once(entries: list[Entry]) -> dict[str, int]:
    """Per function, the most attempts between their start and end lines at one moment."""
    open_runs: dict[str, set[tuple[int, str, object]]] = defaultdict(set)
    most: dict[str, int] = defaultdict(int)
    for e in entries:
        run = (e.pid, e.key, e.get("attempt"))
        if e.kind == "start":
            open_runs[e.get("function")].add(run)
            most[e.get("function")] = max(
                most[e.get("function")], len(open_runs[e.get("function")])
            )
        elif e.kind == "end":
            open_runs[e.get("function")].discard(run)
        elif e.kind == "kill":  # a killed process's runs end with it
            for runs in open_runs.values():
                runs.difference_update({r for r in runs if r[0] == e.get("victim")})
    return dict(most)
