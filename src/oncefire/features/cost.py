"""What each function spends: invocations, failed attempts, store reads and writes, CPU
seconds, and a money estimate from a price table (`oncefire cost`, and a section of `audit`).

Counts come from the hour buckets of attempts (so a window is counted in whole hours, the hour
that holds its start included); money from oncefire.features.prices. The model, in docs/audit.md:
every attempt is an invocation; compute is each attempt's wall-clock seconds times the memory
it is billed for, plus its CPU seconds when the table prices them; store cost is the document
reads and writes the function made. An attempt that did not succeed is spent on a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oncefire.errors import ConfigError
from oncefire.features.prices import PriceTable
from oncefire.retry import is_real
from oncefire.stores.reads import OutcomeSums

if TYPE_CHECKING:
    from oncefire.engine.runtime import Runtime

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class Spend:
    """Counts of some attempts and what they cost, by part."""

    attempts: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    reads: int = 0
    writes: int = 0
    invocations_cost: float = 0.0
    compute_cost: float = 0.0
    store_cost: float = 0.0

    @property
    def total(self) -> float:
        """The whole cost of these attempts."""
        return self.invocations_cost + self.compute_cost + self.store_cost

    @classmethod
    def of(cls, rows: list[OutcomeSums], prices: PriceTable, memory_gb: float) -> Spend:
        """Sum rows of one function and price them."""
        attempts = sum(r.attempts for r in rows)
        seconds = sum(r.seconds for r in rows)
        cpu = sum(r.cpu_seconds for r in rows)
        reads = sum(r.reads for r in rows)
        writes = sum(r.writes for r in rows)
        return cls(
            attempts,
            seconds,
            cpu,
            reads,
            writes,
            attempts / 1e6 * prices.per_million_invocations,
            seconds * memory_gb * prices.per_gb_second + cpu * prices.per_cpu_second,
            reads / 1e5 * prices.per_100k_reads + writes / 1e5 * prices.per_100k_writes,
        )

    def cost_dict(self) -> dict[str, float]:
        """The cost by part and in total."""
        return {
            "invocations": self.invocations_cost,
            "compute": self.compute_cost,
            "store": self.store_cost,
            "total": self.total,
        }


@dataclass(frozen=True, slots=True)
class FunctionCost:
    """One function's spending over the window: all its attempts, and those that failed."""

    name: str
    outcomes: dict[str, int]
    spent: Spend
    failures: Spend
    days: float

    @property
    def failure_cost_per_day(self) -> float:
        """What this function's failures cost a day at the window's rate."""
        return self.failures.total / self.days

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (see docs/audit.md for each field)."""
        return {
            "function": self.name,
            "invocations": self.spent.attempts,
            "succeeded": self.outcomes.get("succeeded", 0),
            "failed_attempts": self.failures.attempts,
            "outcomes": dict(sorted(self.outcomes.items())),
            "reads": self.spent.reads,
            "writes": self.spent.writes,
            "failed_reads": self.failures.reads,
            "failed_writes": self.failures.writes,
            "cpu_seconds": self.spent.cpu_seconds,
            "seconds": self.spent.seconds,
            "cost": self.spent.cost_dict(),
            "failure_cost": self.failures.total,
            "failure_cost_per_day": self.failure_cost_per_day,
        }

    def failure_line(self, currency: str) -> str:
        """The sentence a person reads about this function's failures."""
        return (
            f"{self.name}: its failures cost {money(self.failure_cost_per_day, currency)} a day "
            f"at the current rate ({self.failures.attempts} failed attempt(s) in the window)"
        )


@dataclass(frozen=True, slots=True)
class CostReport:
    """Every function's spending over a window, priced by one table."""

    since: float
    prices: PriceTable
    functions: tuple[FunctionCost, ...] = field(default_factory=tuple)

    @property
    def has_attempts(self) -> bool:
        """Whether any function ran in the window."""
        return any(f.spent.attempts for f in self.functions)

    @property
    def total(self) -> float:
        """What every function spent over the window."""
        return sum(f.spent.total for f in self.functions)

    @property
    def failure_total(self) -> float:
        """What every function's failures spent over the window."""
        return sum(f.failures.total for f in self.functions)

    def to_dict(self) -> dict[str, Any]:
        """The `--json` form: the window, the prices, each function and the totals."""
        return {
            "since": self.since,
            "currency": self.prices.currency,
            "prices": self.prices.to_dict(),
            "functions": [f.to_dict() for f in self.functions],
            "total": {
                "invocations": sum(f.spent.attempts for f in self.functions),
                "failed_attempts": sum(f.failures.attempts for f in self.functions),
                "cost": self.total,
                "failure_cost": self.failure_total,
                "failure_cost_per_day": self.failure_total / (self.since / DAY),
            },
        }

    def lines(self) -> list[str]:
        """The report for a person: a table, a line per function with failures, the total."""
        currency = self.prices.currency
        out = [
            f"{'function':<28} {'invocations':>11} {'failed':>8} {'reads':>9} {'writes':>9} "
            f"{'cpu s':>9} {'cost':>16}"
        ]
        for f in self.functions:
            out.append(
                f"{f.name:<28} {f.spent.attempts:>11,} {f.failures.attempts:>8,} "
                f"{f.spent.reads:>9,} {f.spent.writes:>9,} {f.spent.cpu_seconds:>9.3f} "
                f"{money(f.spent.total, currency):>16}"
            )
        out.extend(f.failure_line(currency) for f in self.functions if f.failures.attempts)
        out.append(
            f"total: {money(self.total, currency)}, of which failures "
            f"{money(self.failure_total, currency)} (prices: {self.prices.source})"
        )
        return out


def money(amount: float, currency: str) -> str:
    """An amount for a person: cents when it is a dollar or more, six decimals under it."""
    return f"{amount:,.2f} {currency}" if amount >= 1 else f"{amount:.6f} {currency}"


def estimate(
    rt: Runtime, *, since: float = 7 * DAY, prices: PriceTable | None = None
) -> CostReport:
    """Each function's spending over the last `since` seconds, priced by `prices` (the
    defaults when None). Functions the app registers appear even with no attempts."""
    if not is_real(since) or since <= 0:
        raise ConfigError(f"since={since!r} must be a positive number of seconds.")
    table = prices or PriceTable.load()
    rows_of: dict[str, list[OutcomeSums]] = {name: [] for name in rt.triggers}
    for row in rt.store.reads.cost_sums(rt.clock.now() - since):
        rows_of.setdefault(row.function, []).append(row)
    functions = []
    for name, rows in sorted(rows_of.items()):
        memory = table.memory_of(name)
        failed = [r for r in rows if r.outcome != "succeeded"]
        functions.append(
            FunctionCost(
                name,
                {r.outcome: r.attempts for r in rows},
                Spend.of(rows, table, memory),
                Spend.of(failed, table, memory),
                since / DAY,
            )
        )
    return CostReport(since, table, tuple(functions))
