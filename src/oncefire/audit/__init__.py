"""`oncefire audit`: static rules over an app's source and runtime rules over its history.

`audit(app, since=86400)` returns a Report; the CLI and `App.audit` call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncefire.audit.effects import OUTSIDE_MODULES
from oncefire.audit.findings import (
    RULES,
    Finding,
    Report,
    Rule,
    Severity,
    parse_duration,
    parse_severity,
)
from oncefire.audit.runtime import Thresholds, runtime_findings
from oncefire.audit.static import audit_trigger
from oncefire.errors import ConfigError
from oncefire.features.cost import estimate
from oncefire.features.prices import PriceTable
from oncefire.retry import is_real

if TYPE_CHECKING:
    from pathlib import Path

    from oncefire.engine.runtime import Runtime

__all__ = [
    "OUTSIDE_MODULES",
    "RULES",
    "Finding",
    "Report",
    "Rule",
    "Severity",
    "Thresholds",
    "audit",
    "parse_duration",
    "parse_severity",
]


def audit(
    rt: Runtime,
    *,
    since: float = 86400.0,
    is_static: bool = True,
    is_runtime: bool = True,
    outside_modules: tuple[str, ...] = OUTSIDE_MODULES,
    thresholds: Thresholds | None = None,
    prices: str | Path | None = None,
) -> Report:
    """Run the static rules over the app's functions and the runtime rules over the last
    `since` seconds of its store's history; with the runtime rules comes the cost section
    (oncefire.features.cost), priced by the TOML file `prices` (the defaults when None)."""
    if not is_real(since) or since <= 0:
        raise ConfigError(f"since={since!r} must be a positive number of seconds.")
    table = PriceTable.load(prices)  # a bad price table fails before any work
    findings: list[Finding] = []
    if is_static:
        for trigger in rt.triggers.values():
            findings.extend(audit_trigger(trigger, tuple(outside_modules)))
    if is_runtime:
        findings.extend(runtime_findings(rt, since, thresholds or Thresholds()))
    ordered = sorted(
        findings,
        key=lambda f: (-f.severity.rank, f.file or "~", f.line or 0, f.rule, f.function),
    )
    extra = {"cost": estimate(rt, since=since, prices=table)} if is_runtime else {}
    return Report(tuple(ordered), len(rt.triggers), since, extra)
