"""Token buckets in the store: the tokens a lease may spend, and what it spent. The rules
(refill, burst) are the core's (rates.py); a store only reads, locks and writes the rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from oncefire.rates import RateLimit, refill
from oncefire.stores.connection import Statements


class Buckets:
    """The buckets of one lease's rate-limited functions, as of `now`, read in its transaction."""

    def __init__(
        self, st: Statements, rates: Mapping[str, RateLimit], now: float, *, lock: bool
    ) -> None:
        self.now = now
        names = sorted(rates)  # one lock order everywhere, so leasing workers never deadlock
        if lock:
            bursts = [rates[n].burst for n in names]
            st.execute("ensure_rate_buckets", {"functions": names, "tokens": bursts, "now": now})
            rows = st.fetch("lock_rate_buckets", {"functions": names})
        else:
            rows = st.fetch("rate_buckets", {"functions": names})
        found = {r[0]: (float(r[1]), float(r[2])) for r in rows}
        self.refilled_at = {n: max(now, found[n][1]) if n in found else now for n in names}
        self.tokens = {
            n: refill(rates[n], *found[n], now) if n in found else rates[n].burst for n in names
        }

    def spend(self, st: Statements, leased: Counter[str]) -> None:
        """Take one token a delivery leased; a bucket nothing was taken from is not written
        (a write would wake every idle worker on SQLite)."""
        rows = [
            {"function": n, "tokens": t - leased[n], "now": self.refilled_at[n]}
            for n, t in self.tokens.items()
            if leased[n]
        ]
        st.execute_many("spend_tokens", rows)
