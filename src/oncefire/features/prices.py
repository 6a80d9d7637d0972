"""The price table `oncefire cost` turns counts into money with: a TOML file, defaults shipped.

The defaults (prices.toml in this package) are public list prices of a serverless platform
and a hosted document database, each with its source in a comment. A user's file overrides
any of its keys; an unknown key, a value that is not a non-negative number, or a file that is
not TOML is a PriceTableError naming the file and the key.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from oncefire.errors import PriceTableError

_SECTIONS: dict[str, tuple[str, ...]] = {
    "compute": ("per_million_invocations", "per_gb_second", "memory_gb", "per_cpu_second"),
    "store": ("per_100k_reads", "per_100k_writes"),
}


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices per unit of what oncefire counts, and the memory attempts are billed for."""

    currency: str
    per_million_invocations: float
    per_gb_second: float
    memory_gb: float
    per_cpu_second: float
    per_100k_reads: float
    per_100k_writes: float
    function_memory_gb: dict[str, float] = field(default_factory=dict)
    source: str = "defaults"

    def memory_of(self, function: str) -> float:
        """The memory, in GB, one attempt of this function is billed for."""
        return self.function_memory_gb.get(function, self.memory_gb)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every price."""
        return {
            "source": self.source,
            "currency": self.currency,
            "compute": {name: getattr(self, name) for name in _SECTIONS["compute"]},
            "store": {name: getattr(self, name) for name in _SECTIONS["store"]},
            "functions": {name: {"memory_gb": gb} for name, gb in self.function_memory_gb.items()},
        }

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """The default prices, overridden by the file at path when one is given."""
        defaults = _parse(
            resources.files("oncefire.features").joinpath("prices.toml").read_text("utf-8"),
            "defaults",
        )
        if path is None:
            return _build(defaults, {}, "defaults")
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise PriceTableError(f"Cannot read the price table {where!r}: {reason}.") from None
        return _build(defaults, _parse(text, where), where)


def _parse(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PriceTableError(f"The price table {where!r} is not valid TOML: {exc}.") from None


def _price(value: Any, where: str, key: str) -> float:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or value < 0:
        raise PriceTableError(
            f"The price table {where!r}: {key} = {value!r} must be a number of zero or more."
        )
    return float(value)


def _build(defaults: dict[str, Any], given: dict[str, Any], where: str) -> PriceTable:
    values: dict[str, Any] = {"currency": given.get("currency", defaults["currency"])}
    if not isinstance(values["currency"], str) or not values["currency"]:
        raise PriceTableError(f"The price table {where!r}: currency must be a non-empty string.")
    unknown = sorted(set(given) - {"currency", "functions", *_SECTIONS})
    if unknown:
        raise PriceTableError(
            f"The price table {where!r} has an unknown key {unknown[0]!r}: use currency, "
            "[compute], [store] and [functions.NAME]."
        )
    for section, keys in _SECTIONS.items():
        table = given.get(section, {})
        if not isinstance(table, dict):
            raise PriceTableError(f"The price table {where!r}: {section} must be a [table].")
        extra = sorted(set(table) - set(keys))
        if extra:
            raise PriceTableError(
                f"The price table {where!r} has an unknown key {section}.{extra[0]}: "
                f"{section} takes {', '.join(keys)}."
            )
        for key in keys:
            values[key] = _price(table.get(key, defaults[section][key]), where, f"{section}.{key}")
    memory: dict[str, float] = {}
    functions = given.get("functions", {})
    if not isinstance(functions, dict):
        raise PriceTableError(f"The price table {where!r}: functions must be a [table].")
    for name, table in functions.items():
        if not isinstance(table, dict) or set(table) - {"memory_gb"}:
            raise PriceTableError(
                f"The price table {where!r}: [functions.{name}] takes memory_gb only."
            )
        if "memory_gb" in table:
            memory[name] = _price(table["memory_gb"], where, f"functions.{name}.memory_gb")
    return PriceTable(**values, function_memory_gb=memory, source=where)
