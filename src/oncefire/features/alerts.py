"""Alerts: a callback per new dead letter, thresholds that call a hook or post a webhook once
per crossing, and the budget alert once per trip. What fired is remembered in the store, so
every worker can check, and an alert whose hook or webhook failed is fired again at the next
check."""

from __future__ import annotations

import json
import logging
import re
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from oncefire.errors import ConfigError, OncefireError
from oncefire.features.budget_guard import check_budget_alerts
from oncefire.operations.deadletters import DeadLetter, DeadLetters
from oncefire.stores import marks

if TYPE_CHECKING:
    from oncefire.engine.runtime import BudgetCallback, Runtime
    from oncefire.operations.history import History

log = logging.getLogger(__name__)
METRICS = ("dead_letters", "failure_rate", "oldest_pending_age")
_RULE = re.compile(rf"^\s*({'|'.join(METRICS)})\s*>\s*([0-9]+(?:\.[0-9]+)?)\s*$")
WATERMARK = "watermark:dead_letters"
SLACK = 120.0  # seconds: dead letters committed late, or by a worker whose clock lags
FIRST_LOOK_BACK = 86400.0  # how far back the first check looks for dead letters
BATCH = 200
DeadLetterCallback = Callable[[DeadLetter], Any]


@dataclass(frozen=True, slots=True)
class Threshold:
    """A rule such as `dead_letters > 10`, and what to call when it is crossed."""

    name: str
    metric: str
    above: float
    window: float = 3600.0
    function: str | None = None
    hook: Callable[[dict[str, Any]], Any] | None = None
    webhook: str | None = None


