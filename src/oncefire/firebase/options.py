"""Firebase's function options: what each becomes here, and a note for those that mean nothing.

`retry`, `timeout_sec` and `max_instances` keep their meaning (a param works as their value);
`cors` is served by `https_fn`. The options about Google's infrastructure (memory, region,
cpu, min_instances, secrets, ...) are accepted with every value Firebase takes and ignored,
each noted once in the log, so a ported module runs unchanged. Firebase's defaults hold: an
event function is not retried unless `retry=True`.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from enum import Enum, IntEnum, StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from oncefire.errors import ConfigError
from oncefire.firebase.params import Param, SecretParam, resolve

__all__ = [
    "RESET_VALUE",
    "CorsOptions",
    "IngressSetting",
    "MemoryOption",
    "RateLimits",
    "RetryConfig",
    "SupportedRegion",
    "Timezone",
    "VpcEgressSetting",
    "set_global_options",
]

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
        "secrets",  # a SecretParam reads its value from the environment, as any param
        "enforce_app_check",
        "preserve_external_changes",
        "omit",
        "invoker",
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
_noted: set[str] = set()
_lock = threading.Lock()

Timezone = ZoneInfo  # Firebase's options.Timezone is zoneinfo.ZoneInfo


class _Reset:
    """Firebase's RESET_VALUE: the platform's default, which here means the option unset."""

    def __repr__(self) -> str:
        return "RESET_VALUE"


RESET_VALUE = _Reset()


class VpcEgressSetting(StrEnum):
    """Firebase's VPC egress settings; accepted and ignored."""

    PRIVATE_RANGES_ONLY = "PRIVATE_RANGES_ONLY"
    ALL_TRAFFIC = "ALL_TRAFFIC"


class IngressSetting(StrEnum):
    """Firebase's ingress settings; accepted and ignored (bind the server's --host instead)."""

    ALLOW_ALL = "ALLOW_ALL"
    ALLOW_INTERNAL_ONLY = "ALLOW_INTERNAL_ONLY"
    ALLOW_INTERNAL_AND_GCLB = "ALLOW_INTERNAL_AND_GCLB"


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
    """Every region of Firebase's SDK; accepted and ignored."""

    ASIA_NORTHEAST1 = "asia-northeast1"
    ASIA_EAST1 = "asia-east1"
    ASIA_NORTHEAST2 = "asia-northeast2"
    EUROPE_NORTH1 = "europe-north1"
    EUROPE_WEST1 = "europe-west1"
    EUROPE_WEST4 = "europe-west4"
    US_CENTRAL1 = "us-central1"
    US_EAST1 = "us-east1"
    US_EAST4 = "us-east4"
    US_WEST1 = "us-west1"
    ASIA_EAST2 = "asia-east2"
    ASIA_NORTHEAST3 = "asia-northeast3"
    ASIA_SOUTHEAST1 = "asia-southeast1"
    ASIA_SOUTHEAST2 = "asia-southeast2"
    ASIA_SOUTH1 = "asia-south1"
    AUSTRALIA_SOUTHEAST1 = "australia-southeast1"
    EUROPE_CENTRAL2 = "europe-central2"
    EUROPE_WEST2 = "europe-west2"
    EUROPE_WEST3 = "europe-west3"
    EUROPE_WEST6 = "europe-west6"
    NORTHAMERICA_NORTHEAST1 = "northamerica-northeast1"
    SOUTHAMERICA_EAST1 = "southamerica-east1"
    US_WEST2 = "us-west2"
    US_WEST3 = "us-west3"
    US_WEST4 = "us-west4"


@dataclass(frozen=True)
class CorsOptions:
    """Which origins (and methods) an HTTP function answers cross-origin requests from."""

    cors_origins: str | list[str] | re.Pattern[str] | None = None
    cors_methods: str | list[str] | None = None


def set_global_options(**given: Any) -> None:
    """Options every function declared after this call takes unless it sets its own."""
    translate("set_global_options", given, allowed=KEPT)
    _globals.update(given)


def note_ignored(where: str, key: str, value: Any) -> None:
    """Log once per process that an option has no meaning here."""
    with _lock:
        if key in _noted:
            return
        _noted.add(key)
    log.info("%s: option %s=%r has no meaning in oncefire; ignored", where, key, _shown(value))


def forget_notes() -> None:
    """Note every ignored option again (a new default App: a new program, for tests)."""
    with _lock:
        _noted.clear()


def translate(where: str, given: dict[str, Any], *, allowed: frozenset[str]) -> dict[str, Any]:
    """oncefire options for Firebase's, noting the ignored ones in the log (once each per
    process); ConfigError for unknown ones."""
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
            note_ignored(where, key, value)
            continue
        value = None if value is RESET_VALUE else resolve(value)
        if key == "timeout_sec":
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


def _shown(value: Any) -> Any:
    """An option's value as the log shows it: an enum as its value, a param by its name."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, SecretParam | Param):
        return f"params.{value.name}"
    if isinstance(value, list):
        return [_shown(item) for item in value]
    return value
