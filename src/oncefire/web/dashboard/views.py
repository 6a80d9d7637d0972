"""What the pages and the API show, built from App's methods: both call these functions."""

from __future__ import annotations

from typing import Any

from oncefire.app import App
from oncefire.errors import ConfigError, FunctionNotFoundError
from oncefire.operations.functions import UNSERVED_AFTER
from oncefire.operations.redaction import redact
from oncefire.triggers import Trigger

DAY = 86400.0
# Dead letters a bulk replay or dismiss from the dashboard changes in one transaction, so a
# large group does not hold the store's write lock for one long statement (as the CLI's).
BULK_BATCH = 1000
GROUPS_WINDOW = 10_000  # the newest dead letters the error groups are counted over (dead_groups)


def colour(rate: float | None) -> str:
    """The success bar's colour: green at 99 % or more, amber at 90 %, red below, grey for none."""
    if rate is None:
        return "none"
    if rate >= 0.99:
        return "green"
    return "amber" if rate >= 0.90 else "red"


def known(app: App) -> dict[str, tuple[str, str, list[str], Trigger | None]]:
    """(kind, source, event types, trigger) of every event function: the app's, then those
    only the store knows (registered by another app; their options are unknown here)."""
    out: dict[str, tuple[str, str, list[str], Trigger | None]] = {
        name: (t.kind, t.source, list(t.event_types), t)
        for name, t in app.triggers.items()
        if t.kind.is_run_by_workers
    }
    with app.runtime.read_store.read() as tx:
        for record in tx.functions():
            if record.name not in out and record.name not in app.triggers:
                out[record.name] = (record.kind, record.source, list(record.event_types), None)
    return out


def trigger_of(app: App, name: str) -> None:
    """Check that name is an event function (HTTP functions have no deliveries), or 404."""
    if name not in known(app):
        raise FunctionNotFoundError(f"No function named {name!r} is registered with this app.")


def options_of(trigger: Trigger) -> dict[str, Any]:
    """A function's options, as shown."""
    opts, policy = trigger.options, trigger.options.retry_policy
    return {
        "retry": opts.retry,
        "retry_policy": {
            "max_attempts": policy.max_attempts,
            "first_delay": policy.first_delay,
            "multiplier": policy.multiplier,
            "max_delay": policy.max_delay,
        },
        "timeout": opts.timeout,
        "max_instances": opts.max_instances,
        "max_event_age": opts.max_event_age,
        "rate_limit": opts.rate_limit,
        "ordering": opts.ordering,
        "budget": None if opts.budget is None else opts.budget.text,
    }


def unserved(last_seen: float | None, pending: int, registered: bool, now: float) -> str | None:
    """Why no worker serves a function whose deliveries wait, or None when one does."""
    if pending == 0:
        return None
    if not registered:
        return f"this app does not register it: its {pending} pending deliveries wait"
    if last_seen is None:
        return f"no worker has served it yet: its {pending} pending deliveries wait"
    if now - last_seen > UNSERVED_AFTER:
        return (
            f"no worker has served it for {now - last_seen:.0f} s: its {pending} "
            "pending deliveries wait"
        )
    return None


def functions(app: App) -> list[dict[str, Any]]:
    """Every event function with its trigger, options and figures over the last 24 hours."""
    stats = app.stats(DAY)
    backlog = app.history.backlog()
    states = {r["name"]: r for r in app.runtime.read_store.reads.function_states()}
    now = app.clock.now()
    out = []
    for name, (kind, source, event_types, trigger) in known(app).items():
        figures = stats.get(name)
        waiting = backlog.get(name)
        rate = None if figures is None else figures.success_rate
        state = states.get(name, {})
        pending = 0 if waiting is None else waiting.pending
        out.append(
            {
                "name": name,
                "kind": kind,
                "source": source,
                "event_types": event_types,
                "options": None if trigger is None else options_of(trigger),
                "succeeded": 0 if figures is None else figures.succeeded,
                "failed": 0 if figures is None else figures.failed,
                "success_rate": rate,
                "colour": colour(rate),
                "dead_letters": 0 if figures is None else figures.dead_letters,
                "pending": pending,
                "oldest_pending_age": None if waiting is None else waiting.oldest_age,
                "p50_duration": None if figures is None else figures.p50_duration,
                "p95_duration": None if figures is None else figures.p95_duration,
                "dedupe_hits": 0 if figures is None else figures.dedupe_hits,
                "paused": state.get("paused_at") is not None,
                "paused_reason": state.get("paused_reason"),
                "last_seen": state.get("last_seen"),
                "unserved": unserved(state.get("last_seen"), pending, name in app.triggers, now),
            }
        )
    return out


