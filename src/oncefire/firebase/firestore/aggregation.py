"""Aggregation queries as `google.cloud.firestore` runs them: count(), sum(), avg().

`query.count().get()` is `[[AggregationResult(alias, value, read_time)]]`, one result per
aggregation; one without an alias is named `field_1`, `field_2`, ... by its place, as the
server names them. sum() and avg() take the numbers of the field and skip other values: a
sum of whole numbers is whole, an average is a float, None when no number was found.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from oncefire.firebase.firestore.document import DocumentSnapshot
from oncefire.transforms import field_names


class Nested(Protocol):
    """The query an aggregation runs over."""

    def stream(self, transaction: Any = None, **options: Any) -> Iterator[DocumentSnapshot]:
        """The query's results."""
        ...


class AggregationResult:
    """One aggregation's value, as `google.cloud.firestore_v1.aggregation.AggregationResult`."""

    def __init__(self, alias: str, value: float | None, read_time: datetime | None = None):
        self.alias = alias
        self.value = value
        self.read_time = read_time

    def __repr__(self) -> str:
        return f"<Aggregation alias={self.alias}, value={self.value}, readtime={self.read_time}>"


@dataclass(frozen=True, slots=True)
class CountAggregation:
    """count(): how many results."""

    alias: str | None = None


@dataclass(frozen=True, slots=True)
class SumAggregation:
    """sum(field): the total of the field's numbers."""

    field_ref: str
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class AvgAggregation:
    """avg(field): the mean of the field's numbers."""

    field_ref: str
    alias: str | None = None


Aggregation = CountAggregation | SumAggregation | AvgAggregation


class AggregationQuery:
    """Aggregations over a query, as `google.cloud.firestore_v1.aggregation.AggregationQuery`."""

    def __init__(self, nested_query: Nested) -> None:
        self._nested_query = nested_query
        self._aggregations: list[Aggregation] = []

    def count(self, alias: str | None = None) -> AggregationQuery:
        """Add a count of the results."""
        return self.add_aggregation(CountAggregation(alias))

    def sum(self, field_ref: str, alias: str | None = None) -> AggregationQuery:
        """Add the sum of a numeric field."""
        field_names(field_ref, "sum field")
        return self.add_aggregation(SumAggregation(field_ref, alias))

    def avg(self, field_ref: str, alias: str | None = None) -> AggregationQuery:
        """Add the average of a numeric field."""
        field_names(field_ref, "avg field")
        return self.add_aggregation(AvgAggregation(field_ref, alias))

    def add_aggregation(self, aggregation: Aggregation) -> AggregationQuery:
        """Add one aggregation."""
        self._aggregations.append(aggregation)
        return self

    def add_aggregations(self, aggregations: list[Aggregation]) -> None:
        """Add several aggregations."""
        self._aggregations.extend(aggregations)

    def get(self, transaction: Any = None, **_: Any) -> list[list[AggregationResult]]:
        """The results: one list of one AggregationResult per aggregation."""
        return list(self.stream(transaction))

    def stream(self, transaction: Any = None, **_: Any) -> Iterator[list[AggregationResult]]:
        """The results, as get() gives them, one list at a time."""
        snapshots = list(self._nested_query.stream(transaction=transaction))
        read_time = snapshots[0].read_time if snapshots else None
        results = []
        for place, aggregation in enumerate(self._aggregations, start=1):
            alias = aggregation.alias or f"field_{place}"
            results.append(AggregationResult(alias, _value(aggregation, snapshots), read_time))
        yield results


def _value(aggregation: Aggregation, snapshots: list[DocumentSnapshot]) -> float | None:
    if isinstance(aggregation, CountAggregation):
        return len(snapshots)
    numbers = []
    for snapshot in snapshots:
        try:
            value = snapshot.get(aggregation.field_ref)
        except KeyError:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            numbers.append(value)
    if isinstance(aggregation, SumAggregation):
        return sum(numbers)
    return sum(numbers) / len(numbers) if numbers else None
