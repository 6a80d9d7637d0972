"""Token buckets in the store: the tokens a lease may spend, and what it spent. The rules
(refill, burst, who waited) are the core's (rates.py); a store only reads, locks and writes the
rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from oncefire.model.rates import RateLimit, refill, waited
from oncefire.model.totals import RATE_LIMITED
from oncefire.stores.connection import Statements


class Buckets:
    """The buckets of one lease's rate-limited functions, as of `now`, read in its transaction."""

    def __init__(
        self, st: Statements, rates: Mapping[str, RateLimit], now: float, *, lock: bool
    ) -> None:
        self.now = now
        self.rates = rates
        names = sorted(rates)  # one lock order everywhere, so leasing workers never deadlock
        if lock:
            bursts = [rates[n].burst for n in names]
            st.execute("ensure_rate_buckets", {"functions": names, "tokens": bursts, "now": now})
            rows = st.fetch("lock_rate_buckets", {"functions": names})
        else:
            rows = st.fetch("rate_buckets", {"functions": names})
        # What each bucket held when it was last spent from (a new one, full now, is not here).
        self.stored = {r[0]: (float(r[1]), float(r[2])) for r in rows}
        found = self.stored
        self.refilled_at = {n: max(now, found[n][1]) if n in found else now for n in names}
        self.tokens = {
            n: refill(rates[n], *found[n], now) if n in found else rates[n].burst for n in names
        }

    def spend(self, st: Statements, taken: Sequence[tuple[str, float]]) -> None:
        """Take one token a delivery leased ((function, when it was due) each), and add those
        that waited for their token to the totals. A bucket nothing was taken from is not
        written (a write would wake every idle worker on SQLite)."""
        leased = Counter(function for function, _ in taken)
        rows = [
            {"function": n, "tokens": t - leased[n], "now": self.refilled_at[n]}
            for n, t in self.tokens.items()
            if leased[n]
        ]
        st.execute_many("spend_tokens", rows)
        waits = []
        for name, (tokens, refilled_at) in self.stored.items():
            due = [run_at for function, run_at in taken if function == name]
            count = waited(self.rates[name], tokens, refilled_at, due) if due else 0
            if count:
                waits.append({"function": name, "kind": RATE_LIMITED, "count": count})
        if waits:
            st.execute_many("add_to_total", waits)