def function(app: App, name: str) -> dict[str, Any]:
    """One function's summary and its attempts and failures per hour over 24 hours."""
    trigger_of(app, name)
    [summary] = [f for f in functions(app) if f["name"] == name]
    hours = app.history.attempts_per_hour(name, 24)
    summary["per_hour"] = [{"attempts": a, "failed": f} for a, f in hours]
    return summary


def dead_letter(app: App, dead_letter_id: int) -> dict[str, Any]:
    """One dead letter, payload redacted, with its delivery's full attempt history."""
    letter = app.dead_letters.get(dead_letter_id)
    out = redact(letter.to_dict())
    out["payload"] = redact(letter.payload)
    attempts = app.history.delivery_attempts(letter.event_id, letter.id)
    out["history"] = [a.to_dict() for a in attempts]
    return dict(out)


def dead_letters(
    app: App,
    name: str,
    *,
    error_contains: str | None = None,
    error_group: str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> dict[str, Any]:
    """A function's dead letters (newest first, payloads redacted), their count and groups.
    By error text, a search of the newest SEARCH_WINDOW dead letters (older than before):
    `count_is_lower_bound` says older ones were left unread, `next_before` searches on. By
    error group, an index walk and a count up to GROUP_COUNT_CAP (`count_is_lower_bound`
    past it); none, the kept count. Then `next_before` pages on."""
    trigger_of(app, name)
    if error_contains is not None and error_group is not None:
        raise ConfigError("Filter by error text or by error group, not both.")
    total = app.dead_letters.count(name)
    out: dict[str, Any] = {
        "total": total,
        "error_contains": error_contains,
        "error_group": error_group,
        "before": before,
        "searched": None,
        "count_is_lower_bound": False,
    }
    if error_contains is not None:
        found = app.dead_letters.search(name, error_contains, limit=limit, before=before)
        letters = found.items
        out.update(
            count=found.count,
            count_is_lower_bound=found.is_lower_bound,
            searched=found.searched,
            next_before=found.next_before,
        )
    else:
        letters = app.dead_letters.list(name, limit, error_group=error_group, before=before)
        if error_group is not None:
            group = app.dead_letters.count_group(name, error_group)
            out.update(count=group.count, count_is_lower_bound=group.is_lower_bound)
        else:
            out["count"] = total
        out["next_before"] = letters[-1].id if len(letters) == limit else None
    out["items"] = [redact(d.to_dict()) for d in letters]
    out["groups"] = [
        {"error": g.error, "count": g.count, "last_at": g.last_at}
        for g in app.history.dead_letter_groups(name)
    ]
    out["groups_searched"] = min(total, GROUPS_WINDOW)
    return out


def chart(per_hour: list[dict[str, int]], width: int = 480, height: int = 80) -> dict[str, Any]:
    """Bars (x, y, w, h, failed) of the failures per hour, for an inline SVG."""
    top = max((h["failed"] for h in per_hour), default=0) or 1
    step = width / max(len(per_hour), 1)
    bars = []
    for i, hour in enumerate(per_hour):
        h = round(hour["failed"] / top * (height - 10), 1)
        bars.append({"x": round(i * step, 1), "y": height - h, "w": step - 2, "h": h, **hour})
    return {"width": width, "height": height, "bars": bars, "top": top}
