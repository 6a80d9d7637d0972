"""Firebase's function options: what each becomes here, and a note for those that mean nothing.

`retry`, `timeout_sec` and `max_instances` keep their meaning; the options about Google's
infrastructure (memory, region, cpu, ...) are accepted and ignored with one logged note each,
so a ported module runs unchanged. Firebase's defaults hold: an event function is not
retried unless `retry=True`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any

from oncefire.errors import ConfigError

log = logging.getLogger(__name__)

# Accepted everywhere, meaningless here: the runtime is this machine and this store.
IGNORED = frozenset(
    {
        "region",
        "memory",
        "cpu",
        "min_instances",
        "concurrency",  # the workers' --concurrency sets how many attempts run at once
        "vpc_connector",
        "vpc_connector_egress_settings",
        "service_account",
        "ingress",
        "labels",
        "secrets",
        "enforce_app_check",
        "preserve_external_changes",
        "omit",
        "invoker",
        "cors",
        "database",
        "namespace",
        "retry_count",  # scheduler retry settings: a schedule tick is retried by retry=True
        "max_retry_seconds",
        "min_backoff_seconds",
        "max_backoff_seconds",
        "max_doublings",
    }
)
KEPT = frozenset({"retry", "timeout_sec", "max_instances"})
_globals: dict[str, Any] = {}


@dataclass(frozen=True)
class RetryConfig:
    """How a task queue function's task is retried (Cloud Tasks' retry settings); None takes
    Cloud Tasks' default. See tasks_fn for how each maps onto a RetryPolicy."""

    max_attempts: int | None = None
    max_retry_seconds: int | None = None
    max_backoff_seconds: int | None = None
    max_doublings: int | None = None
    min_backoff_seconds: int | None = None


@dataclass(frozen=True)
class RateLimits:
    """How fast and how many at once a task queue function's tasks are dispatched."""

    max_concurrent_dispatches: int | None = None
    max_dispatches_per_second: int | float | None = None


class MemoryOption(IntEnum):
    """Firebase's memory sizes (MB); accepted and ignored."""

    MB_128 = 128
    MB_256 = 256
    MB_512 = 512
    GB_1 = 1 << 10
    GB_2 = 2 << 10
    GB_4 = 4 << 10
    GB_8 = 8 << 10
    GB_16 = 16 << 10
    GB_32 = 32 << 10


class SupportedRegion(StrEnum):
    """Some of Firebase's regions; accepted and ignored."""

    US_CENTRAL1 = "us-central1"
    US_EAST1 = "us-east1"
    EUROPE_WEST1 = "europe-west1"
    ASIA_NORTHEAST1 = "asia-northeast1"


def set_global_options(**given: Any) -> None:
    """Options every function declared after this call takes unless it sets its own."""
    translate("set_global_options", given, allowed=KEPT)
    _globals.update(given)


def translate(where: str, given: dict[str, Any], *, allowed: frozenset[str]) -> dict[str, Any]:
    """oncefire options for Firebase's, noting the ignored ones in the log (one line each, for
    each function declared); ConfigError for unknown ones."""
    merged = {**{k: v for k, v in _globals.items() if k in allowed}, **given}
    unknown = sorted(set(merged) - allowed - IGNORED)
    if unknown:
        raise ConfigError(
            f"{where} got unknown option(s) {', '.join(unknown)}; it takes "
            f"{', '.join(sorted(allowed))} (and Firebase's deployment options, ignored here)."
        )
    out: dict[str, Any] = {}
    for key, value in merged.items():
        if key in IGNORED:
            shown = getattr(value, "value", value)  # an enum member shows as its value
            log.info("%s: option %s=%r has no meaning in oncefire; ignored", where, key, shown)
        elif key == "timeout_sec":
            if value is not None:
                out["timeout"] = float(value)
        elif value is not None:
            out[key] = value
    return out


def event_options(where: str, given: dict[str, Any]) -> dict[str, Any]:
    """translate() for an event function, with Firebase's default: not retried."""
    opts = translate(where, given, allowed=KEPT)
    opts.setdefault("retry", False)
    return opts
