"""Audit findings: the rules, their severities and fix hints, and the report they make."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from oncefire.errors import ConfigError


class Severity(StrEnum):
    """How bad a finding is; `--fail-on` compares against it."""

    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        """Order of severities: a warning ranks below an error."""
        return 1 if self is Severity.WARNING else 2


@dataclass(frozen=True, slots=True)
class Rule:
    """One audit rule: its id (part of the interface), severity and how to fix it."""

    id: str
    severity: Severity
    hint: str


RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "retry-without-guard",
            Severity.ERROR,
            "decide about duplicates: @idempotent, tx.claim(event.id), a write keyed by "
            "event.id, PermanentError, or retry=False",
        ),
        Rule(
            "increment-in-trigger",
            Severity.ERROR,
            "increment inside `with db.transaction() as tx:` after `if not tx.claim(event.id): "
            "return`",
        ),
        Rule(
            "self-trigger",
            Severity.ERROR,
            "write to another collection, or skip the write when nothing changed",
        ),
        Rule("no-max-instances", Severity.WARNING, "cap concurrency with max_instances=N"),
        Rule(
            "external-call-without-key",
            Severity.WARNING,
            "pass an idempotency key derived from event.id, or use @idempotent",
        ),
        Rule(
            "broad-except",
            Severity.WARNING,
            "catch the errors you expect, and raise PermanentError for those a retry cannot fix",
        ),
        Rule(
            "looping-event",
            Severity.ERROR,
            "find why the event keeps failing; dismiss it or raise PermanentError for it",
        ),
        Rule(
            "poison-group",
            Severity.ERROR,
            "fix the error, or list it in permanent_errors; then replay the dead letters",
        ),
        Rule(
            "retry-storm",
            Severity.WARNING,
            "lower max_attempts or raise first_delay, and cap the function with max_instances",
        ),
        Rule(
            "dead-letter-growth",
            Severity.WARNING,
            "read the newest dead letters (`oncefire dlq list --function NAME`) and fix the cause",
        ),
        Rule(
            "orphan-function",
            Severity.WARNING,
            "run a worker that serves it, register it again, or forget it "
            "(`oncefire functions forget NAME`) if it is gone for good",
        ),
        Rule(
            "watched-table-changed",
            Severity.WARNING,
            "run `oncefire migrate` to make the table's triggers again",
        ),
        Rule(
            "unrouted-events",
            Severity.WARNING,
            "register a function whose trigger matches them within unrouted_retention (7 days), "
            "stop writing them, or app.ignore_unrouted(...) if no function will take them",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem the audit found, with where it is and how to fix it."""

    rule: str
    function: str
    message: str
    file: str | None = None
    line: int | None = None

    @property
    def severity(self) -> Severity:
        """The rule's severity."""
        return RULES[self.rule].severity

    @property
    def hint(self) -> str:
        """How to fix it."""
        return RULES[self.rule].hint

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the rule's severity and hint."""
        return {**asdict(self), "severity": str(self.severity), "hint": self.hint}

    def to_line(self) -> str:
        """One line for a person: rule, severity, function, file:line, message, hint."""
        where = f"{self.file}:{self.line}" if self.file else "-"
        return (
            f"{self.rule} [{self.severity}] {self.function} {where}: {self.message} "
            f"(fix: {self.hint})"
        )


@dataclass(frozen=True, slots=True)
class Report:
    """Every finding of one audit, and what was audited."""

    findings: tuple[Finding, ...]
    functions: int
    since: float
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """Counts by severity and rule."""
        severities = Counter(str(f.severity) for f in self.findings)
        return {
            "functions": self.functions,
            "since": self.since,
            "errors": severities.get("error", 0),
            "warnings": severities.get("warning", 0),
            "rules": dict(sorted(Counter(f.rule for f in self.findings).items())),
        }

    def to_dict(self) -> dict[str, Any]:
        """The `--json` form: findings and summary, and the cost section when there is one."""
        out: dict[str, Any] = {
            "findings": [f.to_dict() for f in self.findings],
            "summary": self.summary(),
        }
        if "cost" in self.extra:
            out["cost"] = self.extra["cost"].to_dict()
        return out

    def is_failing(self, threshold: str | Severity = Severity.ERROR) -> bool:
        """Whether any finding is at or above the threshold severity."""
        bar = parse_severity(threshold)
        return any(f.severity.rank >= bar.rank for f in self.findings)


def parse_severity(text: str | Severity) -> Severity:
    """A severity from its name, or a ConfigError."""
    try:
        return Severity(text)
    except ValueError:
        raise ConfigError(f"Unknown severity {text!r}: use warning or error.") from None


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds from '90', '30s', '15m', '24h', '7d' or '2w'; a ConfigError otherwise."""
    match = _DURATION.match(text)
    if not match or float(match.group(1)) <= 0:
        raise ConfigError(
            f"Bad duration {text!r}: give a positive number with s, m, h, d or w, like 24h."
        )
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
