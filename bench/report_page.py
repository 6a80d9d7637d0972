"""The page of bench/RESULTS.md being written, and how its figures are shown."""

from __future__ import annotations

from typing import Any

GOALS_DRAIN = {"sqlite": 30_000.0, "postgres": 20_000.0}  # over >= 10 s windows
GOALS_P50 = {"sqlite": 5.0, "postgres": 2.5}
GOAL_P99 = 10.0
GOAL_WRITE_RATIO = 0.75  # of a raw one-row commit
LABEL = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
PEER_LABEL = {
    "procrastinate": ("Procrastinate", "PostgreSQL"),
    "huey": ("Huey", "SQLite"),
    "celery": ("Celery (prefork)", "Redis"),
    "celery-threads": ("Celery (threads)", "Redis"),
    "dramatiq": ("Dramatiq", "Redis"),
    "rq": ("RQ", "Redis"),
}
CAPPED = "\N{DOUBLE DAGGER}"
SHORT = "\N{DAGGER}"
DASH = "\N{EN DASH}"
TIMES = "\N{MULTIPLICATION SIGN}"


def fig(summary: Any, digits: int = 0, unit: str = "") -> str:
    """'median (min-max)' of a summary, or a dash."""
    if not isinstance(summary, dict) or summary.get("median") is None:
        return DASH
    med, lo, hi = summary["median"], summary["min"], summary["max"]
    if len(summary.get("runs", [])) <= 1:
        return f"{med:,.{digits}f}{unit}"
    return f"{med:,.{digits}f}{unit} ({lo:,.{digits}f}{DASH}{hi:,.{digits}f})"


def med(summary: Any) -> float | None:
    if isinstance(summary, dict) and summary.get("median") is not None:
        return float(summary["median"])
    return None


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return DASH
    return f"{a / b:.2f}{TIMES}"


def mark(result: dict[str, Any]) -> str:
    return f" {CAPPED}" if result.get("capped") else ""


def runs_mark(runs: Any) -> str:
    """The cut-short mark when any of these runs was cut short."""
    return f" {CAPPED}" if any(r.get("capped") for r in runs or []) else ""


def short_mark(runs: Any) -> str:
    """The mark of a windowed drain whose backlog ran out before its window ended."""
    return f" {SHORT}" if any(r.get("short") for r in runs or []) else ""


def redis_is_volatile(facts: dict[str, Any]) -> bool | None:
    """Whether Redis kept nothing on disk in the sitting (no RDB snapshots, no AOF)."""
    redis = facts.get("redis")
    if not isinstance(redis, dict) or "save" not in redis:
        return None
    return not redis.get("save") and redis.get("appendonly") == "no"


def share_with_ceiling(share: float | None, least: float | None) -> str:
    """A share of raw commits, with the least write's share beside it when measured."""
    return (DASH if share is None else f"{share:.0%}") + (
        "" if least is None else f" (document and event alone: {least:.0%})"
    )


def met(ok: bool | None) -> str:
    return DASH if ok is None else ("yes" if ok else "**no**")


class Page:
    def __init__(self, results: dict[str, Any]) -> None:
        self.r = results
        self.once = results.get("oncefire", {})
        self.peers = results.get("peers", {})
        self.lines: list[str] = []
        self.unavailable = results.get("postgres_unavailable")

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def table(self, head: list[str], rows: list[list[str]]) -> None:
        self.add("| " + " | ".join(head) + " |", "|" + "---|" * len(head))
        for row in rows:
            self.add("| " + " | ".join(row) + " |")
        self.add("")

    def get(self, name: str) -> dict[str, Any]:
        value = self.once.get(name, {})
        return value if isinstance(value, dict) else {}

    def missing(self, name: str, store: str) -> str | None:
        """Why a figure is absent: PostgreSQL unavailable, a failure, or not run."""
        result = self.once.get(name)
        if store == "postgres" and self.unavailable:
            return f"not measured ({self.unavailable})"
        if result is None:
            return "not run"
        if "error" in result:
            return f"failed: {result['error']}"
        return None


def drain_of(page: Page, store: str) -> float | None:
    return med(page.get(f"throughput-{store}").get("drain_only"))
