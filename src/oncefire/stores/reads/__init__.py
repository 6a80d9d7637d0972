"""The read model (contract.py) and its SQL implementation (sql.py)."""

from oncefire.stores.reads.contract import (
    Awaited,
    DeepLineage,
    FailureGroup,
    Halves,
    LoopingEvent,
    OutcomeSums,
    ReadModel,
)

__all__ = [
    "Awaited",
    "DeepLineage",
    "FailureGroup",
    "Halves",
    "LoopingEvent",
    "OutcomeSums",
    "ReadModel",
]