def post_webhook(url: str, body: dict[str, Any]) -> None:
    """POST body as JSON to url; an error status raises."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5):
        pass


class Alerts:
    """`app.alerts`: dead-letter callbacks and thresholds, checked by the workers."""

    def __init__(self, rt: Runtime, dead_letters: DeadLetters, history: History) -> None:
        self._rt = rt
        self._dead_letters = dead_letters
        self._history = history
        self.callbacks: list[DeadLetterCallback] = []
        self.thresholds: dict[str, Threshold] = {}
        self.budget_callbacks: list[BudgetCallback] = []
        self.budget_webhooks: list[str] = []

    def on_dead_letter(self, callback: DeadLetterCallback) -> DeadLetterCallback:
        """Call callback(dead_letter) once per new dead letter (at least once: key on its id)."""
        if not callable(callback):
            raise ConfigError(
                f"on_dead_letter takes a function of the dead letter; got {callback!r}."
            )
        self.callbacks.append(callback)
        return callback

    @overload
    def on_budget(self, callback: BudgetCallback) -> BudgetCallback: ...

    @overload
    def on_budget(self, *, webhook: str) -> None: ...

    def on_budget(
        self, callback: BudgetCallback | None = None, *, webhook: str | None = None
    ) -> BudgetCallback | None:
        """Call callback(alert), or POST the alert as JSON to webhook, once each time a
        function's budget trips and pauses it (at least once: a failure is tried again)."""
        if (callback is None) == (webhook is None):
            raise ConfigError(
                "on_budget takes one of a callback and a webhook=URL: call it once for each."
            )
        if webhook is not None:
            self.budget_webhooks.append(webhook)
        if callback is not None:
            self.budget_callbacks.append(callback)
        return callback

    def add(
        self,
        rule: str,
        *,
        name: str | None = None,
        function: str | None = None,
        window: float = 3600.0,
        hook: Callable[[dict[str, Any]], Any] | None = None,
        webhook: str | None = None,
    ) -> Threshold:
        """Fire hook and/or webhook once each time rule (`metric > N`) becomes true."""
        match = _RULE.match(rule)
        if match is None:
            raise ConfigError(
                f"Alert rule {rule!r} is not understood: write `METRIC > NUMBER` with METRIC "
                f"one of {', '.join(METRICS)}."
            )
        if hook is None and webhook is None:
            raise ConfigError(f"Alert {rule!r} needs a hook=callable or a webhook=URL.")
        threshold = Threshold(
            name or rule.replace(" ", ""),
            match.group(1),
            float(match.group(2)),
            window,
            function,
            hook,
            webhook,
        )
        self.thresholds[threshold.name] = threshold
        return threshold

    def value(self, threshold: Threshold, now: float) -> float:
        """The current value of a threshold's metric."""
        function = threshold.function
        if threshold.metric == "dead_letters":
            return float(self._dead_letters.count(function))
        if threshold.metric == "oldest_pending_age":
            ages = [
                b.oldest_age
                for name, b in self._history.backlog().items()
                if b.oldest_age is not None and function in (None, name)
            ]
            return max(ages, default=0.0)
        total = failed = 0
        for name, outcome, n in self._rt.store.reads.outcomes_since(now - threshold.window):
            if function in (None, name):
                total += n
                failed += 0 if outcome == "succeeded" else n
        return failed / total if total else 0.0

    def notify_dead_letters(self, now: float) -> int:
        """Call the callbacks for dead letters not yet notified; how many were notified."""
        store = self._rt.store
        seen = marks.mark_at(store, WATERMARK)
        since = now - FIRST_LOOK_BACK if seen is None else seen - SLACK
        found = store.reads.dead_since(since, BATCH)
        done = 0
        for dead_id, dead_at in found:
            key = f"dead_letter:{dead_id}:{dead_at!r}"
            if marks.is_marked(store, key):
                continue
            try:
                letter = self._dead_letters.get(dead_id)
            except OncefireError:
                continue  # replayed or dismissed since
            try:
                for callback in self.callbacks:
                    callback(letter)
            except Exception:
                log.exception("on_dead_letter callback failed for dead letter %d", letter.id)
                continue  # not marked: called again at the next check
            marks.mark(store, key, dead_at)
            done += 1
        if found:
            newest = max(dead_at for _, dead_at in found)
            marks.set_mark(store, WATERMARK, newest)
            marks.forget_marks(store, newest - 2 * SLACK)
        return done

    def check(self, now: float) -> int:
        """Notify new dead letters and fire crossed thresholds; how many alerts fired. A failing
        store is logged, never raised: the worker's maintenance goes on."""
        fired = 0
        try:
            if self.callbacks:
                fired += self.notify_dead_letters(now)
            for threshold in list(self.thresholds.values()):
                fired += self.check_threshold(threshold, now)
            fired += check_budget_alerts(self._rt)
        except OncefireError:
            log.exception("checking alerts failed; they are checked again at the next sweep")
        return fired

    def fire(
        self,
        key: str,
        name: str,
        body: dict[str, Any],
        hooks: Sequence[Callable[[dict[str, Any]], Any]],
        webhooks: Sequence[str],
        now: float,
    ) -> bool:
        """Fire an alert once under key: mark it in the store, call the hooks with body and
        post it to the webhooks; when one fails the mark is taken back, so the next check fires
        it again. Whether it fired (False when it had fired already, here or elsewhere)."""
        store = self._rt.store
        if not marks.mark(store, key, now):
            return False
        try:
            for hook in hooks:
                hook(body)
            for url in webhooks:
                post_webhook(url, body)
        except Exception:
            log.exception("alert %s failed to fire; it will be tried again", name)
            marks.unmark(store, key)
            return False
        return True

    def check_threshold(self, threshold: Threshold, now: float) -> bool:
        """Fire a threshold if it has just crossed its limit; whether it fired."""
        store, key = self._rt.store, f"threshold:{threshold.name}"
        value = self.value(threshold, now)
        if value <= threshold.above:
            marks.unmark(store, key)
            return False
        body = {
            "alert": threshold.name,
            "metric": threshold.metric,
            "above": threshold.above,
            "value": value,
            "function": threshold.function,
            "at": now,
        }
        hooks = [] if threshold.hook is None else [threshold.hook]
        webhooks = [] if threshold.webhook is None else [threshold.webhook]
        if not self.fire(key, threshold.name, body, hooks, webhooks, now):
            return False  # fired already for this crossing (here or in another worker), or failed
        log.warning(
            "alert %s fired: %s = %g > %g", threshold.name, threshold.metric, value, threshold.above
        )
        return True


def check_alerts(rt: Runtime, now: float) -> int:
    """Run the app's alert checks (Alerts.check) if it has alerts; how many fired."""
    return 0 if rt.alerts is None else rt.alerts.check(now)
